"""The stack-dump stage: each dumped process's main-thread stack, ranked, into Investigation.stacks.

Why a stage: a dump is a record per process (threads, frames), not lines, so the scan only counts its frames and
this reads the files again, as records. It runs when the bundle holds dumps the detector named (`pyspy`) or files
whose lines the scan saw as stack frames (faulthandler's `Thread 0x... (most recent call first):` inside a worker
log).

A dump names its process by pid; the rank is what the job's own lines said of that pid (NCCL's init line
`node-17:4127:4190 [3] NCCL INFO ... comm ... rank 3 nranks 8`, torchrun's failure entry `exitcode : 1 (pid: 4127)`),
read through the rules' view of the scan (ctx.rules: `hits`, `fields_of`)."""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.sources.pyspy.format import PYSPY


def _framed(ctx: Context) -> set[str]:
    """Files whose lines the scan saw as stack frames (`pyspy.*` patterns), whatever their kind."""
    return {f.rel for f in ctx.inv.scan.files if any(h.pattern.startswith("pyspy.") for h in f.hits)}


def has_dumps(ctx: Context) -> bool:
    return bool(_framed(ctx)) or any(s.kind == PYSPY for s in ctx.bundle.sources)


def read_dumps(ctx: Context) -> tuple[object, list[str]]:
    """(the stacks, one per process, ranked where the job's lines name the pid; the notes of what was cut)."""
    from trainlog_debugger.tools.sources.pyspy.read import read_stacks
    from trainlog_debugger.tools.sources.pyspy.report import attach_ranks, launcher_pids
    stacks, notes = read_stacks(ctx.bundle, _framed(ctx))
    if stacks:
        attach_ranks(stacks, launcher_pids(ctx.rules))
    return stacks, notes


STAGE = Stage("stacks", when=has_dumps, run=read_dumps)
