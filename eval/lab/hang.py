"""The lab hang: hang a real CPU torchrun job on purpose, collect it live with `debugger collect`, diagnose the
bundle with `debugger ask`, then kill the job. By hand (and in tests/collect/test_lab_hang.py where torch and a
working py-spy exist), never in CI:

    /usr/bin/python3 -m venv /tmp/labenv-deb && /tmp/labenv-deb/bin/pip install torch==2.13.0
    . .venv/bin/activate                    # the project's env: `debugger` and py-spy ([collect] extra)
    python eval/lab/hang.py --lab-python /tmp/labenv-deb/bin/python --out /tmp/incident-hang
    python eval/lab/hang.py --lab-python /tmp/labenv-deb/bin/python --save cases/lab-hang-collect

The job is eval/lab/train.py under `python -m torch.distributed.run --nproc-per-node=4` (gloo, one all_reduce per
gradient: --grad-sync manual, one DataLoader worker process per rank), with the `stall` fault: rank 2's
Dataset.__getitem__ blocks forever at step 5, so rank 2's main thread waits in the DataLoader for a batch that
never comes while ranks 0, 1 and 3 wait in the next all_reduce. The process-group timeout is set far past the run
(--pg-timeout 900), so nothing is printed anywhere: the hang is visible only in where each rank's threads are.

Why the Python matters: py-spy must read the workers' interpreter. It reads Debian's /usr/bin/python3 (3.11) but
not every build ("Failed to find python version from target process" on a pyenv build here), so the lab venv is
made from the distribution's python. The debugger itself runs from the project's env (--debugger).

Hung = the launcher's output has not grown for --quiet seconds after the first `step` line. The job (torchrun and
its workers, which this script started in their own session) is SIGKILLed by process group when done, whatever
happened. Exit code 0 when `debugger ask` named rank 2 as data_loading_stall, else 1. --save writes the case from
any run that hung and was collected (its truth is the plan's, not ask's answer), leaving out the node's dmesg.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "eval/lab/train.py"
NPROC, CULPRIT, STEP = 4, 2, 5
MAX_CASE_BYTES = 1_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_job(lab_python: str, stage: Path) -> subprocess.Popen:
    """torchrun in its own session (so the whole job is one process group to kill), console into stage."""
    argv = [lab_python, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={NPROC}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--max-restarts=0",
            str(TRAIN), "--steps", "30", "--workers", "1", "--grad-sync", "manual", "--pg-timeout", "900",
            "--fault", "stall", "--fault-rank", str(CULPRIT), "--fault-step", str(STEP)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                              "MASTER_PORT", "PYTHONPATH", "VIRTUAL_ENV")}
    env["OMP_NUM_THREADS"] = "1"
    log = open(stage / "torchrun.out", "wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=stage, start_new_session=True)


def wait_hung(job: subprocess.Popen, console: Path, quiet: float, deadline: float) -> bool:
    """True once the job printed a step and then nothing for `quiet` seconds; False if it ended or ran out of
    time first."""
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if job.poll() is not None:
            return False
        n = console.stat().st_size if console.exists() else 0
        if n != size:
            size, since = n, time.monotonic()
        elif b" step " in console.read_bytes() and time.monotonic() - since >= quiet:
            return True
        time.sleep(0.5)
    return False


def _procs() -> dict[int, str]:
    """{pid: command line} of every process this user can see (/proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                out[int(d)] = Path(f"/proc/{d}/cmdline").read_bytes()[:4096].replace(b"\0", b" ").decode("utf-8",
                                                                                                      "replace")
            except OSError:
                pass
    return out


def _children(ppid: int) -> list[int]:
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(Path(f"/proc/{d}/stat").read_text().rpartition(")")[2].split()[1]) == ppid:
                    kids.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return sorted(kids)


def _tree(root: int) -> list[int]:
    """root's descendants, found before anything is killed (an orphan is re-parented and lost to the walk)."""
    out, todo = [], [root]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def kill_job(job: subprocess.Popen) -> None:
    """SIGKILL everything this script started: torchrun's session, and by pid its workers and their DataLoader
    workers, which torch.distributed.elastic starts in sessions of their own (a killpg alone leaves them running)."""
    pids = _tree(job.pid)
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    job.wait(timeout=30)


def run(lab_python: str, debugger: list[str], out: Path, quiet: float = 6.0, limit: float = 180.0,
        own_pids: bool = False) -> dict:
    """Hang the job, collect it, ask. Returns {hung, collect_rc, collect_out, ask (the --json report or None)}."""
    stage = Path(tempfile.mkdtemp(prefix="lab-hang-"))
    job = start_job(lab_python, stage)
    res: dict = {"stage": str(stage), "hung": False, "collect_rc": None, "ask": None}
    try:
        res["hung"] = wait_hung(job, stage / "torchrun.out", quiet, time.monotonic() + limit)
        if not res["hung"]:
            res["console"] = (stage / "torchrun.out").read_text("utf-8", "replace")[-3000:]
            return res
        # plain `debugger collect` finds the job as on a real node; own_pids points it at this job's workers, for
        # a machine that other torchrun jobs share (test suites running side by side each hang one)
        cmds = _procs()
        mine = [a for pid in _children(job.pid) if str(TRAIN) in cmds.get(pid, "") for a in ("--pid", str(pid))]
        mine = mine if own_pids else []
        c = subprocess.run([*debugger, "collect", "--out", str(out), *mine], capture_output=True, text=True,
                           timeout=300)
        res["collect_rc"], res["collect_out"] = c.returncode, c.stdout + c.stderr
    finally:
        kill_job(job)
    a = subprocess.run([*debugger, "ask", str(out), "--json"], capture_output=True, text=True, timeout=300)
    try:
        res["ask"] = json.loads(a.stdout)
    except ValueError:
        res["ask_out"] = a.stdout[-2000:] + a.stderr[-2000:]
    return res


def verdict(report: dict | None) -> tuple[str | None, list[int]]:
    """(category, culprit ranks) of a `debugger ask --json` report, wherever this version keeps them."""
    if not report:
        return None, []
    d = report.get("diagnosis", report)
    return d.get("category"), list(d.get("culprit_ranks") or [])


TRUTH = """category: data_loading_stall
culprit_ranks:
- {culprit}
culprit_nodes: []
root_cause: 'Rank {culprit}''s Dataset.__getitem__ blocked forever at step {step} (a read that never returns), so
  its main thread waited in the DataLoader for a batch while ranks {others} waited in the gradient all_reduce.
  Nothing was printed: the process-group timeout (900 s) was far off; the hang shows only in the live stack dumps.'
evidence:
- '{evidence}'
first_failure_time: null
tags:
- lab
- gloo
- cpu
- hang
- stack-dumps
- collect
title: 'lab: a rank stuck reading data, collected live with debugger collect (4 ranks, py-spy dumps)'
framework: torch 2.13.0 CPU, gloo, torchrun
scale: 4 ranks on 1 node (CPU processes)
confidence: high
source_url: eval/lab/hang.py
notes: Real hung run of eval/lab/train.py (--fault stall --fault-rank {culprit} --fault-step {step} --grad-sync manual
  --workers 1) under torchrun; `debugger collect` ran while it hung, then the job was killed. The case is the
  collected bundle only (collect.json, py-spy dumps), no training log; the node's dmesg.txt was left out (the lab
  machine's boot log, nothing of the job; collect.json still lists it) and the other snapshot tools are absent on the lab machine.
"""


def save(out: Path, case: Path) -> int:
    """Copy the collected bundle into a case folder with its truth.yaml (refused past MAX_CASE_BYTES)."""
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    if size > MAX_CASE_BYTES:
        print(f"not saved: the bundle is {size:,} bytes (> {MAX_CASE_BYTES:,})", file=sys.stderr)
        return 1
    dumps = sorted(out.glob(f"*/stacks/rank-{CULPRIT}.pid-*.pyspy.txt"))
    line = next((ln for d in dumps for ln in d.read_text().splitlines() if "_read" in ln or "_try_get_data" in ln),
                None)
    if line is None:
        print("not saved: no dump of the culprit rank shows it reading data", file=sys.stderr)
        return 1
    if case.exists():
        shutil.rmtree(case)
    # the lab machine's kernel log is its boot log: nothing of the job, everything of the lab VM; left out
    shutil.copytree(out, case, ignore=shutil.ignore_patterns("dmesg.txt"))
    others = ", ".join(str(r) for r in range(NPROC) if r != CULPRIT)
    (case / "truth.yaml").write_text(TRUTH.format(culprit=CULPRIT, step=STEP, others=others,
                                                  evidence=line.strip().replace("'", "''")))
    print(f"saved {case} ({size:,} bytes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab-python", default="/tmp/labenv-deb/bin/python", help="a python with torch (Debian's)")
    p.add_argument("--debugger", default=shutil.which("debugger") or "debugger", help="the debugger command")
    p.add_argument("--out", type=Path, help="the collect directory (default: a new temporary one)")
    p.add_argument("--save", type=Path, help="also save the bundle as this case folder, with truth.yaml")
    p.add_argument("--own-pids", action="store_true", help="collect with --pid of this job's workers (a machine "
                   "where other torchrun jobs run too)")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="incident-hang-")) / "bundle"
    res = run(a.lab_python, [a.debugger], out, own_pids=a.own_pids)
    cat, ranks = verdict(res["ask"])
    print(f"hung: {res['hung']}  collect rc: {res['collect_rc']}  ask: {cat} {ranks}  bundle: {out}")
    if not res["hung"]:
        print(res.get("console", ""), file=sys.stderr)
    ok = (cat, ranks) == ("data_loading_stall", [CULPRIT])
    if a.save and res["hung"] and res["collect_rc"] == 0:  # the truth is the plan's, whatever ask said
        if save(out, a.save):
            return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
