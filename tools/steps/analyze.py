"""`debugger steps`: per-rank step times → stragglers, the iteration a slowdown began, compute- vs comm-bound.

Why: a job that got slow (a thermally throttled GPU, a flapping link, a noisy neighbour on the filesystem) fails
later as an NCCL timeout on EVERY rank; the step times written long before say which rank was slow and since when.

Metrics (StepSeries.metric; see METRICS): `iteration_ms` (Megatron line), `compute_ms` (per rank forward-compute +
backward-compute), `forward_backward_ms` (per rank, when the compute timers are not logged), `train_step_ms`
(train_step_timing), `step_ms` (generic; `s/it` and `it/s` converted; no unit → seconds below 100, else ms, noted),
and the throughputs `tokens_per_s`, `tflops`, `mfu` (lower is slower) for generic lines that state no time.

Analysis:
- stragglers: per rank, the median of its series; within each parallel group (pipeline stages when the logs state
  `world size` and `pipeline-model-parallel size`: ranks of one stage do the same work; else all ranks) a rank is an
  outlier when |x − median| / (1.4826·MAD) > 3.5 AND it is ≥ 10 % slower than the group median (a tiny MAD must not
  turn noise into a finding);
- regressions: change points of a series (per metric: the per-iteration median across ranks; and each rank's own):
  binary segmentation on a running median (w=5) picks candidate splits minimising within-segment squared error; a
  split is kept when the medians of its neighbouring segments differ by ≥ 20 % and each side holds ≥ 5 points of
  which ≥ 80 % lie on that side's half. An upward shift is a regression: its iteration, the stated time, the medians
  before/after, the ranks whose own series shifted there, and the last fast and first slow lines as evidence;
- bound: compute vs communication vs data loading from the Megatron timers (tools/steps/timers.py); "unknown" when
  the logs do not split the step.

The pieces, in the order they run:
    steps_formats.py   the line shapes (FORMATS.md §7.2, §7.3), as bytes regexes
    steps_parse.py     one streaming pass per source → StepSeries, timer sums, job facts (files in 2 forked workers)
    steps_timers.py    Megatron timer blocks, and the compute/communication split they give
    steps_stats.py     robust_outliers, change_points: pure statistics
    steps_analysis.py  stragglers within parallel groups, regressions, which ranks shifted
    steps_evidence.py  the cited points located again in the raw files
    steps_report.py    StepReport and its parts; findings() and to_json()
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainlog_debugger.tools.bundle.parallel import Remote, map_sources
from trainlog_debugger.tools.steps.analysis import Analysis
from trainlog_debugger.tools.steps.parse import FileOut, reset_facts, scan_sources
from trainlog_debugger.tools.steps.report import METRICS, Bound, Outlier, Regression, StepReport, StepSeries
from trainlog_debugger.tools.steps.stats import MIN_GAP, MIN_SHIFT, Z_MAX, change_points, robust_outliers


__all__ = ["StepSeries", "Outlier", "Regression", "Bound", "StepReport", "METRICS", "scan_steps",
           "change_points", "robust_outliers"]

SKIP_KINDS = frozenset({"fr_dump"})


def _remote_steps(batch) -> list[FileOut]:
    """`scan_sources` on a cluster worker, a long-lived process that read other batches and other jobs before: each
    file looks for the job facts afresh. The analysis takes each fact from the first file (in bundle order) that
    states it, and one process reading in bundle order looks in every file up to that one, so the facts are the
    ones an in-process run finds."""
    outs: list[FileOut] = []
    for item in batch:
        reset_facts()
        outs.extend(scan_sources([item]))
    return outs


def scan_steps(bundle, *, workers: int | None = None, progress: Callable[[int, int], None] | None = None,
               z_max: float = Z_MAX, min_gap: float = MIN_GAP, min_shift: float = MIN_SHIFT,
               done: dict[int, FileOut] | None = None) -> StepReport:
    """Read every step-time line of every source, then: stragglers (robust z within parallel groups), level shifts
    (regressions: when, how much, which ranks), and whether the step is compute- or communication-bound. `done`:
    the FileOuts of sources already read (by index in bundle.sources), by the scan's pass (tools.scan.driver
    steps_out): only the others are read here."""
    t0 = time.perf_counter()
    reset_facts()
    done = done or {}
    items = [(i, s) for i, s in enumerate(bundle.sources) if s.kind not in SKIP_KINDS and i not in done]
    outs: list[FileOut] = list(done.values())
    notes: list[str] = []
    for res in map_sources(scan_sources, items, workers=workers, progress=progress, remote=Remote(_remote_steps),
                           private=getattr(bundle, "tmpdir", None), notes=notes):
        outs.extend(res)
    outs.sort(key=lambda f: f.idx)
    rep = StepReport(root=bundle.root, files=len(outs), bytes=sum(f.bytes for f in outs), notes=notes)
    Analysis(bundle, outs, rep, z_max, min_gap, min_shift).run()
    rep.seconds = time.perf_counter() - t0
    return rep

