"""`debugger ais`: what the storage cluster did while the training job failed, on one timeline with the workers.

Input: the archives `ais log get cluster` downloads (`aistarget-<ID>.tar.gz`, `aisproxy-<ID>.tar.gz`, each a flat
tar of every `.INFO` file of that node, FORMATS.md §4.6), already extracted folders, or loose `aistarget.*` /
`aisproxy.*` files (tools/bundle/open.py opens all of them safely). Worker logs come with `--workers`, or from the
same bundle when it holds both.

Stages, each a plain function (only `analyze_paths` / `read_sources` do I/O):
1. read: one streaming pass per file (tools/sources/ais/files.py) → AisFile (stats lines, signature lines, headers).
2. inventory: files per daemon ordered by start; a file covers [its start, the next file's start) or up to its
   last line; restarts (a new process, not a rotation) are flagged; zones resolved (header > same daemon >
   cluster).
3. stats: samples → per-interval deltas, error jumps, GET traffic stop (tools/sources/ais/stats.py).
4. clocks: anchors between worker events and daemon events → offset (tools/sources/ais/clocks.py).
5. window: from LOOKBACK before the first worker failure (or the main error jump) to the job's death; the files
   covering it and the restarts inside it.
6. chain: pressure → stream breaks → out-of-bounds → aborted → client short → loader error → NCCL cascade
   (tools/sources/ais/chain.py), plus the target-vs-target and proxy-vs-target comparison, retry noise, a merged timeline.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

from trainlog_debugger.tools.sources.ais.chain import LEAD_S, LOOKBACK_S, Chain, Occ, build_chain, retry_noise
from trainlog_debugger.tools.sources.ais.files import AisFile, read_ais
from trainlog_debugger.tools.sources.ais.report import DaemonSummary, FileSpan, compare, jump_dict, jump_finding, restarts, summary, timeline
from trainlog_debugger.tools.sources.ais.stats import Interval, Jump, Sample, error_jumps, intervals, traffic_stop
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.open import BundleError, open_bundle
from trainlog_debugger.tools.sources.ais.clocks import Anchor, ClockEstimate, WorkerEvents, estimate, iso, node_skew, worker_events
from trainlog_debugger.tools.bundle.parallel import map_sources
from trainlog_debugger.tools.jsonable import fields_jsonable
from trainlog_debugger.tools.model import Finding, Role
from trainlog_debugger.tools.sources.ais.format import LOG_SEVERITY, PROXY, TARGET, is_daemon_log_path
from trainlog_debugger.tools.sources.detect import WORKER_KINDS

BURST_SIGS = ("out_of_bounds", "stream_break", "xid_not_found")


@dataclass
class AisReport:
    root: str
    workers_root: str | None
    seconds: float
    bytes: int
    daemons: list[DaemonSummary]
    window: dict | None  # {start, end, basis}
    main_jump: dict | None
    comparison: dict | None
    pressured: list[str]
    chain: list[Finding]
    gaps: list[str]
    observations: list[Finding]  # beside the chain: restarts, clock zones, retry noise, malformed stats lines
    clock: ClockEstimate | None
    timeline: list[dict]
    worker_ranks: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    coverage = None  # daemons, not ranks: the worker side's coverage is the scan's

    def findings(self) -> list[Finding]:
        return list(self.chain) + list(self.observations)

    def to_json(self) -> dict:
        """`debugger ais --json`: every field, the observations under their public name `findings`."""
        return {("findings" if k == "observations" else k): v for k, v in fields_jsonable(self).items()}


@dataclass
class _Daemon:
    name: str
    role: str
    files: list[AisFile]
    spans: list[FileSpan] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    ivs: list[Interval] = field(default_factory=list)
    jumps: list[Jump] = field(default_factory=list)
    occ: list[Occ] = field(default_factory=list)


# -- I/O ----------------------------------------------------------------------------------------------------------
def is_ais(src) -> bool:
    return src.kind in (TARGET, PROXY) or is_daemon_log_path(src.rel)


def _read_one(s) -> AisFile | dict:
    try:
        with s.open() as stream:
            return read_ais(s.rel, s.kind, s.size, stream)
    except READ_ERRORS as exc:  # open() itself failed; read_ais handles errors mid-stream
        return {"file": s.rel, "reason": read_error_reason(exc)}


def _read_batch(batch) -> list[tuple[int, AisFile | dict]]:
    return [(i, _read_one(s)) for i, s in batch]


def read_sources(sources, workers: int | None = None) -> tuple[list[AisFile], list[dict]]:
    """One pass per file, over the one worker pool (tools.bundle.parallel decides whether to fork); results in
    bundle order whatever order the workers finish in."""
    got = [x for batch in map_sources(_read_batch, list(enumerate(sources)), workers=workers) for x in batch]
    ordered = [g for _, g in sorted(got, key=lambda x: x[0])]
    return [g for g in ordered if isinstance(g, AisFile)], [g for g in ordered if isinstance(g, dict)]


def analyze_paths(paths, workers=None) -> AisReport:
    """Open the bundle(s) and analyze. Raises BundleError (one line) when there is nothing usable."""
    with open_bundle(paths) as b:
        if workers:
            with open_bundle(workers) as wb:
                return analyze(b, wb)
        return analyze(b)


def analyze(bundle, workers_bundle=None) -> AisReport:
    from trainlog_debugger.tools.sources.pytorch.collectives import analyze as nccl_analyze
    from trainlog_debugger.tools.scan.driver import scan_bundle
    t0 = time.perf_counter()
    ais_src = [s for s in bundle.sources if is_ais(s)]
    if not ais_src:
        raise BundleError(f"no AIStore daemon logs (aistarget.*/aisproxy.* files or `ais log get cluster` archives) "
                          f"in {bundle.root}")
    wsrc = workers_bundle.sources if workers_bundle else [s for s in bundle.sources
                                                          if not is_ais(s) and s.kind in WORKER_KINDS]
    files, skipped = read_sources(ais_src)
    scan = nccl = None
    if wsrc:
        wb = workers_bundle or SimpleNamespace(root=bundle.root, sources=wsrc, notes=[], skipped=[])
        scan = scan_bundle(SimpleNamespace(root=wb.root, sources=wsrc, notes=list(getattr(wb, "notes", [])),
                                           skipped=list(getattr(wb, "skipped", []))))
        nccl = nccl_analyze(scan)
    rep = correlate(files, scan, nccl)
    rep.root = bundle.root
    rep.workers_root = (workers_bundle.root if workers_bundle else bundle.root) if scan else None
    rep.skipped = [{"file": s.rel, "reason": s.reason} for s in bundle.skipped] + skipped
    rep.notes = list(bundle.notes) + rep.notes
    rep.seconds = time.perf_counter() - t0
    return rep


# -- pure analysis ------------------------------------------------------------------------------------------------
def inventory(files: list[AisFile]) -> tuple[list[_Daemon], list[str]]:
    """Files per daemon, ordered by start; zones resolved; samples built (restart = new counter epoch)."""
    notes: list[str] = []
    by: dict[str, list[AisFile]] = {}
    ids: dict[tuple, set[str]] = {}  # (role, host token) → daemon ids seen with it
    for f in files:
        if f.host and f.daemon[:2] in ("t[", "p["):
            ids.setdefault((f.role, f.host), set()).add(f.daemon)
    for f in files:
        known = ids.get((f.role, f.host), set())
        if f.daemon[:2] not in ("t[", "p[") and len(known) == 1:  # no title line read (cut head): same host, same node
            f.daemon = next(iter(known))
        by.setdefault(f.daemon, []).append(f)
    cluster = Counter((z[1], z[2]) for f in files for z in f.zones[:1] if z[1] is not None)
    if len(cluster) > 1:
        notes.append(f"daemons state different zones: {', '.join(n for (_, n), _ in cluster.most_common())}")
    out = []
    for name, fs in sorted(by.items(), key=lambda kv: (kv[1][0].role != "target", kv[0])):
        sev = [LOG_SEVERITY.search(f.rel.rsplit("!", 1)[-1]) for f in fs]
        if any(m and m[1] == "INFO" for m in sev) and any(m and m[1] != "INFO" for m in sev):
            keep = [f for f, m in zip(fs, sev) if not (m and m[1] != "INFO")]
            notes.append(f"{name}: {len(fs) - len(keep)} ERROR/WARNING file(s) ignored (their lines are in INFO too)")
            fs = keep
        own = next(((z[1], z[2]) for f in fs for z in f.zones[:1] if z[1] is not None), None)
        for f in fs:
            if not f.zones:
                if own:
                    f.fallback_zone = (own[0], own[1], "daemon")
                elif cluster:
                    (off, zn), _ = cluster.most_common(1)[0]
                    f.fallback_zone = (off, zn, "cluster")
                    notes.append(f"{f.rel}: no hourly header in any file of {name}: zone {zn} taken from the cluster")
        fs.sort(key=lambda f: (f.ts(f.start) if f.start else float("inf"), f.rel))
        d = _Daemon(name, fs[0].role, fs)
        epoch = 0
        for i, f in enumerate(fs):
            nxt = fs[i + 1] if i + 1 < len(fs) else None
            restart = i > 0 and (f.started == "started" or (f.pid is not None and fs[i - 1].pid is not None
                                                             and f.pid != fs[i - 1].pid))
            epoch += restart
            d.spans.append(_span(f, nxt, restart))
            d.samples += [Sample(ts, c, f.evidence(rec), epoch) for rec, c in f.stats
                          if rec.local is not None and (ts := f.ts(rec)) is not None]
        d.ivs = intervals(name, d.role, d.samples)
        d.jumps = error_jumps(d.ivs)
        d.occ = _occurrences(d)
        out.append(d)
    return out, notes


def _span(f: AisFile, nxt: AisFile | None, restart: bool) -> FileSpan:
    s_ts = f.ts(f.start)
    if nxt is not None and nxt.start is not None:
        e_ts, basis = nxt.ts(nxt.start), "next file"
    else:
        e_ts, basis = f.ts(f.last), "last line" if f.last else "unknown"
    off = f.zone_of(f.start.seg if f.start else -1)
    midnight = bool(f.start and f.last and f.start.local is not None and f.last.local is not None
                    and int(f.start.local // 86400) != int(f.last.local // 86400))
    return FileSpan(f.rel, f.daemon, f.role, f.host, f.pid, f.started, restart, iso(s_ts, off[0]), iso(e_ts, off[0]),
                    basis, s_ts, e_ts, midnight, off[1], f.lines, f.bytes_read, len(f.stats), f.malformed_count,
                    f.evidence(f.start) if f.start and f.start.text else None, notes=list(f.notes))


def _occurrences(d: _Daemon) -> list[Occ]:
    merged: dict[str, Occ] = {}
    for f in d.files:
        for sig, st in f.sigs.items():
            o = merged.setdefault(sig, Occ(d.name, d.role, sig, [], []))
            if len({z[1] for z in f.zones}) <= 1:
                shift = (f.zone_of()[0] or 0) * 60
                o.times.extend(t - shift for t in st.times)
            else:
                o.times.extend(f.utc(t, seg) for t, seg in zip(st.times, st.segs))
            seen = set()
            for rec in [*st.first, *st.minutes.values(), *st.last]:
                if rec.line not in seen and rec.local is not None and (ts := f.ts(rec)) is not None:
                    seen.add(rec.line)
                    o.recs.append((ts, f.evidence(rec)))
            o.detail.update(st.detail)
    for o in merged.values():
        o.times.sort()
        o.recs.sort(key=lambda x: x[0])
    return list(merged.values())


def _anchors(daemons: list[_Daemon], wf: WorkerEvents) -> list[Anchor]:
    out = []
    stops = [s for d in daemons if d.role == "target" and (s := traffic_stop(d.ivs))]
    stop = max(stops, key=lambda s: s.ts, default=None)
    if stop is not None:
        dev = [stop.last_active, stop.first_idle]
        if wf.death is not None:
            out.append(Anchor("job_death", wf.death.ts, stop.ts, stop.uncertainty + 60, [wf.death.ev], dev,
                              "last worker line / SLURM cancel ↔ GET counters stop increasing", "get_stop", 0))
        if wf.hang_start is not None:
            out.append(Anchor("hang_start", wf.hang_start.ts, stop.ts, stop.uncertainty + 60, [wf.hang_start.ev], dev,
                              "stuck collective's start (watchdog − elapsed) ↔ GET counters stop increasing",
                              "get_stop", 1))
    big = max((j for d in daemons if d.role == "target" for j in d.jumps), key=lambda j: j.total, default=None)
    if big is not None and wf.loader_errors:
        iv = big.interval
        hits = [h for d in daemons if d.name == big.daemon for o in d.occ if o.sig in BURST_SIGS
                if (h := o.first_in(iv.t0 - 300, iv.t1)) is not None]
        first = min(hits, key=lambda h: h[0], default=None)
        ts, unc, dev = (first[0], 60.0, [first[1]]) if first else ((iv.t0 + iv.t1) / 2, iv.seconds / 2, [iv.end])
        out.append(Anchor("first_loader_error", wf.loader_errors[0].ts, ts, unc, [wf.loader_errors[0].ev], dev,
                          "first batch-loader error on a worker ↔ start of the error burst on a target", "burst", 0))
    return out


def _main_jump(daemons: list[_Daemon], near: float | None, notes: list[str]) -> Jump | None:
    """The error jump of the failure: the earliest one close to the first worker failure; without workers, the
    largest (targets first)."""
    js = [j for d in daemons if d.role == "target" for j in d.jumps] or [j for d in daemons for j in d.jumps]
    if near is not None:
        close = [j for j in js if near - LOOKBACK_S <= j.interval.t1 and j.interval.t0 <= near + LEAD_S]
        if close:
            return min(close, key=lambda j: j.interval.t0)
        if js:
            notes.append(f"no error jump on any daemon within {LOOKBACK_S // 60} min of the first worker failure "
                         f"({len(js)} elsewhere: see the per-daemon table)")
        return None
    return max(js, key=lambda j: (j.total, -j.interval.t0), default=None)


def correlate(files: list[AisFile], scan=None, nccl=None) -> AisReport:
    """Everything after reading: pure over the parsed files and the worker ScanResult/NcclReport."""
    daemons, notes = inventory(files)
    zones = Counter(z[1] for f in files for z in f.zones[:1] if z[1] is not None)
    dzone = zones.most_common(1)[0][0] if zones else None
    years = [int(y[:4]) for f in files if f.start and f.start.basis != "filename" and (y := iso(f.ts(f.start)))]
    wf = worker_events(scan, statistics.mode(years) if years else None) if scan is not None else None
    clock = estimate(_anchors(daemons, wf), dzone, wf.zone_min) if wf else None
    if wf:
        notes += wf.notes
    first_err = None
    if wf and wf.loader_errors and clock is not None and clock.offset_s is not None:
        first_err = clock.to_daemon(wf.loader_errors[0].ts)
    main = _main_jump(daemons, first_err, notes)
    t_fail = first_err if first_err is not None else (main.interval.t1 if main else None)
    findings: list[Finding] = []
    chain = Chain([], [], [], (0, 0))
    window = None
    if t_fail is not None:
        focus = (t_fail - LOOKBACK_S, t_fail + LEAD_S)
        stops = [s.ts for d in daemons if d.role == "target" and (s := traffic_stop(d.ivs))]
        death = (clock.to_daemon(wf.death.ts) if wf and wf.death and clock is not None and clock.offset_s is not None
                 else None)
        end = max([focus[1]] + ([death] if death is not None else stops[-1:] if stops else []))
        window = {"start": iso(focus[0], dzone), "end": iso(end, dzone), "start_ts": focus[0], "end_ts": end,
                  "basis": ("first worker loader error − 20 min → job death (daemon clock)" if first_err is not None
                            else "main error jump − 20 min → GET traffic stop")}
        straggler = {r: nccl.ranks[r].cited()[:2] for r in nccl.culprits if r in nccl.ranks} if nccl else {}
        chain = build_chain([o for d in daemons for o in d.occ], [j for d in daemons for j in d.jumps], wf, clock,
                            focus, dzone, straggler)
        notes += chain.notes
        findings += restarts(daemons, focus[0], end, dzone, t_fail)
    comparison = compare(daemons, main, dzone) if main else None
    if main:
        findings.append(jump_finding(main, dzone))
    if comparison and comparison.get("finding"):
        findings.append(comparison.pop("finding"))
    for d in daemons:
        bad = [(f, rec, why) for f in d.files for rec, why in f.malformed]
        if bad:
            n = sum(f.malformed_count for f in d.files)
            findings.append(Finding(id="ais.stats_malformed", role=Role.context, count=n, nodes=[d.name],
                                    summary=f"{d.name}: {n} malformed stats line(s) skipped ({bad[0][2]})",
                                    evidence=[f.evidence(rec) for f, rec, _ in bad[:3]]))
    if scan is not None and wf is not None:  # wf is read from the scan
        culprits = {e.rank for e in wf.loader_errors if e.rank is not None} | set(nccl.culprits if nccl else [])
        noise = retry_noise(scan, culprits)
        if noise:
            findings.append(noise)
        findings += node_skew(wf.watchdogs)
    if clock is not None and (cf := clock.finding()):
        findings.insert(0, cf)
    summaries = [summary(d, window, dzone) for d in daemons]
    return AisReport("", None, 0.0, sum(f.bytes_read for f in files), summaries, window,
                     jump_dict(main, dzone) if main else None, comparison, chain.pressured, chain.steps, chain.gaps,
                     findings, clock, timeline(chain, findings, main, daemons, wf, clock, dzone, window),
                     len(scan.ranks) if scan else 0, notes)
