"""Run real torchrun jobs (CPU, gloo) with injected faults and save each run as a case in cases/lab-*/.

By hand only, never in CI (it needs torch, which the project does not depend on, and takes ~6 minutes on 2 cores):

    python -m venv /tmp/labenv && /tmp/labenv/bin/pip install torch==2.13.0 numpy pyyaml lightning==2.6.6 \
        transformers==5.23.0 accelerate==1.15.0 pillow==13.0.0
    /tmp/labenv/bin/python eval/lab/run_lab.py            # every run, writes cases/lab-*/
    /tmp/labenv/bin/python eval/lab/run_lab.py --only lab-gloo4-b --keep /tmp/labscratch
    /tmp/labenv/bin/python eval/lab/run_lab.py --truth-only    # rewrite truth.yaml from the plan, run nothing

Each run is `python -m torch.distributed.run --nproc-per-node=N --tee 3 (or --redirects 3) --log-dir <stage>/logs
eval/lab/train.py ...`, staged in /tmp/trainlab/job-<id> (a neutral path: it shows in the logs) and then moved to
cases/<slug>/. The launcher's console (stdout + stderr, as a SLURM job's output file holds it) goes to
`torchrun.out`, and torchrun's own layout stays as it wrote it: `logs/<run_id>_<random>/attempt_0/<local_rank>/
{stdout.log,stderr.log,error.json}`. Nothing is trimmed or edited. Then `truth.yaml` is written from the run's
plan (eval/lab/plan.py: the runs as data), with evidence lines copied verbatim from the files the run produced (a run
whose expected evidence is missing is reported and not saved, unless --save-anyway).

Runs with nnodes > 1 start one torchrun agent per "node" on this machine, each writing node<i>/torchrun.out and
node<i>/logs/. Every run has a wall-clock limit; on expiry every process the run started (torchrun and its workers,
found by parent pid) is sent SIGKILL by pid. Slugs are neutral: they never name the fault.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

if __package__:
    from trainlog_debugger.eval.lab.plan import Run, plan
else:  # run by path from the lab's venv, which has torch but not this project: this folder is on sys.path
    from plan import Run, plan

REPO = Path(__file__).resolve().parents[2]
MAX_CASE_BYTES = 2_000_000
STAGE = Path(tempfile.gettempdir()) / "trainlab"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(root: int) -> list[int]:
    """Pids whose parent chain reaches `root` (workers run in their own sessions, so a process group is not enough)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def ours(pid: int) -> bool:
    """A pid seen under this run's torchrun that still runs the lab (not a reused pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"eval/lab/train" in cmd or b"torch.distributed.run" in cmd


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def agent_cmd(run: Run, dest: Path, python: str, port: int, node: int, extra: list[str]) -> list[str]:
    """One torchrun agent's command line (node `node` of run.nnodes)."""
    logs = dest / (f"node{node}/logs" if run.nnodes > 1 else "logs")
    rid = run.rdzv_ids[node] if run.rdzv_ids else run.job_id
    if run.rdzv == "static":
        rdzv = [f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}", f"--rdzv-id={rid}"]
    else:
        rdzv = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={rid}"]
    if run.rdzv_conf:
        rdzv.append(f"--rdzv-conf={run.rdzv_conf}")
    return [python, "-m", "torch.distributed.run", f"--nnodes={run.nnodes}", f"--nproc-per-node={run.nproc_node()}",
            *rdzv, "--max-restarts=0", "--tee" if run.stdio == "tee" else "--redirects", "3", "--log-dir", str(logs),
            run.script, "--steps", "30", "--fault", run.fault, "--fault-rank", str(run.rank), "--fault-step",
            str(run.step), *run.args, *extra]


