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

from trainlog_debugger.tools.groups import SCHEMA_VERSION, per_rank, rank_set
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
#: the training metrics read beside the step times: not speeds, so no straggler or slowdown is sought in them; the
#: loss curve is read for divergence (tools/steps/divergence.py)
TRAINING: dict[str, str] = {"loss": "training loss", "grad_norm": "grad norm"}


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
class Divergence:
    """The loss curve diverged before the log ends (tools/steps/divergence.py says what counts): `kind` is
    'rise', 'collapse' or 'non-finite'; `before` is the loss level before the onset `iteration`, `after` the level
    from it to the end (the first non-finite value for 'non-finite')."""

    kind: str
    rank: int | None
    iteration: int
    before: float
    after: float
    last_iteration: int
    points_before: int
    points_after: int
    fmt: str
    grad_norm_before: float | None = None
    grad_norm_after: float | None = None
    evidence: list[Evidence] = field(default_factory=list)
    refs: list = field(default_factory=list, repr=False)

    def summary(self) -> str:
        if self.kind == "non-finite":
            what = (f"the training loss became {fmt_num(self.after)} at iteration {self.iteration} (it was "
                    f"{fmt_num(self.before)} before)")
        elif self.kind == "collapse":
            what = (f"the training loss fell to exactly 0 from iteration {self.iteration} to the end of the log "
                    f"({self.points_after} logged points; {fmt_num(self.before)} before): the math broke, it did "
                    f"not converge")
        else:
            what = (f"the training loss rose from {fmt_num(self.before)} to {fmt_num(self.after)} "
                    f"({self.after / self.before:.1f}x) at iteration {self.iteration} and stayed up to the end of the "
                    f"log ({self.points_after} logged points)")
        if self.grad_norm_before is not None and self.grad_norm_after is not None:
            what += f"; grad norm {fmt_num(self.grad_norm_before)} -> {fmt_num(self.grad_norm_after)}"
        return what


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
    training: list[StepSeries] = field(default_factory=list)  # the TRAINING metrics' series (not in `series`)
    divergence: Divergence | None = None
    for_time_limit: bool = False  # read because the first answer was the scheduler's time limit (tools/steps/stage.py)

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
        dv = self.divergence
        if dv is not None and dv.evidence:
            out.append(Finding(
                id="steps.divergence", role=Role.root_candidate, ranks=[dv.rank] if dv.rank is not None else [],
                summary=dv.summary(), facts=_asdict(dv, {"refs", "evidence"}), evidence=dv.evidence))
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
        """Plain JSON, schema_version 2: the series grouped by step-time behaviour (`series_groups`: per metric the
        ranks within the band as one group with summary statistics, each straggler as its own group with a sampled
        series and its lines, ranks whose own series shifted), every claim with its evidence, rank lists as range
        sets. The per-series listing `series` (one entry per rank and file: 830 KB at 4,096 ranks) only under
        tools.groups.per_rank() (`--per-rank`), unchanged."""
        drop = {"refs"}
        d = {"schema_version": SCHEMA_VERSION, "root": self.root, "files": self.files, "bytes": self.bytes,
             "seconds": round(self.seconds, 3), "world_size": self.world_size, "pipeline_size": self.pipeline_size,
             "groups": self.groups, "formats": self.formats, "series_count": len(self.series),
             "series_groups": series_groups(self),
             "outliers": [_asdict(o, drop) for o in self.outliers],
             "regression": _regression_json(self.regression, drop) if self.regression else None,
             "regressions": [_regression_json(r, drop) for r in self.regressions],
             "bound": _asdict(self.bound, drop), "notes": self.notes,
             "training_points": {m: sum(len(s.ms) for s in self.training if s.metric == m) for m in TRAINING
                                 if any(s.metric == m for s in self.training)},
             "divergence": _asdict(self.divergence, drop) if self.divergence else None,
             "findings": to_jsonable(self.findings())}
        if per_rank():
            d["series"] = [{"rank": s.rank, "node": s.node, "metric": s.metric, "fmt": s.fmt, "source": s.source,
                            "points": len(s.ms), "dropped": s.dropped, "median": _round(s.median()),
                            "first_iteration": s.iterations[0] if s.iterations else None,
                            "last_iteration": s.iterations[-1] if s.iterations else None} for s in self.series]
        return d


MAX_SAMPLE = 24                 # points of a straggler's series in its group (evenly spaced, first and last kept)
MAX_SHIFTED = 10                # rank-level regressions shown as groups of their own, per metric


