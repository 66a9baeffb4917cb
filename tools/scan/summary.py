"""The one-pass cross-rank scan: every byte of every file, once, then per-pattern and per-rank summaries.

Why it is shaped like this: a 256-GPU job leaves hundreds of files and many GB; the user needs "which pattern,
on which ranks, first where and when", plus what is NOT there (ranks with no lines, ranks missing a line every
other rank has, ranks that went silent first). Files are scanned (tools.scan.filepass) in forked workers, batched to
tens of MB per task as PERF.md measured (tools.bundle.parallel); the parent only merges small per-file summaries.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from trainlog_debugger.tools.bundle.open import READ_ERRORS, natural_key, read_error_reason
from trainlog_debugger.tools.sources import by_id, patterns
from trainlog_debugger.tools.scan.engine import make_engine, rank_labels
from trainlog_debugger.tools.scan.filepass import FileScan, FileScanner, Hit
from trainlog_debugger.tools.sources.torchrun.rankmap import resolve as resolve_local_ranks
from trainlog_debugger.tools.lines.timestamps import order_then_place
from trainlog_debugger.tools.model import Coverage, Evidence
from trainlog_debugger.tools.bundle.parallel import map_sources
from trainlog_debugger.tools.ranks import parse_ranges

TEXT_SKIP_KINDS = {"fr_dump"}
LIST_CAP = 32  # ranks listed inline per pattern; the rest are counted and the cut is said


@dataclass
class PatternSummary:
    id: str
    tier: int
    category: str | None
    role: str
    summary: str
    count: int
    files: int
    rank_counts: dict[int, int]
    unranked: int
    first: Evidence | None
    last: Evidence | None
    only_ranks: list[int] = field(default_factory=list)  # present in a minority of ranks
    missing_ranks: list[int] = field(default_factory=list)  # present in most ranks, absent from these


@dataclass
class RankSummary:
    rank: int
    files: list[str]
    nodes: list[str]
    counts: dict[str, int]
    first_match: Evidence | None
    last_match: Evidence | None
    last_line: Evidence | None
    retry: dict | None = None


@dataclass
class ScanResult:
    root: str
    engine: str
    seconds: float
    bytes: int
    lines: int
    files: list[FileScan]
    patterns: list[PatternSummary]
    ranks: dict[int, RankSummary]
    coverage: Coverage
    rank_nodes: dict[int, Evidence]
    silent_first: list[dict]
    notes: list[str]


def to_evidence(h: Hit, rel: str, kind: str | None = None) -> Evidence:
    return Evidence(file=rel, line=h.line, text=h.text, offset=h.offset, time=h.time, rank=h.rank,
                    node=h.node, kind=kind)


# -- workers ----------------------------------------------------------------------------------------------
_ENGINE = None


def _scan_sources(batch) -> list[FileScan]:
    scanner = FileScanner(_ENGINE)
    out = []
    for src in batch:
        try:
            with src.open() as stream:
                out.append(scanner.scan(src.rel, src.kind, src.size, stream, sized=not src.gzip))
        except READ_ERRORS as e:  # the scanner handles mid-stream errors; this is open() itself failing
            out.append(FileScan(rel=src.rel, kind=src.kind, size=src.size, error=read_error_reason(e)))
    return out


def scan_bundle(bundle, *, workers: int | None = None, engine=None, pats=None,
                progress: Callable[[int, int], None] | None = None) -> ScanResult:
    """`engine` is an engine name (None = fastest available) or a ready engine object over `pats`
    (grep passes its own one-pattern engine); `pats` defaults to the whole catalog."""
    global _ENGINE
    t0 = time.perf_counter()
    pats = list(pats) if pats is not None else list(patterns())
    _ENGINE = engine if hasattr(engine, "candidates") else make_engine(pats, engine)
    rank_labels(b"")  # load the label database once, before the workers fork, not once per worker
    sources = [s for s in bundle.sources if s.kind not in TEXT_SKIP_KINDS]
    results: list[FileScan] = []
    for batch in map_sources(_scan_sources, sources, workers=workers, progress=progress, per_worker=16):
        results.extend(batch)
    results.sort(key=lambda f: natural_key(f.rel))
    res = summarize(bundle.root, _ENGINE.name, results, list(getattr(bundle, "notes", [])),
                    [{"file": s.rel, "reason": s.reason} for s in getattr(bundle, "skipped", [])],
                    {p.id: p for p in pats})
    res.seconds = time.perf_counter() - t0
    return res


# -- merge ------------------------------------------------------------------------------------------------
def summarize(root: str, engine: str, files: list[FileScan], notes: list[str], skipped: list[dict],
              cat: dict | None = None) -> ScanResult:
    cat = cat if cat is not None else by_id()
    notes.extend(resolve_local_ranks(files, _world_size(files)))
    kind_of = {f.rel: f.kind for f in files}
    pat_counts: dict[str, dict] = {}
    rank_files: dict[int, set[str]] = {}
    rank_nodes: dict[int, Evidence] = {}
    per_rank_counts: dict[int, dict[str, int]] = {}
    first_hit: dict[str, tuple] = {}
    last_hit: dict[str, tuple] = {}
    rank_first: dict[int, tuple] = {}
    rank_last: dict[int, tuple] = {}
    retries: dict[int, list[int]] = {}
    dropped = 0
    for f in files:
        if f.error:
            notes.append(f"{f.rel}: {f.error}")
        notes.extend(f"{f.rel}: {n}" for n in f.notes if n != f"read stopped at byte {f.bytes_read}: {f.error}")
        dropped += f.dropped_hits
        for r in f.ranks:
            rank_files.setdefault(r, set()).add(f.rel)
        for (pid, rank), n in f.counts.items():
            pc = pat_counts.setdefault(pid, {"count": 0, "files": set(), "ranks": {}, "unranked": 0})
            pc["count"] += n
            pc["files"].add(f.rel)
            if rank is None:
                pc["unranked"] += n
            else:
                pc["ranks"][rank] = pc["ranks"].get(rank, 0) + n
                per_rank_counts.setdefault(rank, {})[pid] = per_rank_counts.get(rank, {}).get(pid, 0) + n
                rank_files.setdefault(rank, set()).add(f.rel)
        for h in f.hits:
            key = order_then_place(h.time, f.rel, h.line)
            if h.pattern not in first_hit or key < first_hit[h.pattern][0]:
                first_hit[h.pattern] = (key, h, f.rel)
            if h.pattern not in last_hit or key > last_hit[h.pattern][0]:
                last_hit[h.pattern] = (key, h, f.rel)
            p = cat.get(h.pattern)
            if h.rank is not None and p is not None and p.tier > 0:
                if h.rank not in rank_first or key < rank_first[h.rank][0]:
                    rank_first[h.rank] = (key, h, f.rel)
                if h.rank not in rank_last or key > rank_last[h.rank][0]:
                    rank_last[h.rank] = (key, h, f.rel)
            if h.rank is not None and h.node and h.rank not in rank_nodes:
                rank_nodes[h.rank] = to_evidence(h, f.rel, f.kind)
        _pair_failure_blocks(f, rank_nodes)
        for r, v in f.retries.items():
            if r is None:
                continue
            cur = retries.setdefault(r, [0, 0, 0, 0])
            cur[0], cur[1] = max(cur[0], v[0]), max(cur[1], v[1])
            cur[2] += v[2]
            cur[3] += v[3]
    if dropped:
        notes.append(f"{dropped} repeated hits kept as counts only (first and last 5 per pattern and rank kept in full)")

    coverage = _coverage(files, rank_files, skipped, notes)
    deduced = _deduce_last_rank(files, coverage)
    if deduced is not None:
        (f, lr, r) = deduced
        notes.append(f"{f.rel}: local rank {lr} is deduced to be rank {r}: it is the only local rank in the bundle with "
                     f"no stated global rank, and rank {r} the only rank of the job with no line of its own")
        coverage.seen_ranks = sorted(set(coverage.seen_ranks) | {r})
        coverage.missing_ranks = [x for x in coverage.missing_ranks if x != r]
        rank_files.setdefault(r, set()).add(f.rel)
        for h in f.hits:
            if h.rank is None and h.local_rank == lr:
                h.rank = r
                for pc in (pat_counts.get(h.pattern),):
                    if pc is not None:
                        pc["unranked"] -= 1
                        pc["ranks"][r] = pc["ranks"].get(r, 0) + 1
                per_rank_counts.setdefault(r, {})[h.pattern] = per_rank_counts.get(r, {}).get(h.pattern, 0) + 1
        f.ranks.add(r)
        if lr in f.last_local:
            f.last_lines[r] = f.last_local.pop(lr)
    seen = coverage.seen_ranks
    pats: list[PatternSummary] = []
    for pid, pc in pat_counts.items():
        p = cat[pid]
        ps = PatternSummary(
            id=pid, tier=p.tier, category=p.category, role=p.role, summary=p.summary, count=pc["count"],
            files=len(pc["files"]), rank_counts=dict(sorted(pc["ranks"].items())), unranked=pc["unranked"],
            first=to_evidence(first_hit[pid][1], first_hit[pid][2], kind_of.get(first_hit[pid][2])) if pid in first_hit else None,
            last=to_evidence(last_hit[pid][1], last_hit[pid][2], kind_of.get(last_hit[pid][2])) if pid in last_hit else None,
        )
        with_ = set(pc["ranks"])
        if len(seen) >= 2 and with_:
            if len(with_) * 2 < len(seen):
                ps.only_ranks = sorted(with_)
            elif len(with_) < len(seen):
                ps.missing_ranks = sorted(set(seen) - with_)
        pats.append(ps)
    pats.sort(key=lambda s: (s.tier if s.tier else 9, -s.count, s.id))

    ranks: dict[int, RankSummary] = {}
    last_lines = _last_lines(files)
    for r in sorted(set(seen) | set(per_rank_counts)):
        rs = RankSummary(
            rank=r, files=sorted(rank_files.get(r, ()), key=natural_key),
            nodes=[rank_nodes[r].node] if r in rank_nodes and rank_nodes[r].node else [],
            counts=dict(sorted(per_rank_counts.get(r, {}).items())),
            first_match=to_evidence(rank_first[r][1], rank_first[r][2], kind_of.get(rank_first[r][2])) if r in rank_first else None,
            last_match=to_evidence(rank_last[r][1], rank_last[r][2], kind_of.get(rank_last[r][2])) if r in rank_last else None,
            last_line=last_lines.get(r),
        )
        if r in retries:
            a, m, at1, atmax = retries[r]
            rs.retry = {"max_attempt": a, "max_attempts": m, "at_first_attempt": at1, "exhausted": atmax,
                        "state": "exhausted" if atmax else ("recovering" if a <= 1 else "escalating")}
        ranks[r] = rs
    return ScanResult(root=root, engine=engine, seconds=0.0, bytes=sum(f.bytes_read for f in files),
                      lines=sum(f.lines for f in files), files=files, patterns=pats, ranks=ranks,
                      coverage=coverage, rank_nodes=rank_nodes, silent_first=_silent_first(ranks), notes=notes)


def _pair_failure_blocks(f: FileScan, rank_nodes: dict[int, Evidence]) -> None:
    """torchrun's ChildFailedError report states `host : X` then `rank : R (local_rank: L)`: a stated mapping."""
    last_host = None
    for h in f.hits:
        if h.pattern == "torchrun.failure_host":
            last_host = h
        elif h.pattern == "torchrun.failure_rank" and last_host and 0 < h.line - last_host.line <= 3:
            r = h.fields.get("failed_rank")
            if isinstance(r, int) and r not in rank_nodes:
                rank_nodes[r] = Evidence(file=f.rel, line=last_host.line, text=last_host.text, rank=r,
                                         node=last_host.fields.get("host"), kind=f.kind)
        elif h.pattern == "slurm.task_exit":
            hosts, tasks = h.fields.get("hosts", ""), h.fields.get("tasks", "")
            if hosts and "[" not in hosts and "," not in hosts:
                for r in parse_ranges(tasks):
                    if r not in rank_nodes:
                        rank_nodes[r] = Evidence(file=f.rel, line=h.line, text=h.text, rank=r, node=hosts, kind=f.kind)


