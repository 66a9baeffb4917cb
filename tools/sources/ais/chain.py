"""The storage failure chain, end to end: from a target under pressure to the worker rank whose loader failed.

    1 pressure        W ... x-get-batch[..] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=critical]
    2 stream_break    E ... shared-dm: failed reconnecting to t[Pz7Ab910] (write: broken pipe --> ...) - closing/aborting...
    3 out_of_bounds   E ... x-get-batch[..] t[KqRt8081] out-of-bounds index 17 (recv'd len=0, wid="..")
    4 job_aborted     W ... shared-dm xid Xf3kW9p0q not found - dropping shard-17/utt-42.flac
    5 client_short    I ... {err.getbatch.n:57,err.http.write.n:41,...}   (the interval where those counters jump)
                      [NeMo W ...] Batch stream truncated at index 17/64. Falling back to direct AIStore API calls ...
    6 loader_error    [NeMo E ...] lhotse.ais.batch_loader.AISBatchLoaderError: Sequential GET fallback failed for ...
    7 nccl_cascade    [E0821 17:36:14...] Watchdog caught collective operation timeout ... (every other rank, ~30 min on)

Each step is a Finding citing its first line inside the focus window (the minutes before the first worker failure,
or before the error jump when there are no worker logs), per daemon, with counts; the first step found is the
root candidate, the rest are its cascade. A step with no line is a gap, reported as such, never invented. Worker
times are moved onto the daemon clock with the measured offset (tools/sources/ais/clocks.py) and say so in `time`.
Pure functions over parsed data: no I/O.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from trainlog_debugger.tools.sources.ais.stats import Jump
from trainlog_debugger.tools.sources.ais.clocks import ClockEstimate, WorkerEvent, WorkerEvents, hm, iso
from trainlog_debugger.tools.lines.isotime import human_time
from trainlog_debugger.tools.model import Evidence, Finding, Role
from trainlog_debugger.tools.ranks import ranks_str

LOOKBACK_S = 20 * 60  # pressure and stream breaks are searched this far before the failure
LEAD_S = 120  # ... and this far after it
ORDER_SLACK_S = 5  # a step may appear this much before the previous one (log flush order) and still be in order
STEPS = [
    ("pressure", ("pressure", "memory", "disk", "cpu"), "target under resource pressure"),
    ("stream_break", ("stream_break",), "inter-target data mover (shared-dm) streams broke"),
    ("out_of_bounds", ("out_of_bounds",), "batch GET out-of-bounds index: objects lost between targets"),
    ("job_aborted", ("xid_not_found",), "batch job aborted: later receives dropped"),
]
TITLES = {"pressure": "target under resource pressure", "stream_break": "shared-dm streams broke",
          "out_of_bounds": "batch GET out-of-bounds index", "job_aborted": "batch job aborted, receives dropped",
          "client_short": "client got fewer objects", "loader_error": "batch loader error on a worker rank",
          "nccl_cascade": "NCCL watchdog kills the job"}
CLIENT_COUNTERS = ("err.getbatch.n", "err.http.write.n", "err.get.n", "err.soft.getbatch.n")


@dataclass
class Occ:
    """Every occurrence of one signature on one daemon (UTC seconds), and the lines kept to cite them."""

    daemon: str
    role: str
    sig: str
    times: list[float]  # sorted
    recs: list[tuple[float, Evidence]]  # sorted by time
    detail: Counter = field(default_factory=Counter)

    def count_in(self, t0: float, t1: float) -> int:
        return bisect.bisect_right(self.times, t1) - bisect.bisect_left(self.times, t0)

    def first_in(self, t0: float, t1: float) -> tuple[float, Evidence] | None:
        for ts, ev in self.recs:
            if t0 <= ts <= t1:
                return ts, ev
        return None

    def last_in(self, t0: float, t1: float) -> tuple[float, Evidence] | None:
        for ts, ev in reversed(self.recs):
            if t0 <= ts <= t1:
                return ts, ev
        return None


@dataclass
class Chain:
    steps: list[Finding]
    gaps: list[str]  # steps with no line, said out loud
    pressured: list[str]  # the target(s) at the start of the chain
    focus: tuple[float, float]
    notes: list[str] = field(default_factory=list)


def aligned(e: WorkerEvent, clock: ClockEstimate | None, daemon_zone: int | None) -> Evidence:
    """A worker line's Evidence with its time moved onto the daemon clock (inferred: never `certain`)."""
    t = e.ev.time
    if t is None:  # a WorkerEvent always has a time (its `ts`); nothing to align otherwise
        return e.ev
    if clock is not None and clock.offset_s is not None:
        t = t.with_meta(aligned=iso(clock.to_daemon(e.ts), daemon_zone), offset_s=clock.offset_s, certain=False,
                        aligned_by=f"clock.{clock.kind} ({clock.confidence})")
    else:
        t = t.with_meta(aligned=None, certain=False)
    return e.ev.model_copy(update={"time": t})


