"""The flight-recorder stage: the dumps' verdict (which collective hung, who never joined) into Investigation.fr.

Why a stage and not part of the scan: a dump is a pickle per rank, not text, and unpickling 128 of them takes
seconds; only a bundle that holds dumps (files the detector named `fr_dump`, e.g. `nccl_trace_rank_3`) pays for it.
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.sources.flight_recorder.format import FR_DUMP


def has_dumps(ctx: Context) -> bool:
    return any(s.kind == FR_DUMP for s in ctx.bundle.sources)


def read_dumps(ctx: Context) -> tuple[object, list[str]]:
    """(FRReport, or None when no dump could be read; no notes for the answer: the dumps refused and the citations
    not re-read are the report's own `skipped` and `notes`, shown by `debugger fr`)."""
    from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
    return analyze_bundle(ctx.bundle), []


STAGE = Stage("fr", when=has_dumps, run=read_dumps)
