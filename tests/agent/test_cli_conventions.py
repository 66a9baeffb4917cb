"""Command-line conventions (issue 12, item 5), the way ripgrep and git behave: each tested through the real
console script in a subprocess, since exit codes, pipes and stdin are the point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
BIG = Path(__file__).resolve().parents[2] / "cases" / "gen-1024r-027"
DEBUGGER = [sys.executable, "-c", "from trainlog_debugger.agent.cli.app import run; run()"]


def _run(args, **kw):
    return subprocess.run(DEBUGGER + list(args), capture_output=True, text=True, timeout=300, **kw)


def test_markdown_dash_writes_to_stdout():
    r = _run(["ask", str(CASE), "--markdown", "-"])
    assert r.returncode == 0 and r.stdout.startswith("# Post-mortem: hung"), r.stdout[:200]


def test_an_unwritable_output_path_fails_before_the_analysis(tmp_path):
    r = _run(["ask", str(BIG), "--markdown", str(tmp_path / "no" / "such" / "dir" / "pm.md")])
    assert r.returncode == 2 and r.stderr.startswith("error: --markdown") and len(r.stderr.splitlines()) == 1
    assert r.stdout == ""  # nothing was analysed


@pytest.mark.slow
def test_grep_exits_1_when_nothing_matched():
    assert _run(["grep", "no-such-text-anywhere-xyz", str(CASE)]).returncode == 1
    assert _run(["grep", "Watchdog caught", str(CASE)]).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("args", [["scan", str(BIG)], ["ask", str(BIG), "--full"], ["ask", str(BIG), "--json"]])
def test_a_closed_pipe_exits_quietly_with_0(args):
    p = subprocess.Popen(DEBUGGER + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # the reader went away, like `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and "Traceback" not in err and "Broken pipe" not in err, err


@pytest.mark.parametrize("args", [["ask", str(CASE), "--budget", "5"], ["ask", str(CASE), "--max-rounds", "x"],
                                  ["nosuchcommand"], ["ask"]])
def test_invalid_usage_is_one_line_and_exit_2(args):
    r = _run(args)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_help_short_flag_version_and_completion():
    r = _run(["-h"])
    assert r.returncode == 0 and "ask" in r.stdout
    assert "--install-completion" in r.stdout
    r = _run(["ask", "-h"])
    assert r.returncode == 0 and "PATH... [QUESTION]" in r.stdout
    assert _run(["--version"]).stdout.startswith("debugger ")


@pytest.mark.slow
def test_a_single_log_on_stdin():
    log = (CASE / "error-4891784-1.out").read_text()
    r = _run(["ask", "-"], input=log)
    assert r.returncode == 0 and "data_loading_stall" in r.stdout.splitlines()[0]
    assert "stdin.log:" in r.stdout  # cited as the file it was read into


@pytest.mark.slow
def test_every_command_takes_json():
    for cmd in (["schema"], ["catalog"], ["scan", str(CASE)], ["nccl", str(CASE)], ["grep", "NCCL", str(CASE)],
                ["diff", str(CASE)], ["steps", str(CASE)], ["fr", str(CASE)], ["ais", str(CASE)]):
        r = _run(cmd + ["--json"])
        assert r.returncode in (0, 2), (cmd, r.stderr)
        help_text = _run(cmd[:1] + ["-h"]).stdout
        assert "--json" in help_text, cmd
        assert cmd[0] == "schema" or "--format text|json" in help_text, cmd  # the report commands: --format too


@pytest.mark.parametrize("args, says", [
    (["scan", str(CASE), "--format", "html"], "scan has no html output; choose one of: text, json"),
    (["scan", str(CASE), "--json", "--format", "text"], "--format text and --json ask for different formats"),
    (["ask", str(CASE), "--json", "--html", "-"], "--json and --html - ask for different formats"),
])
def test_a_format_the_command_lacks_or_two_that_disagree_are_one_line_and_exit_2(args, says):
    r = _run(args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: ") and says in r.stderr and f" {args[0]} --help`" in r.stderr


@pytest.mark.slow
def test_html_page_is_written(tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "pm.html"
    r = _run(["ask", str(CASE), "--html", str(out)])
    assert r.returncode == 0 and out.read_text().startswith("<!DOCTYPE html>")
    r = _run(["ask", str(CASE), "--html", str(tmp_path / "nope" / "pm.html")])
    assert r.returncode == 2 and "--html" in r.stderr


@pytest.mark.parametrize("cmd", ["ask", "scan", "grep", "nccl", "diff", "eval", "ais"])
def test_help_shows_no_python_type_names(cmd):
    r = _run([cmd, "-h"])
    assert r.returncode == 0 and not any(t in r.stdout for t in ("<list[", "<str>", "<int>", "<Path", "<bool>")), \
        r.stdout


def test_markdown_nests_lists_for_python_markdown_too():
    """CommonMark nests a list under `1. ` with 3 spaces, Python-Markdown needs 4: 4 works in both."""
    md = _run(["ask", str(CASE), "--markdown", "-"]).stdout
    nested = [ln for ln in md.split("\n") if ln.lstrip().startswith("- `") and ln.startswith(" ")]
    assert nested and all(ln.startswith("    - ") for ln in nested)


def test_every_value_option_and_argument_shows_a_metavar_in_help():
    """Issue 29: `--engine` and `--workers` showed no metavar, so help did not say what value they take."""
    import typer

    from trainlog_debugger.agent.cli.app import app
    group = typer.main.get_command(app)
    missing = []
    for name, cmd in group.commands.items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or getattr(p, "count", False) or getattr(p, "hidden", False):
                continue
            if not p.metavar:
                missing.append(f"{name} {p.opts[0]}")
    assert not missing, missing
    assert "--engine hyperscan|re" in _run(["scan", "-h"]).stdout


@pytest.mark.parametrize("args, says", [(["scan", str(CASE), "--engine", "bogus"], "choose one of: hyperscan, re"),
                                        (["scan", str(CASE), "--workers", "0"], "--workers"),
                                        (["grep", "x", str(CASE), "--max-lines", "0"], "--max-lines")])
def test_a_bad_option_value_is_a_usage_error_not_an_internal_one(args, says):
    r = _run(args)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert says in r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_pipe_given_as_a_path_is_read_like_stdin():
    """`debugger ask <(zcat run.log.gz)`: the shell passes /dev/fd/N, a pipe (issue 29: it was refused)."""
    import os
    import threading

    log = (CASE / "error-4891784-1.out").read_bytes()
    r_fd, w_fd = os.pipe()

    def feed():
        with os.fdopen(w_fd, "wb") as w:
            w.write(log)

    t = threading.Thread(target=feed)
    t.start()
    try:
        r = subprocess.run(DEBUGGER + ["ask", f"/dev/fd/{r_fd}", "--offline"], capture_output=True, text=True,
                           timeout=300, pass_fds=(r_fd,))
    finally:
        os.close(r_fd)
        t.join()
    assert r.returncode == 0 and "data_loading_stall" in r.stdout.splitlines()[0], r.stderr
    assert f"fd-{r_fd}.log:" in r.stdout  # cited as the pipe it was read from


@pytest.mark.parametrize("typo", ["./tyop", "logs/run1", "rank_0.log", "~/bundle"])
def test_a_trailing_argument_that_looks_like_a_path_is_a_missing_path_not_a_question(typo):
    r = _run(["ask", str(CASE), typo, "--offline"])
    assert r.returncode == 2 and r.stderr.startswith("error: no such file or directory"), r.stderr


@pytest.mark.slow
def test_a_one_word_question_is_still_a_question():
    r = _run(["ask", str(CASE), "why?", "--offline"])
    assert r.returncode == 0 and "data_loading_stall" in r.stdout, r.stderr
