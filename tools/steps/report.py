"""The results of `debugger steps` (per-rank series, stragglers, regressions, the compute/communication split) and
their two views: cited tools.model Findings, and plain JSON for `--json`.

Why a module of its own: the reader (tools/steps/parse.py) builds StepSeries, the analysis (tools/steps/analysis.py)
fills the rest, and the renderer (agent/render/steps.py) reads all of it; none of them should import another's code
to get at the types. Each claim carries `refs` (which lines to cite, see tools/steps/evidence.py) until the
evidence is re-read; `refs` never reach JSON.
"""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import dataclass, field

from trainlog_debugger.tools.jsonable import to_jsonable
from trainlog_debugger.tools.model import Coverage, Evidence, Finding, Role
from trainlog_debugger.tools.ranks import ranks_str

MAX_FINDINGS = 20               # straggler findings; the rest are counted in a note
NAN = float("nan")

#: metric → (what it is, unit, higher value = slower)
METRICS: dict[str, tuple[str, str, bool]] = {
    "iteration_ms": ("Megatron elapsed time per iteration (last rank)", "ms", True),
    "compute_ms": ("Megatron timers forward-compute + backward-compute", "ms", True),
    "forward_backward_ms": ("Megatron timer forward-backward", "ms", True),
    "train_step_ms": ("train_step_timing", "ms", True),
    "step_ms": ("step time", "ms", True),
    "tokens_per_s": ("tokens/s", "tokens/s", False),
    "tflops": ("TFLOP/s", "TFLOP/s", False),
    "mfu": ("MFU", "%", False),
}
PRIMARY = list(METRICS)         # which metric speaks first when several exist


@dataclass
class StepSeries:
    """One rank's points of one metric in one file, in file order. `ms` holds the metric's value (milliseconds for
    the time metrics, the throughput for tokens_per_s/tflops/mfu); `times` are POSIX seconds of the wall clock the
    line states (zone unknown: only differences mean something), NaN where it states none; `offsets` locate each
    point's line (for `fmt == 'megatron_timers'` the block's header line)."""

    rank: int | None
    node: str | None
    iterations: array
    ms: array
    times: array
    source: str
    metric: str = "step_ms"
    fmt: str = "generic"
    offsets: array = field(default_factory=lambda: array("q"), repr=False)
    dropped: int = 0
    file_idx: int = field(default=-1, repr=False)

    def median(self) -> float:
        return statistics.median(self.ms) if self.ms else NAN


@dataclass
class Outlier:
    rank: int
    node: str | None
    metric: str
    value: float                # the rank's median
    group_median: float
    gap: float                  # relative: +0.4 = 40 % slower than the group median
    z: float                    # robust z (inf when the group's MAD is 0)
    group: str                  # 'all ranks' or 'pipeline stage 0 (ranks 0-31)'
    group_size: int
    slow_intervals: float | None = None   # share of intervals in which this rank was ≥ MIN_GAP above the group
    evidence: list[Evidence] = field(default_factory=list)
    refs: list = field(default_factory=list, repr=False)


@dataclass
class Regression:
    metric: str
    iteration: int
    before: float               # median before (metric unit)
    after: float
    shift: float                # relative, +0.6 = 60 % slower
    time: str | None = None     # ISO time the first slow line states
    ranks: list[int] = field(default_factory=list)   # ranks whose own series shifted here ([] = not attributable)
    all_ranks: bool = False
    nodes: list[str] = field(default_factory=list)
    scope: str = "job"          # 'job' (aggregate series) or 'ranks' (only these ranks' own series shifted)
    recovered_at: int | None = None
    also: list[str] = field(default_factory=list)   # other metrics whose job-level series shifted at the same point
    points_before: int = 0
    points_after: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    refs: list = field(default_factory=list, repr=False)


@dataclass
class Bound:
    kind: str                   # 'compute' | 'communication' | 'data' | 'unknown'
    reason: str
    source: str | None = None   # 'times across ranks' | '(min, max) time across ranks' | 'max time across ranks'
    compute_ms: float | None = None
    comm_ms: float | None = None
    data_ms: float | None = None
    timers: dict[str, float] = field(default_factory=dict)   # timer → representative ms per logged interval
    comm_timers: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    refs: list = field(default_factory=list, repr=False)


