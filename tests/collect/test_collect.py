"""`debugger collect` end to end (the console script in a subprocess): the bundle layout and manifest, node tools
skipped when absent and run when present, ptrace refusals recorded with their fix, the refusals of bad usage, no
write outside --out, and — where py-spy can attach — real dumps that `debugger ask` reads to name the rank that
sits outside the collective."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from trainlog_debugger.agent.collect.snapshot import explain_failure, find_pyspy, ib_ports

from .conftest import fake_tool, pyspy_python, run_debugger, start_job

# py-spy's refusal, verbatim (py-spy 0.4.3 as uid 65534 against a root process; also what ptrace_scope=1 gives)
REFUSED = "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'"
# ibstat's format (infiniband-diags; tabs as it prints them), two adapters, one port each
IBSTAT = ("CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tFirmware version: 20.31.1014\n\tPort 1:\n"
          "\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tBase lid: 5\n"
          "\t\tLink layer: InfiniBand\nCA 'mlx5_1'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n"
          "\t\tState: Down\n\t\tPhysical state: Polling\n\t\tLink layer: InfiniBand\n")


def _env(bindir: Path, **extra) -> dict:
    """The environment of a collect run: PATH holds only bindir (and what python needs nothing of)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUGGER_PYSPY",)}
    env["PATH"] = str(bindir)
    env.update(extra)
    return env


def _fake_pyspy(bindir: Path, refuse_pids: set[int] = frozenset()) -> str:
    """A py-spy stand-in: prints py-spy's text format (or its JSON) for the pid it is given, or its real refusal."""
    refuse = " ".join(map(str, refuse_pids)) or "none"
    fake_tool(bindir, "fake-py-spy", f'''pid="$3"
for r in {refuse}; do if [ "$r" = "$pid" ]; then echo '{REFUSED}' >&2; exit 1; fi; done
if [ "$4" = "--json" ]; then
  echo '[{{"pid": '$pid', "thread_id": 1, "thread_name": "MainThread", "os_thread_id": '$pid', "active": false,'
  echo '"owns_gil": false, "frames": [{{"name": "all_reduce",'
  echo '"filename": "/x/torch/distributed/distributed_c10d.py",'
  echo '"module": null, "short_filename": "torch/distributed/distributed_c10d.py", "line": 2501, "locals": null}}]}}]'
else
  printf 'Process %s: python train.py\\nPython v3.11.2 (/usr/bin/python3.11)\\n\\n' $pid
  printf 'Thread %s (idle): "MainThread"\\n' $pid
  printf '    all_reduce (torch/distributed/distributed_c10d.py:2501)\\n    <module> (train.py:9)\\n'
fi
''')
    return str(bindir / "fake-py-spy")


