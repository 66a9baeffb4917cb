"""The rank-diff stage: the lines only a few ranks printed (or did not) into Investigation.diff, when the answer so
far is not decisive.

Why only then: the diff is a second pass over every byte, paid when the catalog and the other stages left the
answer inconclusive and at least MIN_RANKS ranks have logs (fewer and there is no majority to differ from). The
rank that differs is the lead for a failure the catalog does not know (tools/rules/asymmetry.py reads it); the
answer is drawn again only when some ranks alone printed something.
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
from trainlog_debugger.tools.rankdiff.report import DiffResult
from trainlog_debugger.tools.rules.asymmetry import MIN_RANKS


def undecided(ctx: Context) -> bool:
    d = ctx.inv.diagnosis
    return (d is not None and d.status == Status.inconclusive
            and len(ctx.inv.scan.coverage.seen_ranks) >= MIN_RANKS)


def rank_diff(ctx: Context) -> tuple[object, list[str]]:
    return diff_bundle(ctx.bundle, workers=ctx.workers), []


def some_ranks_differ(rep: DiffResult) -> bool:
    return bool(rep.only)


STAGE = Stage("diff", when=undecided, run=rank_diff, redraws=some_ranks_differ)
