"""From the series of all files to the claims: stragglers within parallel groups, regressions (job-level, then
single ranks' own), which ranks shifted, the bound; the rules and thresholds are listed in tools/steps/analyze.py.

Why caps: memory and time must stay bounded on jobs with thousands of ranks, so the job-level series, the
per-iteration medians and the per-rank search are bounded (MAX_AGG_POINTS, MAX_RANK_CP); each cut is noted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from trainlog_debugger.tools.steps.evidence import point_refs, resolve_evidence
from trainlog_debugger.tools.steps.parse import FileOut
from trainlog_debugger.tools.steps.divergence import find_divergence
from trainlog_debugger.tools.steps.report import (MAX_FINDINGS, METRICS, PRIMARY, TRAINING, Outlier, Regression, StepReport,
                                                   StepSeries)
from trainlog_debugger.tools.steps.stats import MIN_RUN, change_points, robust_outliers, slowdown
from trainlog_debugger.tools.steps.timers import timer_bound

MAX_RANK_CP = 4096              # per-rank change-point search runs for at most this many ranks
MAX_AGG_POINTS = 5_000_000      # points per metric held at once for the job-level series


class Analysis:
    """The read files → rep: series in order, parallel groups, stragglers, regressions (job-level, then single
    ranks' own), the bound, and the evidence for each claim."""

    def __init__(self, bundle, outs: list[FileOut], rep: StepReport, z_max: float, min_gap: float, min_shift: float):
        self.bundle, self.outs, self.rep = bundle, outs, rep
        self.z_max, self.min_gap, self.min_shift = z_max, min_gap, min_shift

    def run(self) -> None:
        rep = self.rep
        for f in self.outs:
            if f.error:
                rep.notes.append(f"{f.rel}: {f.error} (read stopped after {f.bytes:,} bytes)")
            rep.notes.extend(f"{f.rel}: {n}" for n in f.notes)
            for s in f.series:
                (rep.training if s.metric in TRAINING else rep.series).append(s)
        rep.series.sort(key=lambda s: (PRIMARY.index(s.metric), -1 if s.rank is None else s.rank, s.file_idx))
        for s in rep.series:
            rep.formats[s.metric] = rep.formats.get(s.metric, 0) + len(s.ms)
        self.by_metric: dict[str, dict[int | None, list[StepSeries]]] = {}
        for s in rep.series:
            self.by_metric.setdefault(s.metric, {}).setdefault(s.rank, []).append(s)
        self._layout()
        if not rep.series:
            rep.notes.insert(0, "no step-time lines found (Megatron iteration/timer lines, NeMo/Lightning "
                                "train_step_timing, `step N ... time X`)")
        for metric in self.by_metric:
            self._outliers(metric)
        rep.outliers.sort(key=lambda o: (-o.gap, o.rank))
        for metric in self.by_metric:
            self._regressions(metric)
        self._merge_regressions()
        job_its = [r.iteration for r in rep.regressions]
        for metric in self.by_metric:
            self._rank_regressions(metric, job_its)
        rep.regressions.sort(key=lambda r: (r.scope != "job", PRIMARY.index(r.metric), r.iteration))
        rep.regression = rep.regressions[0] if rep.regressions else None
        bound = timer_bound(self.outs)
        if bound is not None:
            rep.bound = bound
        if set(self.by_metric) == {"iteration_ms"} and len(self.by_metric["iteration_ms"]) <= 1:
            rep.notes.append("only Megatron iteration lines (printed by the last rank): no per-rank step times, so no "
                             "straggler can be named; `--timing-log-option all` logs per-rank timers")
        if len(rep.outliers) > MAX_FINDINGS:
            rep.notes.append(f"showing {MAX_FINDINGS} of {len(rep.outliers)} straggler ranks as findings")
        rep.divergence = find_divergence(rep.training)
        resolve_evidence(self.bundle, rep)

    # -- layout ----------------------------------------------------------------------------------------------------
    def _layout(self) -> None:
        rep = self.rep
        world = next((f.world for f in self.outs if f.world), None)
        pp = next((f.pp for f in self.outs if f.pp), None)
        rep.world_size = world[0] if world else None
        rep.pipeline_size = pp[0] if pp else None
        self.stage_size = None
        ranks = {r for d in self.by_metric.values() for r in d if r is not None}
        if pp and pp[0] > 1:
            w = world[0] if world else (max(ranks) + 1 if ranks else 0)
            if w and w % pp[0] == 0 and (not ranks or max(ranks) < w):
                self.stage_size = w // pp[0]
                rep.groups = (f"pipeline stages of {self.stage_size} ranks (world size {w}, pipeline-model-parallel "
                              f"size {pp[0]}; Megatron's default order puts pipeline stages outermost)")
                if not world:
                    rep.notes.append(f"world size not stated; taken as {w} (max rank seen + 1)")

    def _group(self, r: int) -> tuple[str, int]:
        if self.stage_size is None:
            return "all ranks", 0
        g = r // self.stage_size
        return f"pipeline stage {g} (ranks {g * self.stage_size}-{(g + 1) * self.stage_size - 1})", g

    # -- stragglers ------------------------------------------------------------------------------------------------
    def _outliers(self, metric: str) -> None:
        per_rank = {r: ss for r, ss in self.by_metric[metric].items() if r is not None}
        if len(per_rank) < 3:
            return
        slower = METRICS[metric][2]
        med = {r: statistics.median(ss[0].ms if len(ss) == 1 else [v for s in ss for v in s.ms])
               for r, ss in per_rank.items()}
        groups: dict[int, dict[int, float]] = {}
        for r, v in med.items():
            groups.setdefault(self._group(r)[1], {})[r] = v
        for g, vals in sorted(groups.items()):
            if len(vals) < 3:
                self.rep.notes.append(f"{metric}: group {self._group(next(iter(vals)))[0]} has {len(vals)} rank(s) "
                                      f"with data; too few to compare")
                continue
            found = robust_outliers(vals, higher_is_slower=slower, z_max=self.z_max, min_gap=self.min_gap)
            if not found:
                continue
            peer = min(vals, key=lambda r: (abs(vals[r] - statistics.median(vals.values())), r))
            typical = self._per_iteration(metric, list(vals))
            for r, z, gap, gmed in found:
                ss = per_rank[r]
                o = Outlier(r, next((s.node for s in ss if s.node), None), metric, med[r], gmed, gap, z,
                            self._group(r)[0], len(vals))
                if typical is not None:
                    pts = [(it, v) for s in ss for it, v in zip(s.iterations, s.ms) if it in typical]
                    if pts:
                        slow = sum(1 for it, v in pts if (v - typical[it]) * (1 if slower else -1)
                                   >= self.min_gap * abs(typical[it]))
                        o.slow_intervals = round(slow / len(pts), 3)
                s, i = _closest(ss, med[r])
                refs = point_refs(s, i, r, names=True)
                peer_ref = self._peer_refs(per_rank[peer], s.iterations[i], peer)
                o.refs = refs[:2] + peer_ref + refs[2:] if s.fmt == "megatron_timers" else refs + peer_ref
                self.rep.outliers.append(o)

    def _per_iteration(self, metric: str, ranks: list[int]) -> dict[int, float] | None:
        d = self.by_metric[metric]
        if sum(len(s.ms) for r in ranks for s in d[r]) > MAX_AGG_POINTS:
            return None
        acc: dict[int, list[float]] = {}
        for r in ranks:
            for s in d[r]:
                for it, v in zip(s.iterations, s.ms):
                    acc.setdefault(it, []).append(v)
        return {it: statistics.median(v) for it, v in acc.items() if len(v) >= 3}

    def _peer_refs(self, ss: list[StepSeries], it: int, rank: int) -> list:
        for s in ss:
            for i, x in enumerate(s.iterations):
                if x == it:
                    return point_refs(s, i, rank)[:1]
        return []

    # -- regressions -----------------------------------------------------------------------------------------------
    def _regressions(self, metric: str) -> None:
        slower = METRICS[metric][2]
        agg, used = self._aggregate(metric)
        if len(agg) >= 2 * MIN_RUN:
            its = sorted(agg)
            xs = [agg[i] for i in its]
            cps = change_points(xs, min_shift=self.min_shift)
            for j, (k, before, after) in enumerate(cps):
                shift = slowdown(before, after, slower)
                if shift < self.min_shift:
                    continue
                lo = its[cps[j - 1][0]] if j > 0 else its[0]
                hi = its[cps[j + 1][0]] if j + 1 < len(cps) else its[-1] + 1
                nxt = cps[j + 1] if j + 1 < len(cps) else None
                recovered = its[nxt[0]] if nxt and ((nxt[2] < nxt[1]) == slower) else None
                ranks = self._concerned(its[k], lo, hi)
                all_r = {r for m in self.by_metric.values() for r in m if r is not None}
                reg = Regression(metric, its[k], before, after, shift, ranks=sorted(ranks),
                                 all_ranks=bool(ranks) and len(all_r) > 1 and ranks >= all_r, scope="job",
                                 recovered_at=recovered, points_before=k - (cps[j - 1][0] if j else 0),
                                 points_after=(nxt[0] if nxt else len(its)) - k)
                reg.nodes = self._nodes(ranks)
                reg.refs = [self._ref_at(metric, used, its[k - 1], agg[its[k - 1]]),
                            self._ref_at(metric, used, its[k], agg[its[k]])]
                self.rep.regressions.append(reg)

    def _merge_regressions(self) -> None:
        """One slowdown seen in several metrics (iteration time and per-rank compute) is one regression: the
        first metric in METRICS order speaks, the others are listed in `also`."""
        kept: list[Regression] = []
        for r in sorted(self.rep.regressions, key=lambda r: (PRIMARY.index(r.metric), r.iteration)):
            twin = next((k for k in kept if abs(k.iteration - r.iteration) <= max(5, r.points_after // 10)
                         and k.metric != r.metric), None)
            if twin is None:
                kept.append(r)
            else:
                twin.also.append(r.metric)
                if not twin.ranks and r.ranks:
                    twin.ranks, twin.all_ranks, twin.nodes = r.ranks, r.all_ranks, r.nodes
        self.rep.regressions = kept

    def _aggregate(self, metric: str) -> tuple[dict[int, float], list]:
        """iteration → the median across ranks, and the ranks used: above MAX_AGG_POINTS points an evenly spaced
        subset of ranks stands for all (noted)."""
        d = self.by_metric[metric]
        ranks = sorted(d, key=lambda r: -1 if r is None else r)
        total = sum(len(s.ms) for ss in d.values() for s in ss)
        if total > MAX_AGG_POINTS:
            keep = max(1, len(ranks) * MAX_AGG_POINTS // total)
            ranks = ranks[::max(1, len(ranks) // keep)]
            self.rep.notes.append(f"{metric}: job-level series from {len(ranks)} of {len(d)} ranks "
                                  f"({total:,} points)")
        series = [s for r in ranks for s in d[r]]
        if len(series) == 1:
            s = series[0]
            return dict(zip(s.iterations, s.ms)), ranks
        acc: dict[int, list] = {}
        for s in series:
            for it, v in zip(s.iterations, s.ms):
                lst = acc.get(it)
                if lst is None:
                    acc[it] = [v]
                else:
                    lst.append(v)
        return {it: statistics.median(v) for it, v in acc.items()}, ranks

    def _ref_at(self, metric: str, ranks: list, it: int, value: float) -> tuple:
        """The line of the point at iteration `it` whose value is nearest `value` (the job-level median)."""
        # `it` comes from these ranks' own series, so there is a point at it; the first nearest wins, as min keeps it
        _, s, i = min(((abs(s.ms[i] - value), s, i) for r in ranks for s in self.by_metric[metric][r]
                       for i, x in enumerate(s.iterations) if x == it), key=lambda t: t[0])
        return point_refs(s, i, s.rank)[0]

    def _concerned(self, it: int, lo: int, hi: int) -> set[int]:
        """Ranks whose own series (any per-rank metric) shift at iteration `it` (window lo..hi)."""
        out = set()
        for metric, d in self.by_metric.items():
            if len([r for r in d if r is not None]) < 1 or (metric == "iteration_ms" and len(d) <= 1):
                continue
            if sum(len(s.ms) for ss in d.values() for s in ss) > MAX_AGG_POINTS:
                self.rep.notes.append(f"{metric}: too many points to tell which ranks shifted at iteration {it}")
                continue
            slower = METRICS[metric][2]
            for r, ss in d.items():
                if r is None:
                    continue
                a = [v for s in ss for x, v in zip(s.iterations, s.ms) if lo <= x < it][-50:]
                b = [v for s in ss for x, v in zip(s.iterations, s.ms) if it <= x < hi][:50]
                if len(a) < 2 or len(b) < 2:
                    continue
                ma, mb = statistics.median(a), statistics.median(b)
                if ma > 0 and slowdown(ma, mb, slower) >= self.min_shift / 2:
                    out.add(r)
        return out

    def _rank_regressions(self, metric: str, job_its: list[int]) -> None:
        """Shifts in single ranks' own series that the aggregate does not show (one slow rank among many)."""
        d = {r: ss for r, ss in self.by_metric[metric].items() if r is not None}
        if len(d) < 2:
            return
        if len(d) > MAX_RANK_CP:
            self.rep.notes.append(f"{metric}: per-rank change points searched for {MAX_RANK_CP} of {len(d)} ranks")
        slower = METRICS[metric][2]
        hits: list[tuple[int, int, float, float, tuple, tuple, int]] = []
        for r in sorted(d)[:MAX_RANK_CP]:
            ss = d[r]
            if sum(len(s.ms) for s in ss) < 2 * MIN_RUN:
                continue
            if len(ss) == 1 and all(a <= b for a, b in zip(ss[0].iterations, ss[0].iterations[1:])):
                s0 = ss[0]
                xs: Sequence[float] = s0.ms
                where = None
            else:
                where = sorted(((s.iterations[i], j, i) for j, s in enumerate(ss) for i in range(len(s.ms))))
                xs = [ss[j].ms[i] for _, j, i in where]
            for k, before, after in change_points(xs, min_shift=self.min_shift, max_points=200):
                shift = slowdown(before, after, slower)
                if shift < self.min_shift:
                    continue
                if where is None:
                    at = lambda q: (s0, q)                              # noqa: E731
                else:
                    at = lambda q: (ss[where[q][1]], where[q][2])       # noqa: E731
                it = at(k)[0].iterations[at(k)[1]]
                first, last = at(0), at(len(xs) - 1)
                span = max(5, (last[0].iterations[last[1]] - first[0].iterations[first[1]]) // 50)
                if any(abs(it - j) <= span for j in job_its):
                    continue
                hits.append((it, r, before, after, point_refs(*at(k - 1), r)[0],
                             point_refs(*at(k), r)[0], span))
        hits.sort(key=lambda h: (h[0], h[1]))
        groups: list[list] = []
        for h in hits:          # ranks that slowed at (about) the same iteration form one regression
            if groups and h[0] - groups[-1][0][0] <= max(10, h[6]):
                groups[-1].append(h)
            else:
                groups.append([h])
        for g in groups:
            ranks = sorted({h[1] for h in g})
            first = g[0]
            reg = Regression(metric, first[0], statistics.median([h[2] for h in g]),
                             statistics.median([h[3] for h in g]), 0.0, ranks=ranks, scope="ranks")
            reg.shift = slowdown(reg.before, reg.after, slower)
            reg.nodes = self._nodes(set(ranks))
            reg.refs = [first[4], first[5]]
            self.rep.regressions.append(reg)

    def _nodes(self, ranks: set[int]) -> list[str]:
        return sorted({s.node for s in self.rep.series if s.rank in ranks and s.node})


def _closest(ss: list[StepSeries], target: float) -> tuple[StepSeries, int]:
    """The first point nearest `target` (min keeps the first of equals; a NaN distance never replaces one)."""
    _, s, i = min(((abs(v - target), s, i) for s in ss for i, v in enumerate(s.ms)), key=lambda t: t[0])
    return s, i