@dataclass
class StepReport:
    root: str
    series: list[StepSeries] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    regression: Regression | None = None
    regressions: list[Regression] = field(default_factory=list)
    bound: Bound = field(default_factory=lambda: Bound("unknown", "no Megatron timer blocks in the logs"))
    groups: str = "all ranks"
    world_size: int | None = None
    pipeline_size: int | None = None
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    formats: dict[str, int] = field(default_factory=dict)   # metric → points read
    notes: list[str] = field(default_factory=list)

    def findings(self) -> list[Finding]:
        """Every claim as a cited tools.model.Finding: stragglers, regressions, the compute/comm split."""
        out: list[Finding] = []
        for o in self.outliers[:MAX_FINDINGS]:
            if not o.evidence:
                continue
            label, unit, _ = METRICS[o.metric]
            z = "inf" if math.isinf(o.z) else f"{o.z:.1f}"
            out.append(Finding(
                id="steps.straggler", role=Role.root_candidate, ranks=[o.rank], nodes=[o.node] if o.node else [],
                summary=f"rank {o.rank} is {o.gap:.0%} slower than its group ({o.group}): {label} median "
                        f"{fmt_num(o.value)} {unit} vs {fmt_num(o.group_median)} {unit} (robust z {z})",
                facts={"metric": o.metric, "value": o.value, "group_median": o.group_median, "gap": round(o.gap, 4),
                       "z": None if math.isinf(o.z) else round(o.z, 2), "group": o.group, "group_size": o.group_size,
                       "slow_intervals": o.slow_intervals},
                evidence=o.evidence))
        for r in self.regressions:
            if not r.evidence:
                continue
            label, unit, _ = METRICS[r.metric]
            who = ("all ranks" if r.all_ranks else f"ranks {ranks_str(r.ranks, cap=len(r.ranks))}" if r.ranks
                   else "ranks not attributable from these lines")
            when = f" at {r.time}" if r.time else ""
            back = f"; back to normal at iteration {r.recovered_at}" if r.recovered_at is not None else ""
            out.append(Finding(
                id="steps.regression", role=Role.root_candidate, ranks=r.ranks, nodes=r.nodes,
                summary=f"{label} rose {fmt_num(r.before)} → {fmt_num(r.after)} {unit} ({r.shift:+.0%}) from "
                        f"iteration {r.iteration}{when}; {who}{back}",
                facts={"metric": r.metric, "iteration": r.iteration, "time": r.time, "before": r.before,
                       "after": r.after, "shift": round(r.shift, 4), "scope": r.scope, "all_ranks": r.all_ranks,
                       "recovered_at": r.recovered_at, "also": r.also, "points_before": r.points_before,
                       "points_after": r.points_after},
                evidence=r.evidence))
        b = self.bound
        if b.evidence:
            out.append(Finding(
                id="steps.bound", role=Role.context, summary=f"{b.kind}-bound: {b.reason}",
                facts={"kind": b.kind, "source": b.source, "compute_ms": b.compute_ms, "comm_ms": b.comm_ms,
                       "data_ms": b.data_ms, "timers": b.timers, "comm_timers": b.comm_timers},
                evidence=b.evidence))
        return out

    @property
    def coverage(self) -> Coverage | None:
        ranks = sorted({s.rank for s in self.series if s.rank is not None})
        if not ranks:
            return None
        return Coverage(expected_ranks=self.world_size, expected_from="world size in logs" if self.world_size else None,
                        seen_ranks=ranks, missing_ranks=sorted(set(range(self.world_size)) - set(ranks))
                        if self.world_size and self.world_size <= 100_000 else [])

    def to_json(self) -> dict:
        """Plain JSON: series summarised (not their points), every claim with its evidence."""
        ser = [{"rank": s.rank, "node": s.node, "metric": s.metric, "fmt": s.fmt, "source": s.source,
                "points": len(s.ms), "dropped": s.dropped, "median": _round(s.median()),
                "first_iteration": s.iterations[0] if s.iterations else None,
                "last_iteration": s.iterations[-1] if s.iterations else None} for s in self.series]
        drop = {"refs"}
        return {"root": self.root, "files": self.files, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "world_size": self.world_size, "pipeline_size": self.pipeline_size, "groups": self.groups,
                "formats": self.formats, "series": ser,
                "outliers": [_asdict(o, drop) for o in self.outliers],
                "regression": _asdict(self.regression, drop) if self.regression else None,
                "regressions": [_asdict(r, drop) for r in self.regressions],
                "bound": _asdict(self.bound, drop), "notes": self.notes,
                "findings": to_jsonable(self.findings())}


def _asdict(obj, drop: set[str]) -> dict:
    d = to_jsonable(obj)
    for k in drop:
        d.pop(k, None)
    for k, v in d.items():
        if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
            d[k] = None if math.isnan(v) else "inf"
    return d


def _round(v: float) -> float | None:
    return None if math.isnan(v) else round(v, 3)


def fmt_num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