def launch(run: Run, dest: Path, python: str) -> tuple[int | None, float]:
    """Run the torchrun agent(s) for `run`, writing into `dest`; returns (worst exit code or None on timeout, s)."""
    port = free_port()
    extra: list[str] = []
    volume = STAGE / f"ckpt-{run.job_id}"  # --out of the HF runs: outside the case (checkpoints are not logs)
    held = None
    if run.setup.startswith(("volume:", "dir")):
        if volume.exists():
            subprocess.run(["umount", str(volume)], stderr=subprocess.DEVNULL)
            shutil.rmtree(volume)
        volume.mkdir(parents=True)
        if run.setup.startswith("volume:"):  # a small filesystem of its own: a real ENOSPC when it is full
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={run.setup.split(':')[1]}k", "tmpfs", str(volume)],
                           check=True)
        extra = ["--out", str(volume)]
    if run.setup == "port-taken":  # another program (a previous job, a notebook) already listens on the port
        held = socket.socket()
        held.bind(("127.0.0.1", port))
        held.listen()
    if run.fault == "nofile":
        extra = ["--shard-dir", str(STAGE / f"data-{run.job_id}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "NCCL", "LAB_", "PYTHONPATH"))}
    env.update({"PYTHONUNBUFFERED": "1", **run.env})
    t0 = time.time()
    procs, outs = [], []
    try:
        for node in range(run.agents if run.agents is not None else run.nnodes):
            out_dir = dest / f"node{node}" if run.nnodes > 1 else dest
            out_dir.mkdir(parents=True, exist_ok=True)
            out = open(out_dir / "torchrun.out", "wb")
            outs.append(out)
            procs.append(subprocess.Popen(agent_cmd(run, dest, python, port, node, extra), cwd=REPO, env=env,
                                          stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            if node + 1 < run.nnodes:
                time.sleep(1.0)  # the second node's agent starts a moment later, as on a real cluster
        seen: set[int] = set()
        rcs: dict[int, int] = {}
        timed_out = False
        while len(rcs) < len(procs):
            for pr in procs:
                seen.update(descendants(pr.pid))
            for pr in procs:
                if pr.pid not in rcs and pr.poll() is not None:
                    rcs[pr.pid] = pr.returncode
            if len(rcs) < len(procs):
                if time.time() - t0 > run.limit_s:
                    timed_out = True
                    break
                time.sleep(1)
        for pid in sorted(seen | ({pr.pid for pr in procs} if timed_out else set())):
            ours(pid) and _kill(pid)  # only processes this run started that are still there
        for pr in procs:
            pr.wait()
    finally:
        for out in outs:
            out.close()
        if held is not None:
            held.close()
        if run.setup.startswith(("volume:", "dir")):
            if run.setup.startswith("volume:"):
                subprocess.run(["umount", str(volume)], check=False)
            shutil.rmtree(volume, ignore_errors=True)
        if run.fault == "nofile":
            shutil.rmtree(STAGE / f"data-{run.job_id}", ignore_errors=True)
    rc = None if timed_out else max(rcs.values(), key=lambda c: c != 0)
    return rc, time.time() - t0


def find(dest: Path, glob: str, rx: str) -> str | None:
    pat = re.compile(rx)
    for f in sorted(dest.glob(glob)):
        for line in f.read_text(errors="replace").splitlines():
            if pat.search(line):
                return line
    return None


ASCTIME = re.compile(r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3}) ")


def first_failure_time(run: Run, dest: Path) -> str | None:
    """The fault happens right after the culprit's last timestamped line (within a step, ~0.1 s): its time."""
    if not run.timed or run.category == "none":
        return None
    last = None
    for f in dest.glob(run.rank_glob(max(run.rank, 0))):
        for line in f.read_text(errors="replace").splitlines():
            m = ASCTIME.match(line)
            if m:
                last = f"{m[1]}T{m[2]}.{m[3]}"
                if run.fft_rx and re.search(run.fft_rx, line):
                    return last
    return last


def truth(run: Run, lines: list[str], fft: str | None) -> dict:
    t = {"category": run.category, "culprit_ranks": [run.rank] if run.rank >= 0 else [],
         "culprit_nodes": [], "root_cause": run.root_cause, "evidence": lines,
         **({"first_failure_time": fft} if fft else {}),
         "tags": ["lab", "gloo", "cpu", *run.tags], "title": f"lab: {run.title}",
         "framework": run.framework, "scale": (f"{run.nproc} ranks on 1 node (CPU processes)" if run.nnodes == 1 else
                                                f"{run.nproc} ranks, {run.nnodes} torchrun agents of "
                                                f"{run.nproc_node()} (CPU processes, one machine)"),
         "confidence": "high", "source_url": "eval/lab/run_lab.py"}
    notes = (f"Real run of {run.script} under torchrun (--{run.stdio} 3, --log-dir), job id {run.job_id}"
             f"{', ' + str(run.nnodes) + ' agents (node<i>/torchrun.out, node<i>/logs)' if run.nnodes > 1 else ''}. "
             f"{run.notes}").strip()
    t["notes"] = notes
    return t


def write_truth(run: Run, dest: Path) -> list[str]:
    """truth.yaml from the plan and the run's files; returns the evidence patterns that found nothing."""
    found = [(g, rx, find(dest, g, rx)) for g, rx in run.evidence]
    (dest / "truth.yaml").write_text(
        yaml.safe_dump(truth(run, [line for _, _, line in found if line], first_failure_time(run, dest)),
                       sort_keys=False, width=110, allow_unicode=True), encoding="utf-8")
    return [f"{g} /{rx}/" for g, rx, line in found if line is None]


def rewrite_truth(runs: list[Run], out: Path) -> int:
    bad = 0
    for run in runs:
        dest = out / run.slug
        if not any(dest.glob("**/torchrun.out")):
            print(f"{run.slug}: no case folder in {out}, skipped")
            continue
        missing = write_truth(run, dest)
        bad += bool(missing)
        print(f"{run.slug}: truth.yaml rewritten" + (f"; MISSING evidence: {missing}" if missing else ""))
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="slugs to run (default: all)")
    ap.add_argument("--out", default=str(REPO / "cases"), help="where the case folders go")
    ap.add_argument("--keep", help="write runs here and do not touch --out (a scratch run)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that has torch")
    ap.add_argument("--save-anyway", action="store_true", help="save a run even if expected evidence is missing")
    ap.add_argument("--truth-only", action="store_true",
                    help="run nothing: rewrite truth.yaml of the existing case folders from the plan")
    a = ap.parse_args(argv)
    runs = [r for r in plan() if not a.only or r.slug in a.only]
    out = Path(a.keep or a.out)
    if a.truth_only:
        return rewrite_truth(runs, out)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for run in runs:
        stage = STAGE / f"job-{run.job_id}"  # a neutral path: it shows in the logs (error_file: ...)
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir(parents=True)
        rc, secs = launch(run, stage, a.python)
        found = [(g, rx, find(stage, g, rx)) for g, rx in run.evidence]
        missing = [f"{g} /{rx}/" for g, rx, line in found if line is None]
        size = sum(f.stat().st_size for f in stage.rglob("*") if f.is_file())
        status = "timeout" if rc is None else f"rc={rc}"
        print(f"{run.slug}: {run.fault} rank {run.rank} step {run.step}, {run.nproc} ranks: {status} in {secs:.0f}s, "
              f"{size / 1e6:.2f} MB" + (f"; MISSING evidence: {missing}" if missing else ""), flush=True)
        if rc is None or size > MAX_CASE_BYTES or (missing and not a.save_anyway):
            failed += 1
            print(f"  not saved; the run is left in {stage}", flush=True)
            continue
        write_truth(run, stage)
        final = out / run.slug
        if final.exists():
            if not final.name.startswith("lab-"):
                raise SystemExit(f"refusing to replace {final}")
            shutil.rmtree(final)
        shutil.move(str(stage), str(final))
        os.chmod(final, 0o755)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
