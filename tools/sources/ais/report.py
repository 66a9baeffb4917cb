"""Report pieces of `debugger ais`: the files each daemon wrote and the time they cover, restarts inside the failure
window, the error jump, the target-vs-target and proxy-vs-target comparison, and the merged timeline.

Pure functions over tools/sources/ais/analyze.py's per-daemon state (duck-typed: `.name .role .spans .ivs .jumps .occ`); the
report types are plain dataclasses of strings, numbers and Evidence so that `--json` needs no conversion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainlog_debugger.tools.sources.ais.stats import MEANING, Jump, flat_in, traffic_stop
from trainlog_debugger.tools.sources.ais.clocks import hm, iso
from trainlog_debugger.tools.model import Evidence, Finding, Role

RATES = (("err.get.n", "get.n", "GET"), ("err.getbatch.n", "getbatch.n", "batch GET"))


@dataclass
class FileSpan:
    """One daemon log file and the time it covers (JSON-friendly)."""

    file: str
    daemon: str
    role: str
    host: str | None
    pid: int | None
    started: str  # started | rotated | unknown
    restart: bool  # a new process after an earlier file of the same daemon
    start: str | None
    end: str | None
    end_basis: str  # 'next file' | 'last line' | 'unknown'
    start_ts: float | None
    end_ts: float | None
    spans_midnight: bool
    zone: str | None
    lines: int
    bytes: int
    stats_lines: int
    malformed_stats: int
    start_ev: Evidence | None = None
    covers_window: bool = False
    starts_in_window: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class DaemonSummary:
    daemon: str
    role: str
    files: list[FileSpan]
    samples: int
    intervals: int
    restarts: int
    errors_total: dict[str, int]  # err.* deltas summed over every interval
    window_deltas: dict[str, int]  # cumulative deltas summed over the intervals that overlap the failure window
    signatures: dict[str, dict]  # sig → {count, first, last}
    jumps: list[dict]
    traffic_stop: dict | None = None
    window_intervals: list[dict] = field(default_factory=list)  # per stats interval in the window: err Δ, signatures
    other: dict = field(default_factory=dict)  # E/W lines that are no failure signature: counts and top templates


def _rates(iv) -> dict[str, float]:
    return {label: round(r, 4) for err, tot, label in RATES if (r := iv.rate(err, tot)) is not None}


def jump_dict(j: Jump, zone: int | None) -> dict:
    iv = j.interval
    return {"daemon": j.daemon, "role": iv.role, "start": iso(iv.t0, zone), "end": iso(iv.t1, zone),
            "counters": {k: {"delta": d, "expected": e, "meaning": MEANING.get(k, "")}
                         for k, (d, e) in j.counters.items()},
            "errors": j.total, "rates": _rates(iv), "reset": iv.reset, "start_line": iv.start, "end_line": iv.end}


def jump_finding(j: Jump, zone: int | None) -> Finding:
    iv = j.interval
    parts = ", ".join(f"{k} +{d} (usual {e:g})" for k, (d, e) in list(j.counters.items())[:4])
    rates = ", ".join(f"{k} error rate {v:.1%}" for k, v in _rates(iv).items())
    return Finding(id="ais.error_jump", role=Role.cascade, category="storage_io", nodes=[j.daemon], count=j.total,
                   summary=f"errors jump on {j.daemon} between {iso(iv.t0, zone)} and {iso(iv.t1, zone)}: {parts}"
                           + (f"; {rates}" if rates else ""),
                   evidence=[iv.start, iv.end], facts={"counters": {k: d for k, (d, _) in j.counters.items()},
                                                        "rates": _rates(iv)})


def compare(daemons, main: Jump, zone: int | None) -> dict:
    """Every daemon's errors during the main jump's interval vs its own baseline. Proxy errors flat while target
    errors spike = the problem is target-side (disk, memory, inter-target network), not routing or clients."""
    t0, t1 = main.interval.t0, main.interval.t1
    rows = []
    for d in daemons:
        flat, got, exp = flat_in(d.ivs, t0, t1)
        rows.append({"daemon": d.name, "role": d.role, "errors": got, "expected": exp, "jumped": not flat})
    tj = [r["daemon"] for r in rows if r["role"] == "target" and r["jumped"]]
    pj = [r["daemon"] for r in rows if r["role"] == "proxy" and r["jumped"]]
    flat_t = [r["daemon"] for r in rows if r["role"] == "target" and not r["jumped"]]
    flat_p = [r["daemon"] for r in rows if r["role"] == "proxy" and not r["jumped"]]
    verdict = ("target-side" if tj and not pj else "proxy-side" if pj and not tj else "cluster-wide" if tj else "none")
    out: dict[str, Any] = {"start": iso(t0, zone), "end": iso(t1, zone), "rows": rows, "verdict": verdict}
    ev = [main.interval.start, main.interval.end]
    for d in daemons:
        if d.role == "proxy" and d.name in flat_p:
            iv = next((iv for iv in d.ivs if iv.t1 > t0 and iv.t0 < t1), None)
            if iv is not None:
                ev.append(iv.end)
    if verdict != "none":
        out["finding"] = Finding(
            id=f"ais.{verdict.replace('-', '_')}", role=Role.context, category="storage_io", nodes=tj + pj,
            evidence=ev[:4], summary=f"{verdict}: errors jumped on {', '.join(tj + pj)} while "
            + (f"target(s) {', '.join(flat_t)} " if flat_t else "")
            + (f"{'and ' if flat_t else ''}proxy(ies) {', '.join(flat_p)} " if flat_p else "")
            + f"stayed at their usual rate ({iso(t0, zone)} → {iso(t1, zone)})",
            facts={"jumped": tj + pj, "flat": flat_t + flat_p})
    return out


def files_for_window(spans: list[FileSpan], t0: float, t1: float) -> tuple[list[FileSpan], list[FileSpan]]:
    """One daemon's files (ordered by start) → (the files covering [t0, t1], the files that start inside it after an
    earlier file). A file covers [its start, the next file's start), the last one up to its last line."""
    cover = [sp for sp in spans if sp.start_ts is not None and sp.start_ts < t1 and (sp.end_ts is None or sp.end_ts > t0)]
    inside = [sp for i, sp in enumerate(spans) if i > 0 and sp.start_ts is not None and t0 <= sp.start_ts <= t1]
    return cover, inside


def restarts(daemons, t0: float, t1: float, zone: int | None, t_fail: float | None = None) -> list[Finding]:
    """Mark the files covering [t0, t1] and report every file that starts inside it: a restart (new process) is
    significant in itself; a rotation only splits the evidence over two files."""
    out = []
    for d in daemons:
        cover, inside = files_for_window(d.spans, t0, t1)
        for i, sp in enumerate(d.spans):
            sp.covers_window = any(sp is c for c in cover)
            sp.starts_in_window = any(sp is c for c in inside)
            if not sp.starts_in_window:
                continue
            prev = d.spans[i - 1]
            ev = [e for e in (sp.start_ev,) if e is not None]
            if not ev:
                continue
            if sp.restart:
                before = t_fail is not None and sp.start_ts <= t_fail
                pid = f", pid {prev.pid} → {sp.pid}" if prev.pid and sp.pid and prev.pid != sp.pid else ""
                out.append(Finding(
                    id="ais.restart", role=Role.root_candidate if before else Role.context, nodes=[d.name],
                    category="storage_io", evidence=ev,
                    summary=f"{d.name} restarted at {sp.start} inside the failure window (new process{pid}): "
                            + ("before the first failure, a candidate cause" if before else
                               "after the first failure: a consequence (OOM kill?) or an operator's action")
                            + f"; counters restart from zero; earlier evidence is in {prev.file}",
                    facts={"at": sp.start, "file": sp.file, "previous_file": prev.file}))
            else:
                out.append(Finding(
                    id="ais.rotation", role=Role.context, nodes=[d.name], evidence=ev,
                    summary=f"{d.name}: log rotated at {sp.start} inside the failure window (same process): the "
                            f"window's lines are split between {prev.file} and {sp.file}",
                    facts={"at": sp.start}))
    return out


def summary(d, window: dict | None, zone: int | None = None) -> DaemonSummary:
    errs: dict[str, int] = {}
    for iv in d.ivs:
        for k, v in iv.deltas.items():
            if k.startswith("err."):
                errs[k] = errs.get(k, 0) + v
    wd: dict[str, int] = {}
    sigs = {}
    if window:
        w0, w1 = window["start_ts"], window["end_ts"]
        for iv in d.ivs:
            if iv.t1 > w0 and iv.t0 < w1:
                for k, v in iv.deltas.items():
                    wd[k] = wd.get(k, 0) + v
    for o in d.occ:
        sigs[o.sig] = {"count": len(o.times), "first": o.recs[0][1] if o.recs else None,
                       "last": o.recs[-1][1] if o.recs else None,
                       "in_window": o.count_in(window["start_ts"], window["end_ts"]) if window else None}
    per_iv = []
    if window:
        for iv in d.ivs:
            if iv.t1 > window["start_ts"] and iv.t0 < window["end_ts"]:
                per_iv.append({"start": iso(iv.t0, zone), "end": iso(iv.t1, zone), "reset": iv.reset,
                               "errors": {k: v for k, v in iv.deltas.items() if k.startswith("err.")},
                               "gets": {k: iv.deltas[k] for k in ("get.n", "getbatch.n") if k in iv.deltas},
                               "signatures": {o.sig: n for o in d.occ if (n := o.count_in(iv.t0, iv.t1))}})
    other: dict[str, Any] = {"E": 0, "W": 0, "top": []}
    for f in d.files:
        for (sev, tpl), (n, rec) in f.other.items():
            other[sev] = other.get(sev, 0) + n
            other["top"].append({"sev": sev, "template": tpl, "count": n, "first": f.evidence(rec)})
    other["top"] = sorted(other["top"], key=lambda x: -x["count"])[:10]
    stop = traffic_stop(d.ivs)
    return DaemonSummary(d.name, d.role, d.spans, len(d.samples), len(d.ivs),
                         sum(sp.restart for sp in d.spans), dict(sorted(errs.items())), dict(sorted(wd.items())), sigs,
                         [jump_dict(j, zone) for j in d.jumps[:5]],
                         {"at": iso(stop.ts, zone), "lo": iso(stop.lo, zone), "hi": iso(stop.hi, zone),
                          "method": stop.method,
                          "last_active": stop.last_active, "first_idle": stop.first_idle} if stop else None,
                         per_iv[:60], other)


def timeline(chain, findings, main, daemons, wf, clock, zone, window) -> list[dict]:
    """The merged timeline on the daemon clock: storage events as logged, worker events moved by the offset."""
    rows: list[tuple[float, dict]] = []

    def add(ts, what, ev: Evidence | None, clk="daemon"):
        if ts is not None and ev is not None:
            rows.append((ts, {"at": iso(ts, zone), "clock": clk, "what": what, "cite": ev.cite(), "text": ev.text}))

    aligned = clock is not None and clock.offset_s is not None
    wclk = f"worker {hm(clock.offset_s)} (inferred, {clock.confidence})" if aligned else "worker (not aligned)"
    for f in chain.steps:
        ev = f.evidence[0]
        t = ev.time
        ts = None
        if t is not None and t.fmt == "ais":
            ts = _iso_ts(t.iso())
        elif t is not None and t.meta("aligned"):
            ts = _iso_ts(t.meta("aligned"))
        add(ts, f"{f.facts.get('step')}. {f.facts.get('title')}" + (f" ({', '.join(f.nodes)})" if f.nodes else "")
            + (f" (rank {', '.join(map(str, f.ranks))})" if f.ranks and not f.nodes else ""), ev,
            "daemon" if t is not None and t.fmt == "ais" else wclk)
    if main is not None:
        add(main.interval.t1, f"error jump on {main.daemon} (interval from {iso(main.interval.t0, zone)})",
            main.interval.end)
    for f in findings:
        if f.id in ("ais.restart", "ais.rotation"):
            add(_iso_ts(f.facts.get("at")), f"{f.nodes[0]} " + ("restarted (new process)" if f.id == "ais.restart"
                                                                 else "log rotated"), f.evidence[0])
    stops = [s for d in daemons if d.role == "target" and (s := traffic_stop(d.ivs))]
    if stops:
        s = max(stops, key=lambda s: s.ts)
        add(s.ts, f"GET counters stop increasing ({s.daemon}, ±{s.uncertainty:.0f}s)", s.first_idle)
    if wf is not None:
        for label, e in (("stuck collective starts", wf.hang_start), ("job dead (last worker line)", wf.death),
                         ("SLURM cancel", wf.cancel)):
            if e is not None:
                add(clock.to_daemon(e.ts) if aligned else e.ts, label, e.ev, wclk)
    rows.sort(key=lambda r: r[0])
    seen, out = set(), []
    for _, r in rows:  # the last worker line may be the SLURM cancel itself: one row
        if (r["cite"], r["at"]) not in seen:
            seen.add((r["cite"], r["at"]))
            out.append(r)
    return out


def _iso_ts(s: str | None) -> float | None:
    from datetime import datetime, timezone
    if not s:
        return None
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()
