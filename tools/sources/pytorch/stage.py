"""The collectives stage: every rank's NCCL/gloo state from the scan (who never entered, who waited) into
Investigation.nccl.

Why it runs on every bundle, first among the stages that read the scan: it costs no pass over the bytes (it reads
the scan's kept hits), the rules weigh every candidate by the culprits it names, and the AIStore correlation reads
it (a storage error is tied to the rank the collectives say stalled).
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.sources.pytorch.collectives import analyze


def always(_ctx: Context) -> bool:
    return True


def collectives(ctx: Context) -> tuple[object, list[str]]:
    return analyze(ctx.inv.scan), []


STAGE = Stage("nccl", when=always, run=collectives)
