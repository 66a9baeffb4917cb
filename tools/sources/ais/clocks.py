"""Clock anchoring: put worker logs and storage-daemon logs on one timeline, and say how sure that is.

Worker and daemon logs come from different machines, often in different zones, and workers rarely print a zone:

    [default1]:[rank5]:[E0821 17:36:16.120861924 ProcessGroupNCCL.cpp:616] ...       c10: month/day, no year, no zone
    [default1]:[NeMo W 2025-08-21 17:06:13 batch_loader:211] Batch stream truncated ...   local, no zone
    slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2025-08-21T17:36:18 ***   local, no zone
    I 00:00:03.117200 common:494 22 Aug 25 00:00 UTC =============                  AIStore: states date and zone

So the offset between the two clocks is measured, never assumed:
1. Explicit zones: when worker stamps state a zone (Cloud Logging `Z`, ISO `+02:00`) and the daemons' headers do
   too, the offset is their difference (`explicit`); anchors then only cross-check it.
2. Anchors: one event seen from both sides. `job_death` (the last worker line / SLURM cancel ↔ the moment daemon
   GET counters stop increasing) is the best; `first_loader_error` (the first batch-loader error on a worker ↔ the
   start of the error burst on a target) is tight to seconds; `hang_start` (the stuck collective's start =
   watchdog time − elapsed ↔ GET stop) is the alternative pairing for jobs whose readers stop when ranks hang.
   Anchors in one `group` are alternatives: at most one of them is used.
3. The offset the most anchors agree on wins. When it lies within a few minutes of a whole or half hour it is a
   zone difference and is rounded (`zone`); otherwise the raw skew is reported as is (`skew`).
A worker-only check: worker nodes whose clocks disagree (`node_skew`): the same collective timeout, read back to
its start, lands minutes apart on different nodes.

Conventions: times are float seconds. A worker time is its local wall clock read as if UTC; a daemon time is UTC
when the daemon's zone is known. `offset_s` is what to add to a worker time to get the daemon time. Everything
here is a pure function over parsed data (ScanResult, anchors): no I/O.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainlog_debugger.tools.lines.timestamps import Stamp
from trainlog_debugger.tools.model import Evidence, Finding, Role

HALF_HOUR = 1800
FIT_S = 120  # a raw offset within max(FIT_S, 2 × its uncertainty) of a half-hour multiple is a zone difference ...
MAX_FIT_S = 600  # ... never further than this (a 30-minute grid needs a margin to stay unambiguous)
AGREE_S = 300  # anchors agree when their offsets differ by less than this plus their uncertainties
SKEW_S = 60  # worker nodes whose start of one collective differs by more than this: clocks disagree
EPOCH = datetime(1970, 1, 1)
LOADER = "loader.batch_loader_error"
WATCHDOG = "pytorch.watchdog_timeout"
CANCEL = ("slurm.cancelled", "slurm.cancelled_time_limit", "slurm.cancelled_preemption", "slurm.cancelled_node_failure",
          "slurm.cancelled_requeue")


def iso(ts: float | None, off_min: int | None = None) -> str | None:
    """Seconds → ISO text; with `off_min` the UTC time is shown in that zone (offset suffix), else naive."""
    if ts is None:
        return None
    if off_min is None:
        return (EPOCH + timedelta(seconds=ts)).isoformat(timespec="seconds")
    from datetime import timezone
    z = timezone(timedelta(minutes=off_min))
    return (EPOCH + timedelta(seconds=ts + off_min * 60)).replace(tzinfo=z).isoformat(timespec="seconds")


def hm(seconds: float) -> str:
    """+25200 → '+7:00', -1800 → '-0:30', 3725 → '+1:02:05'."""
    s = round(seconds)
    sign, s = ("-" if s < 0 else "+"), abs(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{sign}{h}:{m:02d}" + (f":{sec:02d}" if sec else "")


def zone_name(off_min: int) -> str:
    if off_min == 0:
        return "UTC"
    sign = "-" if off_min < 0 else "+"
    return f"UTC{sign}{abs(off_min) // 60:02d}:{abs(off_min) % 60:02d}"


# -- worker side ---------------------------------------------------------------------------------------------------
@dataclass
class WorkerEvent:
    ts: float  # worker local wall clock, seconds (read as UTC)
    ev: Evidence
    rank: int | None = None
    node: str | None = None
    zone_min: int | None = None  # stated by the line itself
    facts: dict = field(default_factory=dict)


@dataclass
class WorkerEvents:
    """The worker-side events the clock anchoring and the storage chain pair with daemon events (job death, the
    scheduler's cancel, loader errors, watchdog timeouts), each with its line and local time."""

    year: int | None  # the year worker stamps state (c10 lines have none)
    death: WorkerEvent | None  # the last timestamped worker line, or the SLURM cancel if later
    cancel: WorkerEvent | None
    loader_errors: list[WorkerEvent]  # the first batch-loader error of every rank, earliest first
    loader_lines: list[WorkerEvent]  # every batch-loader line kept by the scan (first/last per rank), earliest first
    watchdogs: list[WorkerEvent]  # facts: seq, elapsed_ms, start (= ts − elapsed)
    hang_start: WorkerEvent | None  # the earliest start of the stuck collective
    zone_min: int | None  # a zone the worker lines state (rare)
    notes: list[str] = field(default_factory=list)


def stamp_ts(t: Stamp | None, year: int | None) -> tuple[float | None, int | None]:
    """A worker line's Stamp → (local wall-clock seconds, the zone offset it states or None); (None, None) when the
    date (or any year) is unknown. The local time is never shifted: `estimate` applies stated zones."""
    if t is None or t.order_key() is None:
        return None, None
    y = t.year or year
    if y is None or t.month is None or t.day is None:
        return None, None
    try:
        dt = datetime(y, t.month, t.day, t.hour, t.minute, t.second, t.micro or 0)
    except (ValueError, TypeError):
        return None, None
    return (dt - EPOCH).total_seconds(), t.utc_offset_min


def worker_events(scan, year_hint: int | None = None) -> WorkerEvents:
    """What the clocks and the chain need from a worker ScanResult (tools.scan.summary): death, loader errors, watchdogs."""
    notes: list[str] = []
    hits = [(h, f) for f in scan.files for h in f.hits]
    years = [h.time.year for h, _ in hits if h.time is not None and h.time.year]
    years += [rs.last_line.time.year for rs in scan.ranks.values()
              if rs.last_line and rs.last_line.time is not None and rs.last_line.time.year]
    year = statistics.mode(years) if years else None
    if year is None and year_hint is not None:
        year = year_hint
        notes.append(f"worker stamps state no year: {year_hint} assumed (from the daemon logs)")

    def event(h, f, **facts) -> WorkerEvent | None:
        ts, off = stamp_ts(h.time, year)
        if ts is None:
            return None
        ev = Evidence(file=f.rel, line=h.line, text=h.text, offset=h.offset, time=h.time, rank=h.rank, node=h.node,
                      kind=f.kind)
        return WorkerEvent(ts, ev, h.rank, h.node, off, facts)

    zones = [ev.zone_min for h, f in hits if (ev := event(h, f)) is not None and ev.zone_min is not None]
    cancel = None
    for h, f in hits:
        if h.pattern in CANCEL and h.fields.get("at"):
            from trainlog_debugger.tools.lines.timestamps import parse_stamp
            st = parse_stamp(h.fields["at"])
            e = event(h, f) if st is None else None
            if st is not None:
                ts, off = stamp_ts(st, year)
                if ts is not None:
                    e = WorkerEvent(ts, Evidence(file=f.rel, line=h.line, text=h.text, offset=h.offset,
                                                 time=st, node=h.node, kind=f.kind), None, h.node, off)
            if e is not None and (cancel is None or e.ts > cancel.ts):
                cancel = e
    death = cancel
    for rs in scan.ranks.values():
        ll = rs.last_line
        ts, off = stamp_ts(ll.time if ll else None, year)
        if ts is not None and (death is None or ts > death.ts):
            death = WorkerEvent(ts, ll, rs.rank, ll.node, off)
    loader: dict = {}
    lines = []
    watchdogs = []
    for h, f in hits:
        if h.pattern == LOADER:
            e = event(h, f)
            if e is not None:
                lines.append(e)
                if h.rank not in loader or e.ts < loader[h.rank].ts:
                    loader[h.rank] = e
        elif h.pattern == WATCHDOG and isinstance(h.fields.get("elapsed_ms"), int):
            e = event(h, f, seq=h.fields.get("seq"), op=h.fields.get("op"), elapsed_ms=h.fields["elapsed_ms"])
            if e is not None:
                e.node = e.node or (f.hint.get("node") if f.hint else None) or f.rel
                e.facts["start"] = e.ts - h.fields["elapsed_ms"] / 1000
                watchdogs.append(e)
    hang = min(watchdogs, key=lambda e: e.facts["start"], default=None)
    hang_start = None
    if hang is not None:
        hang_start = WorkerEvent(hang.facts["start"], hang.ev, hang.rank, hang.node, hang.zone_min, dict(hang.facts))
    return WorkerEvents(year, death, cancel, sorted(loader.values(), key=lambda e: e.ts),
                       sorted(lines, key=lambda e: e.ts), watchdogs, hang_start,
                       statistics.mode(zones) if zones else None, notes)


def node_skew(watchdogs: list[WorkerEvent], threshold: float = SKEW_S) -> list[Finding]:
    """Worker nodes whose clocks disagree: the same collective (SeqNum), read back to its start (watchdog time −
    elapsed), begins more than `threshold` seconds apart on different nodes. One node is one clock."""
    by_seq: dict = {}
    for w in watchdogs:
        by_seq.setdefault(w.facts.get("seq"), {}).setdefault(w.node, []).append(w)
    out = []
    for seq, nodes in sorted(by_seq.items(), key=lambda kv: -sum(len(v) for v in kv[1].values())):
        if len(nodes) < 2:
            continue
        starts = {n: statistics.median(w.facts["start"] for w in ws) for n, ws in nodes.items()}
        ref = statistics.median(starts.values())
        off = {n: s - ref for n, s in starts.items() if abs(s - ref) > threshold}
        if not off:
            continue
        ev = [nodes[n][0].ev for n in sorted(nodes, key=lambda n: -abs(starts[n] - ref))][:6]
        desc = ", ".join(f"{n} {hm(d)}" for n, d in sorted(off.items(), key=lambda kv: -abs(kv[1])))
        out.append(Finding(
            id="clock.worker_skew", role=Role.context, category="infrastructure", evidence=ev, count=len(off),
            nodes=sorted(off), summary=f"worker clocks disagree: SeqNum {seq} started {desc} from the other nodes' "
            f"median (one collective, read back from each node's watchdog line); correct per node before comparing "
            f"their times", facts={"seq": seq, "skew_s": {n: round(d, 1) for n, d in off.items()},
                                    "starts": {n: iso(s) for n, s in starts.items()}}))
        break  # the most-reported collective decides; one finding
    return out


# -- anchors and the offset ----------------------------------------------------------------------------------------
@dataclass
class Anchor:
    name: str  # job_death | first_loader_error | hang_start
    worker_ts: float
    daemon_ts: float
    uncertainty: float  # ± seconds
    worker_ev: list[Evidence]
    daemon_ev: list[Evidence]
    what: str
    group: str = ""  # anchors of one group are alternative pairings of the same daemon event
    priority: int = 0  # lower wins a tie

    @property
    def offset(self) -> float:
        return self.daemon_ts - self.worker_ts


@dataclass
class ClockEstimate:
    offset_s: float | None  # worker time + offset_s = daemon time (UTC when the daemon zone is known)
    raw_s: float | None  # what the anchors measured, before rounding
    kind: str  # explicit | zone | skew | none
    worker_zone: str | None  # e.g. 'UTC-07:00': only when the daemon zone is known
    residual_s: float | None  # raw − rounded (the clocks' skew beyond the zone difference)
    confidence: str  # high | medium | low | none
    used: list[Anchor]
    rejected: list[tuple[Anchor, str]]
    summary: str

    def to_daemon(self, worker_ts: float) -> float:
        return worker_ts + (self.offset_s or 0.0)

    def finding(self) -> Finding | None:
        ev = [e for a in self.used for e in (a.worker_ev[:1] + a.daemon_ev[:1])]
        if not ev:
            return None
        return Finding(id=f"clock.{self.kind}", summary=self.summary, role=Role.context, evidence=ev,
                       facts={"offset_s": self.offset_s, "raw_s": self.raw_s, "kind": self.kind,
                              "worker_zone": self.worker_zone, "residual_s": self.residual_s,
                              "confidence": self.confidence, "anchors": [a.name for a in self.used],
                              "rejected": {a.name: why for a, why in self.rejected}})


def round_offset(raw: float, uncertainty: float = 0.0) -> tuple[float, bool, float]:
    """(offset, is a zone difference, residual): the nearest half-hour multiple when `raw` lies close enough to it."""
    n = round(raw / HALF_HOUR) * HALF_HOUR
    resid = raw - n
    tol = min(MAX_FIT_S, max(FIT_S, 2 * uncertainty))
    return (float(n), True, resid) if abs(resid) <= tol else (raw, False, 0.0)


def estimate(anchors: list[Anchor], daemon_zone_min: int | None = None,
             worker_zone_min: int | None = None) -> ClockEstimate:
    """The offset the evidence supports. Never assumes the two sides share a zone: no anchor and no stated zones →
    kind 'none', and the merged timeline keeps the two clocks apart."""
    if worker_zone_min is not None and daemon_zone_min is not None:
        off = -worker_zone_min * 60.0  # worker local → UTC; daemon times are UTC
        bad = [(a, f"implies {hm(a.offset - off)} beyond the stated zones") for a in anchors
               if abs(a.offset - off) > AGREE_S + a.uncertainty]
        return ClockEstimate(off, off, "explicit", zone_name(worker_zone_min), 0.0, "high",
                             [a for a in anchors if all(a is not b for b, _ in bad)], bad,
                             f"both sides state their zone: worker {zone_name(worker_zone_min)}, daemons "
                             f"{zone_name(daemon_zone_min)}")
    if not anchors:
        return ClockEstimate(None, None, "none", None, None, "none", [], [],
                             "no event seen from both sides and no stated zones: worker and daemon clocks are NOT "
                             "assumed to match; their times are shown apart")
    best: list[Anchor] = []
    for pivot in sorted(anchors, key=lambda a: (a.priority, a.uncertainty)):
        support: dict[str, Anchor] = {}
        for a in anchors:
            if abs(a.offset - pivot.offset) <= AGREE_S + a.uncertainty + pivot.uncertainty:
                key = a.group or a.name
                if key not in support or abs(a.offset - pivot.offset) < abs(support[key].offset - pivot.offset):
                    support[key] = a
        if len(support) > len(best):
            best = list(support.values())
    w = [1 / max(a.uncertainty, 1.0) ** 2 for a in best]
    raw = sum(a.offset * x for a, x in zip(best, w)) / sum(w)
    unc = (1 / sum(w)) ** 0.5
    rejected = [(a, f"implies {hm(a.offset)}, {hm(a.offset - raw)} away from the agreed offset"
                 + (" (an alternative pairing of the same daemon event)" if a.group and any(
                     b.group == a.group for b in best) else "")) for a in anchors if all(a is not b for b in best)]
    off, zone, resid = round_offset(raw, unc)
    n = len(best)
    conf = ("high" if n >= 2 else "medium") if zone else ("medium" if n >= 2 else "low")
    if any(not a.group or all(b.group != a.group for b in best) for a, _ in rejected):
        conf = {"high": "medium", "medium": "low"}.get(conf, conf)
    names = " + ".join(a.name for a in best)
    wz = zone_name(round(-off / 60)) if zone and daemon_zone_min is not None else None
    if zone and off == 0:
        summary = (f"worker and daemon clocks are in the same zone (offset 0), residual skew {round(resid)} s; "
                   f"anchors: {names}")
    elif zone:
        summary = (f"daemon clock = worker clock {hm(off)} "
                   + (f"(workers in {wz}, daemons in {zone_name(daemon_zone_min or 0)} as their headers state); "
                      if wz else "(daemon zone not stated: a zone difference between the two clocks); ")
                   + f"a whole/half-hour zone difference, residual skew {round(resid)} s; "
                   f"anchors: {names}")
    else:
        summary = (f"daemon = worker {hm(raw)} (raw skew, not a whole or half hour: clocks drift or the anchors are "
                   f"loose); anchors: {names}")
    return ClockEstimate(off, raw, "zone" if zone else "skew", wz, resid if zone else None, conf, best, rejected,
                         summary + f"; confidence {conf}")