def series_groups(rep: StepReport) -> list[dict]:
    """The series grouped by step-time behaviour, per metric in the report's order: the stragglers (one group each,
    the first MAX_FINDINGS of the report; any more as one group), the ranks whose own series shifted (one group per
    rank-level regression), the band (every other rank: the median, p10, p90, min and max over the ranks' own
    medians, the iterations spanned; as exemplars the peer lines the stragglers' evidence cites), and the series
    with no rank. What is a straggler or a shift is the analysis' answer (tools/steps/analysis.py), not decided
    here. Bounded: a few groups per metric whatever the number of ranks."""
    by: dict[str, dict[int | None, list[StepSeries]]] = {}
    for s in rep.series:
        by.setdefault(s.metric, {}).setdefault(s.rank, []).append(s)
    cited = {id(o) for o in rep.outliers[:MAX_FINDINGS]}
    out: list[dict] = []
    for metric, per in by.items():
        unit = METRICS[metric][1]
        outs = [o for o in rep.outliers if o.metric == metric]
        own = {o.rank for o in outs if id(o) in cited}
        more = sorted({o.rank for o in outs if id(o) not in cited} - own)
        for o in outs:
            if id(o) not in cited:
                continue
            ss = per.get(o.rank, [])
            out.append({"kind": "straggler", "metric": metric, "unit": unit, "ranks": rank_set([o.rank]),
                        "rank_count": 1, "node": o.node, **_span(ss), "median": _round(o.value),
                        "group_median": _round(o.group_median), "gap": round(o.gap, 4),
                        "z": "inf" if math.isinf(o.z) else round(o.z, 2), "group": o.group,
                        "slow_intervals": o.slow_intervals, "sample": _sample(ss),
                        "exemplars": [e.to_json() for e in o.evidence if e.rank == o.rank]})
        if more:
            out.append({"kind": "stragglers", "metric": metric, "unit": unit, "ranks": rank_set(more),
                        "rank_count": len(more), **_span([s for r in more for s in per.get(r, [])]),
                        **_stats([_rank_median(per[r]) for r in more if r in per]), "exemplars": []})
        shifted: set[int] = set()
        regs = [r for r in rep.regressions if r.metric == metric and r.scope == "ranks"]
        for reg in regs[:MAX_SHIFTED]:
            rs_ = sorted(set(reg.ranks) - own - set(more) - shifted)
            if not rs_:
                continue
            shifted |= set(rs_)
            out.append({"kind": "shifted", "metric": metric, "unit": unit, "ranks": rank_set(rs_),
                        "rank_count": len(rs_), "iteration": reg.iteration, "before": _round(reg.before),
                        "after": _round(reg.after), "shift": round(reg.shift, 4),
                        **_span([s for r in rs_ for s in per.get(r, [])]),
                        **_stats([_rank_median(per[r]) for r in rs_ if r in per]),
                        "sample": _sample(per.get(rs_[0], [])) if len(rs_) == 1 else None,
                        "exemplars": [e.to_json() for e in reg.evidence]})
        band = sorted(r for r in per if r is not None and r not in own and r not in shifted and r not in more)
        if band:
            in_band = set(band)
            peers = [e for o in outs for e in o.evidence if e.rank in in_band]
            out.append({"kind": "band", "metric": metric, "unit": unit, "ranks": rank_set(band),
                        "rank_count": len(band), **_span([s for r in band for s in per[r]]),
                        **_stats([_rank_median(per[r]) for r in band]),
                        "exemplars": [e.to_json() for e in list(dict.fromkeys(peers))[:2]]})
        if None in per:
            ss = per[None]
            out.append({"kind": "unranked", "metric": metric, "unit": unit, "ranks": "-", "rank_count": 0,
                        **_span(ss), **_stats([_rank_median([s]) for s in ss]),
                        "sources": sorted({s.source for s in ss})[:3], "exemplars": []})
    return out


def _rank_median(ss: list[StepSeries]) -> float:
    """A rank's median over all its points, as the analysis takes it."""
    return ss[0].median() if len(ss) == 1 else statistics.median([v for s in ss for v in s.ms])


def _span(ss: list[StepSeries]) -> dict:
    firsts = [s.iterations[0] for s in ss if s.iterations]
    lasts = [s.iterations[-1] for s in ss if s.iterations]
    return {"series": len(ss), "points": sum(len(s.ms) for s in ss),
            "first_iteration": min(firsts) if firsts else None, "last_iteration": max(lasts) if lasts else None}


def _stats(meds: list[float]) -> dict:
    """The median, p10, p90, min and max over the ranks' own medians (NaN-free)."""
    xs = sorted(v for v in meds if not math.isnan(v))
    if not xs:
        return {"median": None, "p10": None, "p90": None, "min": None, "max": None}

    def q(p: float) -> float | None:
        return _round(xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))])
    return {"median": _round(statistics.median(xs)), "p10": q(0.1), "p90": q(0.9), "min": _round(xs[0]),
            "max": _round(xs[-1])}


def _sample(ss: list[StepSeries], n: int = MAX_SAMPLE) -> list[list]:
    """The rank's points as [iteration, value], in iteration order, thinned to at most `n` evenly spaced ones
    (the first and the last kept)."""
    pts = sorted((it, v) for s in ss for it, v in zip(s.iterations, s.ms))
    if len(pts) > n:
        step = (len(pts) - 1) / (n - 1)
        pts = [pts[round(i * step)] for i in range(n)]
    return [[it, _round(v)] for it, v in pts]


def _regression_json(r: Regression, drop: set[str]) -> dict:
    d = _asdict(r, drop)
    d["ranks"] = rank_set(r.ranks)
    d["rank_count"] = len(r.ranks)
    return d


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
