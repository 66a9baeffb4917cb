"""The step-time stage: stragglers and slowdowns into Investigation.steps, when the first answer found no fault,
or was the scheduler's time limit (was the job still stepping when the limit came?).

Why only then: a job that got slow and was killed by its time limit, or still runs, prints no fault line; the step
times are what tell `slow` from `completed` or `inconclusive`. A bundle with a fault is answered by the fault, and
does not pay for the read. The scan's own pass has already read the step times of every file without a fatal line
(ctx.read_in_scan: all of them, in such a bundle); the rest are read here. The answer is drawn again only when the
steps show an outlier rank or a regression (tools/rules/perf.py reads them), or a loss curve that diverged before
the log ends (tools/steps/divergence.py; tools/rules/data.py reads it).
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.steps.analyze import scan_steps
from trainlog_debugger.tools.steps.report import StepReport


def no_fault(ctx: Context) -> bool:
    d = ctx.inv.diagnosis
    return d is not None and d.category == "none"


def ended_by_time_limit(ctx: Context) -> bool:
    """The first answer is the scheduler's time limit: whether the job was still stepping when the limit came, or
    had stopped long before (a hang the limit ended: tools/rules/scheduler.silence_before), is in the step times."""
    d = ctx.inv.diagnosis
    return d is not None and bool(d.chain) and d.chain[0].id == LIMIT


def wanted(ctx: Context) -> bool:
    return no_fault(ctx) or ended_by_time_limit(ctx)


def step_times(ctx: Context) -> tuple[object, list[str]]:
    rep = scan_steps(ctx.bundle, workers=ctx.workers, done=ctx.read_in_scan)
    rep.for_time_limit = ended_by_time_limit(ctx)
    return rep, []


def shows_something(rep: StepReport) -> bool:
    """An outlier rank or a regression (slow), or a loss curve that diverged (tools/rules/data.py reads it); or the
    steps were read for the time limit, whose reading reads them."""
    return bool(rep.outliers or rep.regressions or rep.divergence or rep.for_time_limit)


LIMIT = "scheduler.cancelled_time_limit"
STAGE = Stage("steps", when=wanted, run=step_times, redraws=shows_something)


