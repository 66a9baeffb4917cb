"""The step-time stage: stragglers and slowdowns into Investigation.steps, when the first answer found no fault.

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


def step_times(ctx: Context) -> tuple[object, list[str]]:
    return scan_steps(ctx.bundle, workers=ctx.workers, done=ctx.read_in_scan), []


def shows_something(rep: StepReport) -> bool:
    """An outlier rank or a regression (slow), or a loss curve that diverged (tools/rules/data.py reads it)."""
    return bool(rep.outliers or rep.regressions or rep.divergence)


STAGE = Stage("steps", when=no_fault, run=step_times, redraws=shows_something)
