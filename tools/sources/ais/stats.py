"""AIStore periodic stats lines → counters, per-interval deltas, error jumps, and the moment GET traffic stopped.

The stats runner writes one pseudo-JSON line per period (FORMATS.md §4.4; redacted caller, so no `file:line`):

    I 19:18:02.100016 {err.get.n:12,err.getbatch.n:3,err.http.write.n:41,get.n:4811734,getbatch.n:90211,kalive.ns:712345}

Rules the arithmetic here follows, all from the emitting code:
- `*.n`, `*.size`, `*.total` and the get-batch totals `getbatch.rxwait.ns` / `getbatch.throttle.ns` are cumulative since
  the daemon started; every other value (`*.ns`, `*.bps`, `state.flags`) describes the last interval only.
- Zero values are omitted: a counter missing from a line is 0 (it was reset, or never counted).
- Counters restart from zero when the daemon restarts: an interval that spans a restart (or in which any cumulative
  counter went down) counts from zero, and says so (`reset`).
- A line identical to the previous one is skipped and idle nodes write none: a gap is "no change", not missing data.

Everything below is a pure function over parsed samples (no I/O), so it is testable with three lines of input.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from trainlog_debugger.tools.model import Evidence

CUMULATIVE_SUFFIXES = (".n", ".size", ".total")
CUMULATIVE_NAMES = frozenset({"getbatch.rxwait.ns", "getbatch.throttle.ns"})
ACTIVITY = ("get.n", "getbatch.n")  # GET traffic: what stops when the job dies
MIN_JUMP = 10  # an error jump is at least this many new errors in one interval ...
JUMP_FACTOR = 5.0  # ... and this many times what the daemon's median rate predicts for the interval

#: What the counters mean (the debugging protocol's reference table; FORMATS.md §4.4 for names).
MEANING = {
    "err.get.n": "GET errors", "err.getbatch.n": "batch GET errors", "err.http.write.n": "failed HTTP writes to clients",
    "err.put.n": "PUT errors", "err.head.n": "HEAD errors", "err.append.n": "append errors", "err.lst.n": "list errors",
    "err.kalive.n": "keep-alive errors", "err.soft.getbatch.n": "batch GET soft errors", "get.n": "GETs",
    "getbatch.n": "batch GETs", "getbatch.obj.n": "objects served by batch GET",
    "getbatch.throttle.ns": "batch GET throttle time (ns)", "getbatch.rxwait.ns": "batch GET wait for peers (ns)",
}

_PAIR = re.compile(r"([A-Za-z][\w.\-]*):(-?\d+)")


def is_cumulative(name: str) -> bool:
    return name.endswith(CUMULATIVE_SUFFIXES) or name in CUMULATIVE_NAMES


def parse_stats(body: str) -> tuple[dict[str, int] | None, str | None]:
    """`{a.n:1,b.ns:2}` → ({'a.n': 1, 'b.ns': 2}, None); a malformed line → (None, one-line reason).

    A line is all or nothing: one bad pair means the line was cut or garbled, and half a line's counters would
    read as resets (missing = 0)."""
    s = body.strip()
    if not s.startswith("{"):
        return None, "no opening brace"
    if not s.endswith("}"):
        return None, "no closing brace (truncated line?)"
    inner = s[1:-1]
    if not inner:
        return None, "no counters"
    out: dict[str, int] = {}
    for part in inner.split(","):
        m = _PAIR.fullmatch(part)
        if m is None:
            return None, f"malformed pair {part[:40]!r}"
        if m[1] in out:
            return None, f"counter {m[1]} twice"
        out[m[1]] = int(m[2])
    return out, None


@dataclass
class Sample:
    """One parsed stats line of one daemon."""

    ts: float  # seconds since the epoch, UTC when the daemon's zone is known (else its local clock read as UTC)
    counters: dict[str, int]
    ev: Evidence
    epoch: int = 0  # process incarnation: changes at every restart (counters start again from zero)


@dataclass
class Interval:
    """What happened on one daemon between two consecutive stats lines."""

    daemon: str
    role: str
    t0: float
    t1: float
    deltas: dict[str, int]  # cumulative counters only; zero deltas omitted
    reset: bool  # counters restarted inside the interval: deltas count from zero
    start: Evidence
    end: Evidence
    gauges: dict[str, int] = field(default_factory=dict)  # interval values at t1 (latency, bandwidth, flags)

    @property
    def seconds(self) -> float:
        return max(self.t1 - self.t0, 1e-6)

    def errors(self) -> int:
        return sum(v for k, v in self.deltas.items() if k.startswith("err."))

    def activity(self) -> int:
        return sum(self.deltas.get(k, 0) for k in ACTIVITY)

    def rate(self, err: str, total: str) -> float | None:
        """Errors per operation in this interval, e.g. rate('err.get.n', 'get.n'); None when nothing was done."""
        n = self.deltas.get(total, 0)
        return self.deltas.get(err, 0) / n if n else None


def intervals(daemon: str, role: str, samples: list[Sample]) -> list[Interval]:
    out: list[Interval] = []
    ordered = sorted(samples, key=lambda s: s.ts)
    for a, b in zip(ordered, ordered[1:]):
        cum = {k for k in (*a.counters, *b.counters) if is_cumulative(k)}
        reset = b.epoch != a.epoch or any(b.counters.get(k, 0) < a.counters.get(k, 0) for k in cum)
        deltas = {}
        for k in sorted(cum):
            d = b.counters.get(k, 0) - (0 if reset else a.counters.get(k, 0))
            if d > 0:
                deltas[k] = d
        gauges = {k: v for k, v in b.counters.items() if not is_cumulative(k)}
        out.append(Interval(daemon, role, a.ts, b.ts, deltas, reset, a.ev, b.ev, gauges))
    return out


@dataclass
class Jump:
    """An interval in which error counters rose far above the daemon's usual rate."""

    interval: Interval
    counters: dict[str, tuple[int, float]]  # name → (delta, delta the median rate predicts)
    total: int  # all err.* deltas in the interval

    @property
    def daemon(self) -> str:
        return self.interval.daemon