def test_manifest_layout_and_absent_tools_skipped(job, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    spy = _fake_pyspy(bindir, refuse_pids={job.ranks[3]})
    out = tmp_path / "incident"
    r = run_debugger("collect", "--out", str(out), "--host", "node-a", *sum((["--pid", str(p)] for p in job.ranks),
                     []), env=_env(bindir, DEBUGGER_PYSPY=spy))
    assert r.returncode == 0, r.stderr
    host = out / "node-a"
    m = json.loads((host / "collect.json").read_text())
    assert (m["format"], m["version"], m["host"]) == ("trainlog-debugger/collect", 1, "node-a")
    assert m["time"].endswith("Z") and m["tools"]["python"] == ".".join(map(str, sys.version_info[:3]))
    procs = {p["rank"]: p for p in m["processes"]}
    assert sorted(procs) == [0, 1, 2, 3]
    for r_, p in procs.items():
        assert (p["pid"], p["ppid"], p["local_rank"], p["world_size"], p["group_rank"]) == \
            (job.ranks[r_], job.agent.pid, r_, 4, 0)
        assert "hf_abcdefghij" not in p["cmdline"] and "--hf-token" in p["cmdline"]  # the secret is redacted
    stem = f"rank-0.pid-{job.ranks[0]}"
    assert procs[0]["dumps"] == [f"stacks/{stem}.pyspy.txt", f"stacks/{stem}.pyspy.json"] and procs[0]["error"] is None
    assert (host / "stacks" / f"{stem}.pyspy.txt").read_text().startswith(f"Process {job.ranks[0]}: ")
    json.loads((host / "stacks" / f"{stem}.pyspy.json").read_text())
    # the refused rank: no file, the reason and how to fix it, and the others were still collected
    assert procs[3]["dumps"] == [] and procs[3]["error"] == "ptrace refused" and procs[3]["fix"]
    assert not list((host / "stacks").glob("rank-3.*"))
    snaps = {s["name"]: s for s in m["snapshots"]}
    for name in ("nvidia-smi-q", "nvidia-smi-topo", "ibstat", "ibv_devinfo", "perfquery", "dmesg", "journalctl-k"):
        assert snaps[name]["skipped"].endswith("not found on PATH") and snaps[name]["file"] is None, name
    assert snaps["dcgmi-diag"]["skipped"].startswith("not requested")
    assert sorted(p.name for p in host.iterdir()) == ["collect.json", "stacks"]
    assert "ptrace refused" in r.stderr and "1 processes not dumped" in r.stderr


@pytest.mark.slow
def test_present_tools_are_run_per_port_and_dmesg_falls_back(job, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    spy = _fake_pyspy(bindir)
    fake_tool(bindir, "nvidia-smi", 'if [ "$1" = "-q" ]; then printf "\\n==============NVSMI LOG==============\\n\\n'
              'Timestamp                                 : Thu Nov 26 17:16:27 2026\\nDriver Version'
              '                            : 550.54.15\\nCUDA Version                              : 12.4\\n"; '
              'else printf "\\tGPU0\\tCPU Affinity\\nGPU0\\t X \\t0-63\\n"; fi\n')
    fake_tool(bindir, "ibstat", f"cat <<'EOF'\n{IBSTAT}EOF\n")
    fake_tool(bindir, "perfquery", 'echo "# Port counters: Lid 5 port $4 (CapMask: 0x1400) ca $2"; '
              'echo "PortXmitData:....................6402\"\n')
    fake_tool(bindir, "dmesg", 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1\n')
    fake_tool(bindir, "journalctl", 'echo "Nov 26 17:01:02 node-a kernel: NVRM: Xid (PCI:0000:3b:00): 79, '
              'pid=0, GPU has fallen off the bus."\n')
    fake_tool(bindir, "dcgmi", 'sleep 30\n')  # a wedged host engine: stopped at the timeout
    out = tmp_path / "incident"
    r = run_debugger("collect", "--out", str(out), "--host", "node-a", "--pid", str(job.ranks[0]), "--dcgm",
                     "--timeout", "2", env=_env(bindir, DEBUGGER_PYSPY=spy))
    assert r.returncode == 0, r.stderr
    host = out / "node-a"
    m = json.loads((host / "collect.json").read_text())
    snaps = {}
    for s in m["snapshots"]:
        snaps.setdefault(s["name"], []).append(s)
    assert "NVSMI LOG" in (host / "nvidia-smi-q.txt").read_text()
    assert snaps["nvidia-smi-topo"][0]["command"] == "nvidia-smi topo -m" and (host / "nvidia-smi-topo-m.txt").exists()
    assert [s["command"] for s in snaps["perfquery"]] == ["perfquery -C mlx5_0 -P 1", "perfquery -C mlx5_1 -P 1"]
    pq = (host / "perfquery.txt").read_text()
    assert pq.count("# Port counters") == 2 and "### perfquery -C mlx5_1 -P 1" in pq
    assert snaps["ibv_devinfo"][0]["skipped"] == "ibv_devinfo not found on PATH"
    assert snaps["dmesg"][0]["rc"] == 1 and "Operation not permitted" in snaps["dmesg"][0]["error"]
    assert snaps["dmesg"][0]["file"] is None and snaps["journalctl-k"][0]["file"] == "dmesg.txt"
    assert "GPU has fallen off the bus" in (host / "dmesg.txt").read_text()
    dc = snaps["dcgmi-diag"][0]
    assert dc["timed_out"] and "timeout" in dc["error"] and dc["seconds"] < 15


@pytest.mark.slow
def test_refusals_are_one_line_and_exit_2(job, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = _env(bindir, DEBUGGER_PYSPY=_fake_pyspy(bindir))
    pid = ["--pid", str(job.ranks[0])]
    stranger = tmp_path / "notes"
    stranger.mkdir()
    (stranger / "todo.txt").write_text("x")
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = {
        "not empty": (["--out", str(stranger), *pid], "not empty"),
        "a file": (["--out", str(afile), *pid], "not a directory"),
        "bad host": (["--out", str(tmp_path / "o1"), "--host", "../up", *pid], "--host"),
        "no such pid": (["--out", str(tmp_path / "o2"), "--pid", str(2**22 + 4321)], "no such process"),
        "bad timeout": (["--out", str(tmp_path / "o3"), "--timeout", "0", *pid], "--timeout"),
        "no --out": (pid, "--out"),
    }
    for name, (args, words) in cases.items():
        r = run_debugger("collect", *args, env=env)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert "Traceback" not in r.stderr
    assert (stranger / "todo.txt").read_text() == "x" and not (tmp_path / "o1").exists()
    assert not (tmp_path / "o2").exists()  # nothing found: nothing written
    # py-spy missing: one line naming the extra to install
    r = run_debugger("collect", "--out", str(tmp_path / "o4"), *pid,
                     env=_env(bindir, DEBUGGER_PYSPY=str(bindir / "no")))
    assert r.returncode == 2 and "pip install 'trainlog-debugger[collect]'" in r.stderr
    assert not (tmp_path / "o4").exists()


@pytest.mark.slow
def test_other_hosts_share_out_and_no_host_is_overwritten(job, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = _env(bindir, DEBUGGER_PYSPY=_fake_pyspy(bindir))
    out = tmp_path / "incident"
    args = ["collect", "--out", str(out), "--pid", str(job.ranks[1])]
    assert run_debugger(*args, "--host", "node-a", env=env).returncode == 0
    (out / "node-c").mkdir()  # a node still writing: its directory exists, its manifest not yet
    r = run_debugger(*args, "--host", "node-b", env=env)
    assert r.returncode == 0, r.stderr
    before = (out / "node-a" / "collect.json").read_text()
    r = run_debugger(*args, "--host", "node-a", env=env)
    assert r.returncode == 2 and "already exists" in r.stderr
    assert (out / "node-a" / "collect.json").read_text() == before
    assert sorted(p.name for p in out.iterdir()) == ["node-a", "node-b", "node-c"]


def _tree(root: Path, skip: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if skip not in p.parents and p != skip}


def test_nothing_is_written_outside_out(job, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # the node tools write what they print only; a tool that writes a file of its own writes it in its cwd, which
    # collect sets to OUT/<host>
    fake_tool(bindir, "ibv_devinfo", 'echo "hca_id: mlx5_0"; echo scratch > ibv.scratch\n')
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    out = tmp_path / "incident"
    env = _env(bindir, DEBUGGER_PYSPY=_fake_pyspy(bindir), HOME=str(home), TMPDIR=str(home))
    before = _tree(tmp_path, out)
    r = run_debugger("collect", "--out", str(out), "--host", "n1", "--pid", str(job.ranks[2]), cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    assert _tree(tmp_path, out) == before
    assert (out / "n1" / "ibv.scratch").exists() and (out / "n1" / "ibv_devinfo.txt").read_text() == "hca_id: mlx5_0\n"


def test_ibstat_ports_and_failure_explanations():
    assert ib_ports(IBSTAT) == [("mlx5_0", 1), ("mlx5_1", 1)]
    assert ib_ports("CA 'mlx5_0'\n\tPort 0:\n\tPort 999:\n") == [] and ib_ports("") == []
    assert explain_failure("Error: Failed to get process executable name. Check that the process is running.",
                           1)[0] == "the process is gone"
    what, fix = explain_failure("Error: Failed to find python version from target process\n\nStack backtrace:", 1)
    assert "could not read this interpreter" in what and "faulthandler" in fix
    what, fix = explain_failure(REFUSED, 1)
    assert what == "ptrace refused" and fix


# --- real py-spy ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_real_dumps_name_the_rank_outside_the_collective(tmp_path):
    py = pyspy_python()
    if py is None:
        pytest.skip("no py-spy that can attach to a Python here")
    job = start_job(tmp_path, py)
    try:
        out = tmp_path / "incident"
        r = run_debugger("collect", "--out", str(out), "--host", "node-a", env=dict(os.environ))
        assert r.returncode == 0, r.stderr
        m = json.loads((out / "node-a" / "collect.json").read_text())
        mine = {p["rank"]: p for p in m["processes"] if p["pid"] in job.ranks}
        assert sorted(mine) == [0, 1, 2, 3] and all(p["error"] is None for p in mine.values()), m["processes"]
        text = (out / "node-a" / "stacks" / f"rank-2.pid-{job.ranks[2]}.pyspy.txt").read_text()
        assert "_read_sample (train.py:" in text and "train_step (train.py:" in text
        doc = json.loads((out / "node-a" / "stacks" / f"rank-0.pid-{job.ranks[0]}.pyspy.json").read_text())
        assert [f["name"] for f in doc[0]["frames"]][:2] == ["all_reduce", "train_step"]
        assert job.agent.poll() is None and all(Path(f"/proc/{p}").exists() for p in job.ranks)  # still running
    finally:
        job.stop()


@pytest.mark.slow
def test_real_ptrace_refusal_is_recorded_with_its_fix(tmp_path):
    """As an unprivileged user against a root process, py-spy is refused (the real message, not a stand-in)."""
    py, spy, setpriv = pyspy_python(), find_pyspy(), shutil.which("setpriv")
    if py is None or os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root, setpriv and a py-spy that can attach")
    target = subprocess.Popen([py, "-c", "import time; time.sleep(120)"])
    shared = Path(tempfile.mkdtemp(prefix="collect-nobody-"))  # pytest's tmp_path is closed to other users
    shared.chmod(0o777)
    try:
        out = shared / "o"
        env = dict(os.environ, DEBUGGER_PYSPY=spy)
        r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                            "from trainlog_debugger.agent.cli.app import run; run()", "collect", "--out", str(out),
                            "--host", "n", "--pid", str(target.pid)], capture_output=True, text=True, env=env,
                           timeout=120)
        if r.returncode == 1 and "Permission denied" in r.stderr and str(shared) not in r.stderr:
            pytest.skip(f"uid 65534 cannot run the project's python here: {r.stderr[-200:]}")
        m = json.loads((out / "n" / "collect.json").read_text())
        p = m["processes"][0]
        assert p["error"] == "ptrace refused" and "uid 0" in p["fix"] and p["rank"] is None
        assert p["env_error"] and p["dumps"] == [] and not list((out / "n").glob("stacks/*"))
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(shared, ignore_errors=True)
