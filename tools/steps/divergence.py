"""Did the math diverge before the log ends? The training loss the step lines print, read as a curve.

Why: a run whose loss jumped and stayed up (fp16 at too high a learning rate, a bad batch, an unstable layer) often
prints no error at all; it is stopped by a person, or its loss scaler gives up much later. The engineer's first look
is the loss curve. What counts, and why each threshold (TAXONOMY: `numerical` = the math diverged):

- non-finite: a logged loss of `nan`/`inf` after finite ones;
- collapse: the loss is exactly 0 for the last COLLAPSE_RUN points or more after non-zero ones (the HF Trainer's
  fp16 failure: `{'loss': 0.0, 'grad_norm': nan}`): no real objective reaches exactly zero and stays there;
- rise: from some point to the end of the log, every loss is above every loss of the WINDOW points before it, and
  their median is at least RISE times the median before (a level shift that did not come back: a spike that
  recovered is noise, and the strict separation keeps a noisy fine-tuning curve from reading as one). At least
  MIN_BEFORE points before and MIN_AFTER after, so that three noisy points never decide.

Only the end of the series is searched (MAX_TAIL points): divergence that the run recovered from is history.
The grad norm, where the lines state it, is reported beside the loss (its median before and after), not required.
Pure: series in, a Divergence (with `refs` to cite) or None out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from trainlog_debugger.tools.steps.evidence import point_refs
from trainlog_debugger.tools.steps.report import Divergence, StepSeries

WINDOW = 20        # points before the onset that it is compared with
MIN_BEFORE = 3
MIN_AFTER = 3
RISE = 1.5         # the level after / the level before
COLLAPSE_RUN = 3
MAX_TAIL = 2000    # points searched, at the end of the series


def find_divergence(training: Sequence[StepSeries]) -> Divergence | None:
    """The earliest divergence of the longest loss series (lowest rank on ties: the trainers log on the main
    process, and every copy of one curve says the same), with the grad norm of the same rank and format."""
    losses = [s for s in training if s.metric == "loss" and len(s.ms) >= MIN_BEFORE + MIN_AFTER]
    if not losses:
        return None
    s = max(losses, key=lambda x: (len(x.ms), -(x.rank if x.rank is not None else -1)))
    start = max(0, len(s.ms) - MAX_TAIL)
    vals = list(s.ms[start:])
    found = _non_finite(vals) or _collapse(vals) or _rise(vals)
    if found is None:
        return None
    kind, k, before, after = found
    i = start + k
    d = Divergence(kind=kind, rank=s.rank, iteration=s.iterations[i], before=before, after=after,
                   last_iteration=s.iterations[-1], points_before=min(k, WINDOW), points_after=len(vals) - k,
                   fmt=s.fmt)
    gn = next((g for g in training if g.metric == "grad_norm" and g.rank == s.rank and g.fmt == s.fmt
               and g.file_idx == s.file_idx), None)
    if gn is not None:
        d.grad_norm_before, d.grad_norm_after = _grad_norm(gn, s.iterations[i])
    cite = [i, i - 1, len(s.ms) - 1] if i > 0 else [i, len(s.ms) - 1]  # the onset first: it is the trigger line
    for j in dict.fromkeys(cite):
        d.refs += point_refs(s, j, s.rank)
    return d


def _non_finite(vals: list[float]) -> tuple[str, int, float, float] | None:
    for k, v in enumerate(vals):
        if not math.isfinite(v):
            finite = [x for x in vals[max(0, k - WINDOW):k] if math.isfinite(x)]
            if len(finite) < MIN_BEFORE:
                return None  # nothing finite to have diverged from: a run that never trained
            return "non-finite", k, statistics.median(finite), v
    return None


def _collapse(vals: list[float]) -> tuple[str, int, float, float] | None:
    k = len(vals)
    while k > 0 and vals[k - 1] == 0.0:
        k -= 1
    if len(vals) - k < COLLAPSE_RUN or k < MIN_BEFORE:
        return None
    before = vals[max(0, k - WINDOW):k]
    return "collapse", k, statistics.median(before), 0.0


def _rise(vals: list[float]) -> tuple[str, int, float, float] | None:
    n = len(vals)
    suffix_min = [0.0] * (n + 1)
    suffix_min[n] = math.inf
    for j in range(n - 1, -1, -1):
        suffix_min[j] = min(vals[j], suffix_min[j + 1])
    for k in range(MIN_BEFORE, n - MIN_AFTER + 1):
        before = vals[max(0, k - WINDOW):k]
        if suffix_min[k] <= max(before):
            continue
        b, a = statistics.median(before), statistics.median(vals[k:])
        if b > 0 and a >= RISE * b:
            return "rise", k, b, a
    return None


def _grad_norm(gn: StepSeries, onset: int) -> tuple[float | None, float | None]:
    """Median grad norm over the WINDOW points before the onset iteration, and from it on (finite values only)."""
    before = [v for it, v in zip(gn.iterations, gn.ms) if it < onset and math.isfinite(v)][-WINDOW:]
    after = [v for it, v in zip(gn.iterations, gn.ms) if it >= onset and math.isfinite(v)]
    return (statistics.median(before) if before else None, statistics.median(after) if after else None)