def _world_size(files: list[FileScan]) -> int | None:
    """The world size a log states (the same sources, in the same order of trust, as coverage uses)."""
    stated = [h.fields.get("world_size") for f in files for h in f.hits
              if h.pattern in ("job.world_size", "job.lightning_member")]
    nranks = [h.fields.get("nranks") for f in files for h in f.hits if h.pattern == "nccl.comm_init"]
    vals = [v for v in stated if isinstance(v, int)] or [v for v in nranks if isinstance(v, int)]
    return max(vals) if vals else None


def _deduce_last_rank(files: list[FileScan], cov: Coverage):
    """One rank unseen, one (file, local rank) unmapped: then they are the same process. Anything more ambiguous
    stays unattributed (the report lists it), because a wrong rank is worse than none."""
    if len(cov.missing_ranks) != 1 or cov.expected_from == "max rank seen":
        return None
    unmapped = {(f.rel, h.local_rank) for f in files for h in f.hits if h.rank is None and h.local_rank is not None
                and f.local_to_rank and h.local_rank not in f.local_to_rank}
    if len(unmapped) != 1:
        return None
    rel, lr = next(iter(unmapped))
    f = next(x for x in files if x.rel == rel)
    return f, lr, cov.missing_ranks[0]


def _coverage(files: list[FileScan], rank_files: dict[int, set[str]], skipped: list[dict], notes: list[str]) -> Coverage:
    best = None  # (priority, value, evidence, source)
    for f in files:
        for h in f.hits:
            v = None
            if h.pattern in ("job.world_size", "job.lightning_member"):
                v, pri, src = h.fields.get("world_size"), 0, "world size in the logs"
            elif h.pattern == "nccl.comm_init":
                v, pri, src = h.fields.get("nranks"), 1, "NCCL nranks (largest communicator)"
            if isinstance(v, int) and v > 0:
                cand = (pri, -v, to_evidence(h, f.rel, f.kind), src, v)
                if best is None or cand[:2] < best[:2]:
                    best = cand
    seen = sorted(rank_files)
    cov = Coverage(seen_ranks=seen, files=len(files),
                   files_without_rank=sum(1 for f in files if not f.ranks and not any(h.rank is not None for h in f.hits)),
                   skipped=skipped, notes=[])
    if best is not None:
        cov.expected_ranks, cov.expected_from, cov.expected_evidence = best[4], best[3], [best[2]]
    elif seen:
        cov.expected_ranks, cov.expected_from = max(seen) + 1, "max rank seen"
    if cov.expected_ranks:
        cov.missing_ranks = sorted(set(range(cov.expected_ranks)) - set(seen))
        extra = [r for r in seen if r >= cov.expected_ranks]
        if extra:
            cov.notes.append(f"ranks above the expected world size: {extra[:LIST_CAP]}")
    return cov


def _last_lines(files: list[FileScan]) -> dict[int, Evidence]:
    out: dict[int, Evidence] = {}
    for f in files:
        for r, ll in f.last_lines.items():
            if r is None:
                continue
            ev = Evidence(file=f.rel, line=ll.line, text=ll.text, time=ll.time, rank=r, kind=f.kind)
            prev = out.get(r)
            if prev is None or order_then_place(ev.time) > order_then_place(prev.time):
                out[r] = ev
    return out


def _silent_first(ranks: dict[int, RankSummary]) -> list[dict]:
    """Ranks whose last timestamped line is well before the others': who stopped talking first."""
    times = {}
    for r, rs in ranks.items():
        t = rs.last_line.time if rs.last_line else None
        secs = t.job_seconds() if t is not None else None
        if secs is not None:
            times[r] = secs
    if len(times) < 2:
        return []
    med = statistics.median(times.values())
    out = []
    for r, t in sorted(times.items(), key=lambda kv: kv[1]):
        gap = med - t
        if gap >= 60:
            out.append({"rank": r, "last_time": ranks[r].last_line.time.iso(), "seconds_before_median": round(gap, 1),
                        "last_line": ranks[r].last_line})
    return out