def baselines(ivs: list[Interval]) -> dict[str, float]:
    """Median per-second rate of every err.* counter over the daemon's intervals (robust to the jump itself)."""
    names = {k for iv in ivs for k in iv.deltas if k.startswith("err.")}
    return {k: statistics.median(iv.deltas.get(k, 0) / iv.seconds for iv in ivs) for k in names}


def error_jumps(ivs: list[Interval], min_jump: int = MIN_JUMP, factor: float = JUMP_FACTOR) -> list[Jump]:
    base = baselines(ivs)
    out = []
    for iv in ivs:
        hit = {}
        for k, rate in base.items():
            d, exp = iv.deltas.get(k, 0), rate * iv.seconds
            if d >= min_jump and d >= factor * (exp + 1):
                hit[k] = (d, round(exp, 1))
        if hit:
            out.append(Jump(iv, dict(sorted(hit.items(), key=lambda kv: -kv[1][0])), iv.errors()))
    return out


def flat_in(ivs: list[Interval], t0: float, t1: float, min_jump: int = MIN_JUMP,
            factor: float = JUMP_FACTOR) -> tuple[bool, int, float]:
    """Errors of one daemon during [t0, t1] vs its own baseline: (flat?, errors counted, errors expected)."""
    base = baselines(ivs)
    got = exp = 0.0
    for iv in ivs:
        if iv.t1 > t0 and iv.t0 < t1:
            got += iv.errors()
            exp += sum(r * iv.seconds for r in base.values())
    return not (got >= min_jump and got >= factor * (exp + 1)), int(got), round(exp, 1)


@dataclass
class TrafficStop:
    """The moment a daemon's GET counters stopped increasing: the job on the other side stopped reading."""

    daemon: str
    ts: float  # best estimate
    lo: float  # bounds of the estimate (never outside the last active interval)
    hi: float
    last_active: Evidence  # the stats line that shows the last increase
    first_idle: Evidence  # the first stats line that shows none
    method: str  # 'rate' (the last partial interval read against the rate before it) or 'midpoint'

    @property
    def uncertainty(self) -> float:
        return max(self.hi - self.ts, self.ts - self.lo)


def traffic_stop(ivs: list[Interval]) -> TrafficStop | None:
    """Last interval with GET activity, when at least one later interval shows none (else the stop is not seen).

    The last active interval is usually partial: read against the rate of the interval before it, its delta says
    how far into it the traffic ran (e.g. 30 GETs at 0.5/s → stopped 60 s after its start)."""
    active = [i for i, iv in enumerate(ivs) if iv.activity() > 0]
    if not active or active[-1] == len(ivs) - 1:
        return None
    k = active[-1]
    iv, nxt = ivs[k], ivs[k + 1]
    rate = None
    if k > 0 and not iv.reset and ivs[k - 1].activity() > 0:
        rate = ivs[k - 1].activity() / ivs[k - 1].seconds
    if rate:
        ts = min(iv.t1, iv.t0 + iv.activity() / rate)
        half = max(30.0, iv.seconds / 4)
        return TrafficStop(iv.daemon, ts, max(iv.t0, ts - half), min(iv.t1, ts + half), iv.end, nxt.end, "rate")
    return TrafficStop(iv.daemon, (iv.t0 + iv.t1) / 2, iv.t0, iv.t1, iv.end, nxt.end, "midpoint")