def _when(e: WorkerEvent, clock: ClockEstimate | None) -> float | None:
    return clock.to_daemon(e.ts) if clock is not None and clock.offset_s is not None else None


def build_chain(occ: list[Occ], jumps: list[Jump], workers: WorkerEvents | None, clock: ClockEstimate | None,
                focus: tuple[float, float], daemon_zone: int | None = None,
                straggler: dict[int, list[Evidence]] | None = None) -> Chain:
    t0, t1 = focus
    steps: list[tuple[str, float | None, Finding]] = []
    gaps: list[str] = []
    for name, sigs, what in STEPS:
        found = []
        for o in occ:
            if o.sig in sigs:
                first = o.first_in(t0, t1)
                if first is not None:
                    found.append((first[0], o, first[1]))
        if not found:
            gaps.append(f"{name}: no {what} line between {iso(t0, daemon_zone)} and {iso(t1, daemon_zone)}")
            continue
        found.sort(key=lambda x: x[0])
        daemons = list(dict.fromkeys(o.daemon for _, o, _ in found))
        ev = [e for _, _, e in found[:3]]
        lasts = [o.last_in(t0, t1) for _, o, _ in found[:1]]
        ev += [x[1] for x in lasts if x is not None and x[1] not in ev]
        detail: Counter = Counter()
        for _, o, _ in found:
            detail.update(o.detail)
        count = sum(o.count_in(t0, t1) for _, o, _ in found)
        per = {o.daemon: o.count_in(t0, t1) for _, o, _ in found}
        extra = f" [{', '.join(k for k, _ in detail.most_common(4))}]" if detail else ""
        since = min((o.times[0] for _, o, _ in found if o.times), default=t0)
        summary = (f"{what} on {', '.join(daemons)}: {count} line(s) in the window, first at "
                   f"{human_time(found[0][2].time.iso()) if found[0][2].time else '?'} daemon clock{extra}"
                   + (f" (also seen before the window: first at {human_time(iso(since, daemon_zone))})"
                      if since < t0 else ""))
        steps.append((name, found[0][0], Finding(
            id=f"ais.chain.{name}", summary=summary, role=Role.cascade, category="storage_io", nodes=daemons,
            count=count, evidence=ev, facts={"per_daemon": per, "detail": dict(detail), "since": iso(since, daemon_zone),
                                             "sigs": sorted({o.sig for _, o, _ in found})})))
    _client_short(steps, gaps, jumps, workers, clock, t0, t1, daemon_zone)
    _loader(steps, gaps, workers, clock, daemon_zone)
    _cascade(steps, workers, clock, daemon_zone, straggler or {})
    notes = _order(steps)
    chain = []
    prev_t = None
    for i, (name, ts, f) in enumerate(steps):
        facts = dict(f.facts, step=i + 1, name=name, at=iso(ts, daemon_zone), title=TITLES[name])
        if prev_t is not None and ts is not None:
            facts["after_previous_s"] = round(ts - prev_t, 1)
        prev_t = ts if ts is not None else prev_t
        chain.append(f.model_copy(update={"facts": facts, "role": Role.root_candidate if i == 0 else Role.cascade}))
    pressured = next((list(f.nodes) for n, _, f in steps if n == "pressure"), None)
    if pressured is None:
        pressured = next((list(f.nodes) for n, _, f in steps if n in ("stream_break", "out_of_bounds")), [])
    if not pressured and jumps:
        pressured = [min(jumps, key=lambda j: j.interval.t0).daemon]
    return Chain(chain, gaps, pressured, focus, notes)


def _client_short(steps, gaps, jumps, workers, clock, t0, t1, zone) -> None:
    """Step 5: the client got fewer objects: the stats interval where batch-GET / HTTP-write errors jump on a target
    (daemon side) and the loader's `Batch stream truncated at index i/n` (client side)."""
    js = [j for j in jumps if j.interval.role == "target" and j.interval.t1 >= t0 and j.interval.t0 <= t1
          and any(k in j.counters for k in CLIENT_COUNTERS)]
    trunc = [e for e in (workers.loader_lines if workers else []) if _short(e.ev.text)]
    if not js and not trunc:
        gaps.append("client_short: no batch-GET error jump on a target and no truncated batch stream on a worker")
        return
    ev = [aligned(e, clock, zone) for e in trunc[:2]] + [j.interval.end for j in js[:3]]
    parts = [f"{j.daemon} {iso(j.interval.t0, zone)}→{iso(j.interval.t1, zone)}: "
             + ", ".join(f"{k} +{d}" for k, (d, _) in list(j.counters.items())[:3]) for j in js[:3]]
    if trunc:
        parts.append(f"rank(s) {ranks_str([e.rank for e in trunc if e.rank is not None])}: batch stream truncated")
    wt = [t for e in trunc if (t := _when(e, clock)) is not None]
    ts = min(wt) if wt else min((j.interval.t1 for j in js), default=None)
    steps.append(("client_short", ts, Finding(
        id="ais.chain.client_short", summary="client got fewer objects than it asked for: " + "; ".join(parts),
        role=Role.cascade, category="storage_io", nodes=[j.daemon for j in js], count=len(js) + len(trunc),
        ranks=sorted({e.rank for e in trunc if e.rank is not None}), evidence=ev,
        facts={"jumps": {j.daemon: {k: d for k, (d, _) in j.counters.items()} for j in js}})))


