"""`debugger collect`: run on every node of a live, hung job; writes OUT/<host>/ (agent/collect/bundle.py holds the
layout), which `debugger ask OUT` then reads. Exit codes: 0 something was collected, 2 bad usage or nothing found
(one line on stderr), 1 an unexpected error (options.guarded)."""

from __future__ import annotations

from pathlib import Path

import typer

from trainlog_debugger.agent.cli.options import err, fail, guarded, out


def _line(rec: dict) -> str:
    if "pid" in rec:
        who = f"rank {rec['rank']}" if rec["rank"] is not None else "rank ?"
        if rec["error"]:
            return f"  {who} pid {rec['pid']}: NOT dumped: {rec['error']}" + (f" (fix: {rec['fix']})" if rec["fix"]
                                                                              else "")
        return f"  {who} pid {rec['pid']}: {', '.join(rec['dumps'])}"
    if rec["skipped"]:
        return f"  {rec['command']}: skipped ({rec['skipped']})"
    state = f"rc {rec['rc']}" + (f": {rec['error'].splitlines()[0][:160]}" if rec["error"] else "")
    return f"  {rec['command']}: {rec['file'] or 'no output'} ({state}, {rec['seconds']:.1f} s)"


def collect(out_dir: Path = typer.Option(..., "--out", metavar="DIR", help="The shared incident directory: this node writes only "
                                         "OUT/<host>/ (run the same command on every node)."),
            pid: list[int] = typer.Option(None, "--pid", metavar="PID", help="Dump exactly this process (repeatable); default: the "
                                          "workers of every torchrun agent on this node, else the processes with "
                                          "RANK/LOCAL_RANK in their environment."),
            host: str = typer.Option(None, "--host", metavar="NAME", help="The name of this node's directory (default: the host "
                                     "name)."),
            native: bool = typer.Option(False, "--native", help="Also dump native (C/C++) frames: slower; shows "
                                        "where in NCCL or a kernel launch a rank waits."),
            nonblocking: bool = typer.Option(False, "--nonblocking", help="Do not pause the processes while their "
                                             "stacks are read (the stacks may then be inconsistent)."),
            dcgm: bool = typer.Option(False, "--dcgm", help="Also run `dcgmi diag -r 1` (runs quick GPU tests)."),
            timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS", help="Seconds each command may run (py-spy, "
                                          "nvidia-smi, ...) before it is stopped.")):
    """Collect a live, hung job's evidence on this node: every rank's Python stacks (py-spy dump, text and JSON) and
    GPU / InfiniBand / kernel snapshots (nvidia-smi -q, nvidia-smi topo -m, ibstat, ibv_devinfo, perfquery,
    dmesg -T), then run `debugger ask OUT` on the result.

    Run it on every node, e.g. `srun --overlap --jobid $JOBID -N$NODES --ntasks-per-node=1 debugger collect --out
    /shared/incident-42`. It only reads: it never signals or stops a process. py-spy pauses each process for the
    few milliseconds it takes to read its stacks (accepted practice for live jobs; --nonblocking avoids even that).
    Attaching needs ptrace: run as the job's user or root (in a container: --cap-add SYS_PTRACE).

    Exit codes: 0 something was collected; 2 bad usage or nothing found.
    """
    if not (0 < timeout <= 3600):
        fail(f"--timeout must be between 0 and 3600 seconds, not {timeout:g}")
    with guarded():
        from trainlog_debugger.agent.collect.bundle import CollectError, collect as run_collect
        try:
            m = run_collect(out_dir, host=host, pids=pid or None, native=native, nonblocking=nonblocking, dcgm=dcgm,
                            timeout=timeout, progress=lambda rec: err.print(_line(rec), markup=False))
        except CollectError as e:
            fail(str(e))
        dumped = [p for p in m["processes"] if p["dumps"]]
        snaps = [s for s in m["snapshots"] if s["file"]]
        refused = [p for p in m["processes"] if not p["dumps"]]
        out.print(f"{out_dir / m['host']}: {len(dumped)} of {len(m['processes'])} processes dumped, "
                  f"{len(snaps)} snapshots. When every node is done: debugger ask {out_dir}", markup=False)
        if refused and refused[0].get("fix"):
            err.print(f"warning: {len(refused)} processes not dumped: {refused[0]['error']}; fix: "
                      f"{refused[0]['fix']}", markup=False)
        if not dumped and not snaps:
            fail("nothing was collected (see the lines above)")
