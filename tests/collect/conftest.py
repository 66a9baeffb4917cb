"""What the collect tests share: a REAL process tree standing in for a torchrun job, the debugger run as a
subprocess, and stand-ins for the node tools that print those tools' real formats (from their documentation and
measured runs; see agent/collect/snapshot.py's docstring), so the snapshot logic is tested where the tools are
absent (CI)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

DEBUGGER = [sys.executable, "-c", "from trainlog_debugger.agent.cli.app import run; run()"]
if not sys.platform.startswith("linux"):
    pytest.skip("debugger collect reads /proc (Linux only)", allow_module_level=True)

# The "agent": a script NAMED torchrun (as the console script is), which starts one child per rank with torchrun's
# worker environment, plus a helper child with no rank (as multiprocessing's resource tracker is). Each rank starts
# its own "DataLoader worker" (inheriting its environment), and sleeps in a named function: rank ODD in
# `_read_sample`, the others in `all_reduce`.
AGENT = textwrap.dedent('''
    import os, subprocess, sys, time
    world, odd, py = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    kids = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), GROUP_RANK="0",
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        secret = ["--hf-token", "hf_abcdefghijklmnopqrstuvwxyzABCDEF"]  # a launcher line's accidental secret
        kids.append(subprocess.Popen([py, sys.argv[4], str(r), str(odd), *secret], env=env))
    helper = subprocess.Popen([py, "-c", "import time; time.sleep(3600)"])
    print(" ".join(str(k.pid) for k in kids), helper.pid, flush=True)
    time.sleep(3600)
''')
RANK = textwrap.dedent('''
    import subprocess, sys, time
    rank, odd = int(sys.argv[1]), int(sys.argv[2])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])  # inherits RANK
    print(worker.pid, flush=True)

    def _read_sample(idx):
        while True:
            time.sleep(3600)

    def all_reduce(tensor):
        while True:
            time.sleep(3600)

    def train_step():
        if rank == odd:
            return _read_sample(17)
        return all_reduce([1.0])

    train_step()
''')


class Job:
    """A running fake job: agent pid, rank pids (index = rank), helper pid, and the tree's every pid."""

    def __init__(self, agent: subprocess.Popen, ranks: list[int], helper: int):
        self.agent, self.ranks, self.helper = agent, ranks, helper
        self.pids = {agent.pid, helper, *ranks}

    def stop(self) -> None:
        """SIGKILL the session this test started (by its id: the agent leads it)."""
        try:
            os.killpg(self.agent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in self.pids - {self.agent.pid}:  # children that started sessions of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.agent.wait(timeout=30)


def start_job(tmp: Path, python: str, world: int = 4, odd: int = 2) -> Job:
    d = tmp / "job"
    d.mkdir(exist_ok=True)
    (d / "torchrun").write_text(AGENT)
    (d / "train.py").write_text(RANK)
    agent = subprocess.Popen([python, str(d / "torchrun"), str(world), str(odd), python, str(d / "train.py")],
                             stdout=subprocess.PIPE, text=True, start_new_session=True, cwd=d)
    first = agent.stdout.readline().split()
    if len(first) != world + 1:
        agent.kill()
        raise RuntimeError(f"the fake agent did not start: {first}")
    *ranks, helper = map(int, first)
    job = Job(agent, ranks, helper)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # every rank has started its worker and entered its sleeping function
        kids = _children(set(ranks))
        if len(kids) >= world:
            job.pids |= kids
            time.sleep(0.5)
            return job
        time.sleep(0.1)
    job.stop()
    raise RuntimeError("the fake ranks did not start their workers")


def _children(parents: set[int]) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) in parents:
                out.add(int(d))
    return out


@pytest.fixture
def job(tmp_path):
    j = start_job(tmp_path, sys.executable)
    yield j
    j.stop()


def pyspy_python(candidates: tuple[str, ...] = (sys.executable, "/usr/bin/python3")) -> str | None:
    """A Python whose processes the installed py-spy can dump (py-spy cannot read every build: measured, it reads
    Debian's /usr/bin/python3 but not the pyenv build of the project's venv), or None."""
    from trainlog_debugger.agent.collect.snapshot import find_pyspy
    spy = find_pyspy()
    if spy is None:
        return None
    for py in candidates:
        if not os.path.exists(py):
            continue
        p = subprocess.Popen([py, "-c", "import time\ndef _idle():\n    time.sleep(60)\n_idle()"])
        try:
            time.sleep(1.5)  # py-spy cannot read an interpreter still starting
            r = subprocess.run([spy, "dump", "--pid", str(p.pid)], capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and "_idle" in r.stdout:
                return py
        finally:
            p.kill()
            p.wait()
    return None


def fake_tool(bindir: Path, name: str, body: str) -> None:
    """An executable `name` in bindir running the shell `body` (with the system's PATH inside: the collect run
    itself sees only bindir)."""
    p = bindir / name
    p.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    p.chmod(0o755)


def run_debugger(*args, env: dict | None = None, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(DEBUGGER + list(args), capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)