def _loader(steps, gaps, workers, clock, zone) -> None:
    if not workers:
        return
    errs = [e for e in workers.loader_lines if not _short(e.ev.text)] or workers.loader_errors
    if not errs:
        gaps.append("loader_error: no batch-loader error on any worker rank")
        return
    ranks = sorted({e.rank for e in errs if e.rank is not None})
    lead = errs[0]
    steps.append(("loader_error", _when(lead, clock), Finding(
        id="ais.chain.loader_error", role=Role.cascade, category="storage_io", ranks=ranks,
        nodes=sorted({e.node for e in errs if e.node}), count=len(errs),
        summary=f"batch loader failed on rank(s) {ranks_str(ranks) if ranks else '?'} (first: rank {lead.rank} at "
                f"{lead.ev.time.iso() if lead.ev.time else '?'} worker clock"
                + (f" = {iso(_when(lead, clock), zone)} daemon clock)" if _when(lead, clock) is not None else ")"),
        evidence=[aligned(e, clock, zone) for e in errs[:4]], facts={"ranks": ranks})))


def _short(text: str) -> bool:
    """Loader lines that say the client got fewer objects than it asked for (FORMATS.md §7.1)."""
    return any(x in text for x in ("Batch stream truncated", "AISBatchLoader dropping", "returned empty content"))


def _cascade(steps, workers, clock, zone, straggler) -> None:
    if not workers or not workers.watchdogs:
        return
    wd = sorted(workers.watchdogs, key=lambda e: e.ts)
    ranks = sorted({e.rank for e in wd if e.rank is not None})
    ev = [aligned(wd[0], clock, zone)]
    for r, evs in sorted(straggler.items())[:2]:
        ev += evs[:2]
    if workers.death is not None:
        ev.append(aligned(workers.death, clock, zone))
    start = workers.hang_start
    summary = (f"NCCL watchdog fired on {len(ranks)} rank(s) ({ranks_str(ranks)})"
               + (f"; the stuck collective started {iso(start.ts)} worker clock (watchdog time − elapsed)"
                  if start else "")
               + (f"; rank(s) {ranks_str(sorted(straggler))} never entered it" if straggler else "")
               + (f"; job dead by {workers.death.ev.time.iso() if workers.death.ev.time else '?'} (worker clock)"
                  if workers.death else ""))
    steps.append(("nccl_cascade", _when(wd[0], clock), Finding(
        id="ais.chain.nccl_cascade", summary=summary, role=Role.cascade, category="storage_io", ranks=ranks,
        count=len(wd), evidence=ev, facts={"straggler_ranks": sorted(straggler),
                                            "hang_start": iso(start.ts) if start else None})))


def _order(steps) -> list[str]:
    notes = []
    for (a, ta, _), (b, tb, _) in zip(steps, steps[1:]):
        if ta is not None and tb is not None and tb < ta - ORDER_SLACK_S:
            notes.append(f"chain order: {b} is {hm(ta - tb)} before {a} (clock offset or unrelated lines?)")
    return notes


def retry_noise(scan, culprits: set[int]) -> Finding | None:
    """Connection resets that succeeded at the first retry on ranks that did not fail: noise, not cause."""
    ranks = sorted(r for r, rs in scan.ranks.items() if rs.retry and rs.retry.get("state") == "recovering"
                   and r not in culprits)
    if not ranks:
        return None
    ev = [Evidence(file=f.rel, line=h.line, text=h.text, offset=h.offset, time=h.time, rank=h.rank, node=h.node,
                   kind=f.kind) for f in scan.files for h in f.hits
          if h.pattern in ("io.retrying", "io.connection_reset") and h.rank in ranks][:4]
    if not ev:
        return None
    n = sum(scan.ranks[r].retry.get("at_first_attempt", 0) for r in ranks)
    return Finding(id="ais.noise.retry", role=Role.noise, category="storage_io", ranks=ranks, count=n, evidence=ev,
                   summary=f"{n} connection reset(s) on rank(s) {ranks_str(ranks)} recovered at the first retry "
                           f"(1/M, never escalated): noise on healthy ranks, not the cause",
                   facts={"ranks": ranks})
