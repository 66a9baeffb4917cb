"""Start-up of `debugger scan` (issue 16): the fast path (agent/cli/fast.py) runs a scan without loading Typer,
click, rich or pydantic, does exactly what the Typer command does, and leaves every other command line, help and
usage errors to Typer. What is loaded is asserted, never how long it takes (eval/bench measures time)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.agent.cli.fast import parse, scan

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "gen-slurm-8r-a"
BIG = ROOT / "cases" / "gen-1024r-027"
HEAVY = ("typer", "click", "rich", "pydantic", "pydantic_core")
# the console script, reporting the top-level packages it loaded when it exits (to the file named by argv[1])
PROBE = ("import atexit, sys\n"
         "out = sys.argv.pop(1)\n"
         "atexit.register(lambda: open(out, 'w').write('\\n'.join(sorted({m.split('.')[0] for m in sys.modules}))))\n"
         "from trainlog_debugger.agent.cli.app import run\n"
         "run()\n")


def _debugger(args, tmp_path, **kw):
    loaded = tmp_path / "modules.txt"
    r = subprocess.run([sys.executable, "-c", PROBE, str(loaded), *args], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, **kw)
    return r, set(loaded.read_text().split()) if loaded.exists() else set()


def _same_scan(a: str, b: str) -> None:
    x, y = json.loads(a), json.loads(b)
    x["seconds"] = y["seconds"] = 0
    x["generated_at"] = y["generated_at"] = ""  # the second run may start in the next second
    assert x == y


@pytest.mark.parametrize("opts", [["--json"], ["--json", "--engine", "re", "--workers=1"], ["--no-redact", "--json"]])
def test_a_scan_for_a_machine_loads_no_front_end_and_no_pydantic(tmp_path, opts):
    r, loaded = _debugger(["scan", str(CASE), *opts], tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "trainlog_debugger" in loaded  # the probe saw the run
    # `--` before the path: the same command line for Typer, one the fast path leaves to it
    typer_run, typer_loaded = _debugger(["scan", *opts, "--", str(CASE)], tmp_path)
    assert typer_run.returncode == 0 and "typer" in typer_loaded, typer_run.stderr
    _same_scan(r.stdout, typer_run.stdout)  # the fast path is the Typer command, without Typer


@pytest.mark.slow
def test_the_text_view_is_the_typer_commands_too(tmp_path):
    volatile = re.compile(r"\d+(\.\d+)? ?(s|MB/s|GB/s)\b")
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")  # wide enough for whole pattern ids
    r, loaded = _debugger(["scan", str(CASE)], tmp_path, env=env)
    typer_run, typer_loaded = _debugger(["scan", "--", str(CASE)], tmp_path, env=env)
    assert r.returncode == 0 == typer_run.returncode
    assert "typer" not in loaded and "rich" in loaded and "typer" in typer_loaded  # the table needs rich only
    assert volatile.sub("#", r.stdout) == volatile.sub("#", typer_run.stdout)
    assert "pytorch.watchdog_timeout" in r.stdout and "all but 5" in r.stdout


def test_a_missing_path_is_one_line_and_exit_2_on_both_paths(tmp_path):
    missing = str(tmp_path / "no-such-bundle")
    r, loaded = _debugger(["scan", missing, "--json"], tmp_path)
    assert r.returncode == 2 and r.stdout == "" and "typer" not in loaded
    assert r.stderr.startswith("error: ") and missing in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    typer_run, _ = _debugger(["scan", "--json", "--", missing], tmp_path)
    assert (typer_run.returncode, typer_run.stdout, typer_run.stderr) == (r.returncode, r.stdout, r.stderr)
    in_process = CliRunner().invoke(app, ["scan", missing, "--json"])  # SystemExit from fail(), through Typer
    assert in_process.exit_code == 2 and in_process.stderr == r.stderr


def test_a_closed_pipe_ends_a_fast_scan_quietly_with_0():
    p = subprocess.Popen([sys.executable, "-c", "from trainlog_debugger.agent.cli.app import run; run()",
                          "scan", str(BIG), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()  # the reader went away, like `| head -c 10`
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == "", err


@pytest.mark.parametrize("argv, expected", [
    (["scan", "b"], ([Path("b")], {})),
    (["scan", "--json", "a", "b.tar.gz"], ([Path("a"), Path("b.tar.gz")], {"json_": True})),
    (["scan", "a", "--engine=re", "--workers", "2", "--no-redact"],
     ([Path("a")], {"engine": "re", "workers": 2, "no_redact": True})),
    (["scan", "-", "--json"], ([Path("-")], {"json_": True})),  # a log on stdin
])
def test_the_forms_the_fast_path_takes(argv, expected):
    command = parse(argv)
    assert command is not None and command.func is scan
    assert (command.args[0], command.keywords) == expected


@pytest.mark.parametrize("argv", [
    [], ["scan"], ["scan", "--json"], ["scan", "a", "--help"], ["scan", "a", "-h"], ["--version"], ["ask", "a"],
    ["scan", "a", "--workers", "two"], ["scan", "a", "--workers", "-1"], ["scan", "a", "--workers", "+2"],
    ["scan", "a", "--workers"], ["scan", "a", "--engine", "--json"], ["scan", "a", "--json", "--json"],
    ["scan", "a", "--json=1"], ["scan", "a", "--"], ["scan", "a", "--bogus"], ["scan", ""], ["scan", "a", "-j"],
    ["scan", "a", "--engine=re", "--engine", "hyperscan"],
])
def test_everything_else_is_left_to_typer(argv):
    assert parse(argv) is None


def test_typer_still_owns_help_and_usage_errors(tmp_path):
    r, loaded = _debugger(["scan", "--help"], tmp_path)
    assert r.returncode == 0 and "--no-redact" in r.stdout and "typer" in loaded
    r, _ = _debugger(["scan", str(CASE), "--workers", "two"], tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "--workers" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_a_fast_scan_that_cannot_write_its_output_says_so_in_one_line(tmp_path):
    """The fast path ends with a hard exit after flushing (agent/cli/app.py _exit_now): a flush that fails (here a
    file-size limit, as a full disk would) is one line and exit 1, never a traceback."""
    import resource
    import signal

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output held until the final flush
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank_0.log").write_text("[rank0]: hello\n")  # its JSON (~1 KB) fits stdout's buffer
    with open(tmp_path / "out.json", "wb") as out:
        r = subprocess.run([sys.executable, "-c", "from trainlog_debugger.agent.cli.app import run; run()",
                            "scan", str(tmp_path / "logs"), "--json"], stdout=out, stderr=subprocess.PIPE, text=True,
                           preexec_fn=small_files, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: cannot write the output") and r.stderr.count("\n") == 1, r.stderr
