"""The AIStore stage: the storage daemons' side of the failure, correlated with the workers', into
Investigation.ais.

Why after the collectives stage: the correlation ties a daemon's error to the worker rank that the collective
state says stalled (`correlate(files, scan, nccl)`), so `nccl` must be there first. Only a bundle with AIStore
daemon logs (by kind or by the daemons' file names) pays for the second read of those files.
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.sources.ais.analyze import correlate, is_ais, read_sources


def has_daemon_logs(ctx: Context) -> bool:
    return any(is_ais(s) for s in ctx.bundle.sources)


def storage_side(ctx: Context) -> tuple[object, list[str]]:
    """(AisReport, or None when no daemon log could be read; no notes for the answer: the report keeps its own)."""
    files, _skipped = read_sources([s for s in ctx.bundle.sources if is_ais(s)])
    return (correlate(files, ctx.inv.scan, ctx.inv.nccl) if files else None), []


STAGE = Stage("ais", when=has_daemon_logs, run=storage_side)
