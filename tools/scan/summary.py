"""The merge after the one pass: per-file scans → per-pattern and per-rank summaries, coverage, who went silent.

Why it is shaped like this: a 256-GPU job leaves hundreds of files; the user needs "which pattern, on which ranks,
first where and when", plus what is NOT there (ranks with no lines, ranks missing a line every other rank has,
ranks that went silent first). The per-file scans arrive from forked workers (tools.scan.driver); everything
here is small merged state, linear in hits kept and ranks, never in bytes.

What a source states about ranks beyond its hits reaches the merge as its steps (`SCAN_STEPS`, by phase, each a
"module:function" the registry resolves), and the patterns that state a world size as data (`WORLD_SIZE`):
- `local_ranks(files, world) -> notes`, before the merge: hits that carry only a local rank get the global rank
  the launcher states (torchrun's failure report and --log-dir layout);
- `file_nodes(file) -> [(line, rank, Evidence)]`, per file as the merge reaches it: lines that state which node
  ran a rank (torchrun's failure report, srun's task exits); the first statement per rank is kept, by file and
  line, with the hits whose own prefix names their node;
- `nodes(files, world) -> [(rank, Evidence)]`, once coverage knows the world size: statements that need it (NCCL's
  world-sized communicators), kept only for ranks no launcher placed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from trainlog_debugger.tools.bundle.source import natural_key
from trainlog_debugger.tools.evidence import Coverage, Evidence
from trainlog_debugger.tools.groups import Group, rank_set, template
from trainlog_debugger.tools.lines.timestamps import Stamp, mixed_zone_note, order_key, order_then_place
from trainlog_debugger.tools.ranks import MAX_RANKS
from trainlog_debugger.tools.scan.result import FileScan, Hit, PatternSummary, RankSummary, ScanResult, to_evidence
from trainlog_debugger.tools.sources import by_id, declared, resolve
from trainlog_debugger.tools.sources.pattern import WorldSize

LIST_CAP = 32  # ranks listed inline per pattern; the rest are counted and the cut is said


def steps(phase: str) -> list[Callable]:
    """The sources' steps of one phase (module docstring), in registry order."""
    return [cast(Callable, resolve(ref)) for _src, table in declared("SCAN_STEPS")
            if (ref := cast("dict[str, str]", table).get(phase))]


def world_sizes() -> dict[str, WorldSize]:
    """Pattern id → how its hit states the world size, over every source."""
    out: dict[str, WorldSize] = {}
    for _src, table in declared("WORLD_SIZE"):
        out.update(cast("dict[str, WorldSize]", table))
    return out


def summarize(root: str, engine: str, files: list[FileScan], notes: list[str], skipped: list[dict],
              cat: dict | None = None) -> ScanResult:
    """Merge the per-file scans (in bundle order) into one ScanResult."""
    cat = cat if cat is not None else by_id()
    sizes = world_sizes()
    world = _world_size(files, sizes)
    for step in steps("local_ranks"):
        notes.extend(step(files, world))
    m = _Merge(cat, steps("file_nodes"))
    for f in files:
        m.add(f, notes)
    if m.dropped:
        notes.append(f"{m.dropped} repeated hits kept as counts only (first and last 5 per pattern and rank kept in full)")
    if (zones := mixed_zone_note(f.first_time for f in files)):
        notes.append(zones)
    coverage = _coverage(files, m.rank_files, skipped, sizes)
    m.deduce_last_rank(files, coverage, notes)
    for step in steps("nodes"):
        for r, ev in step(files, coverage.expected_ranks):
            m.rank_nodes.setdefault(r, ev)
    ranks = m.rank_summaries(files, coverage.seen_ranks)
    return ScanResult(root=root, engine=engine, seconds=0.0, bytes=sum(f.bytes_read for f in files),
                      lines=sum(f.lines for f in files), files=files,
                      patterns=m.pattern_summaries(files, coverage.seen_ranks), ranks=ranks, coverage=coverage,
                      rank_nodes=m.rank_nodes, silent_first=_silent_first(ranks), notes=notes)


class _Merge:
    """Running totals over the files: counts per pattern and rank, first/last hit per pattern and per rank (by
    Stamp.order_key, then file and line), the stated rank→node lines, retry escalation per rank."""

    def __init__(self, cat: dict, file_nodes: Sequence[Callable] = ()):
        self.cat = cat
        self.file_nodes = file_nodes
        self.pat_counts: dict[str, dict] = {}
        self.rank_files: dict[int, set[str]] = {}
        self.rank_nodes: dict[int, Evidence] = {}
        self.per_rank: dict[int, dict[str, int]] = {}
        self.first_hit: dict[str, tuple] = {}
        self.last_hit: dict[str, tuple] = {}
        self.rank_first: dict[int, tuple] = {}
        self.rank_last: dict[int, tuple] = {}
        self.retries: dict[int, list[int]] = {}
        self.templates: dict[tuple[str, bytes], _Template] = {}  # by pattern and digit-zeroed line
        self.dropped = 0

    def add(self, f: FileScan, notes: list[str]) -> None:
        if f.error:
            notes.append(f"{f.rel}: {f.error}")
        if f.notes:
            stopped = f"read stopped at byte {f.bytes_read}: {f.error}"
            notes.extend(f"{f.rel}: {n}" for n in f.notes if n != stopped)
        self.dropped += f.dropped_hits
        for r in f.ranks:
            self.rank_files.setdefault(r, set()).add(f.rel)
        self._counts(f)
        self._hits(f)
        self._stated_nodes(f)
        for retried, v in f.retries.items():
            if retried is None:
                continue
            cur = self.retries.setdefault(retried, [0, 0, 0, 0])
            cur[0], cur[1] = max(cur[0], v[0]), max(cur[1], v[1])
            cur[2] += v[2]
            cur[3] += v[3]

    # _counts and _hits run once per count entry and per kept hit of every file (46,000 hits at 4,096 files): the
    # dictionaries they update are bound to locals, and each is looked up once per entry.

    def _counts(self, f: FileScan) -> None:
        rel, pat_counts, per_rank, rank_files = f.rel, self.pat_counts, self.per_rank, self.rank_files
        for (pid, rank), n in f.counts.items():
            pc = pat_counts.get(pid)
            if pc is None:
                pc = pat_counts[pid] = {"count": 0, "files": set(), "ranks": {}, "unranked": 0}
            pc["count"] += n
            pc["files"].add(rel)
            if rank is None:
                pc["unranked"] += n
                continue
            ranks = pc["ranks"]
            ranks[rank] = ranks.get(rank, 0) + n
            mine = per_rank.get(rank)
            if mine is None:
                mine = per_rank[rank] = {}
            mine[pid] = mine.get(pid, 0) + n
            files = rank_files.get(rank)
            if files is None:
                files = rank_files[rank] = set()
            files.add(rel)

    def _hits(self, f: FileScan) -> None:
        """First and last hit per pattern, and per rank over tiers 1-3 (by Stamp.order_key, then file and line);
        the first hit that names a rank's node; per pattern and line template, its ranks and first and last hit."""
        rel, cat, rank_nodes = f.rel, self.cat, self.rank_nodes
        first_hit, last_hit, rank_first, rank_last = self.first_hit, self.last_hit, self.rank_first, self.rank_last
        templates = self.templates
        for h in f.hits:
            key = h.key = order_then_place(h.time, rel, h.line)  # kept on the hit: the rules sort by it too
            kept = (key, h, rel)
            pid, r = h.pattern, h.rank
            _widen(first_hit, last_hit, pid, key, kept)
            tk = (pid, h.text.encode("utf-8", "surrogateescape").translate(ZERO))
            t = templates.get(tk)
            if t is None:
                t = templates[tk] = _Template(kept)
            t.count += 1  # _Template.add, inlined: once per kept hit
            if r is None:
                t.unranked.append(h)
            else:
                t.per_rank[r] = t.per_rank.get(r, 0) + 1
            if key < t.first[0]:
                t.first = kept
            elif key > t.last[0]:
                t.last = kept
            if r is None:
                continue
            p = cat.get(pid)
            if p is not None and p.tier > 0:
                _widen(rank_first, rank_last, r, key, kept)
            if h.node and r not in rank_nodes:
                rank_nodes[r] = to_evidence(h, rel, f.kind)

    def _stated_nodes(self, f: FileScan) -> None:
        """The nodes the file's lines state for ranks (the sources' `file_nodes` steps), by line: the first
        statement per rank is kept."""
        stated = [s for step in self.file_nodes for s in step(f)]
        if len(self.file_nodes) > 1:
            stated.sort(key=lambda s: s[0])  # stable: on one line, the sources in registry order
        rank_nodes = self.rank_nodes
        for _line, r, ev in stated:
            if r not in rank_nodes:
                rank_nodes[r] = ev

    def deduce_last_rank(self, files: list[FileScan], coverage: Coverage, notes: list[str]) -> None:
        """The one unseen rank is the one unmapped local rank (see _deduce_last_rank): its hits move to it."""
        deduced = _deduce_last_rank(files, coverage)
        if deduced is None:
            return
        f, lr, r = deduced
        notes.append(f"{f.rel}: local rank {lr} is deduced to be rank {r}: it is the only local rank in the bundle with "
                     f"no stated global rank, and rank {r} the only rank of the job with no line of its own")
        coverage.seen_ranks = sorted(set(coverage.seen_ranks) | {r})
        coverage.missing_ranks = [x for x in coverage.missing_ranks if x != r]
        self.rank_files.setdefault(r, set()).add(f.rel)
        for h in f.hits:
            if h.rank is None and h.local_rank == lr:
                h.rank = r
                if h.pattern in self.pat_counts:
                    self.pat_counts[h.pattern]["unranked"] -= 1
                    self.pat_counts[h.pattern]["ranks"][r] = self.pat_counts[h.pattern]["ranks"].get(r, 0) + 1
                self.per_rank.setdefault(r, {})[h.pattern] = self.per_rank.get(r, {}).get(h.pattern, 0) + 1
        f.ranks.add(r)
        if lr in f.last_local:
            f.last_lines[r] = f.last_local.pop(lr)

    def pattern_summaries(self, files: list[FileScan], seen: list[int]) -> list[PatternSummary]:
        """Per pattern, with the ranks that alone printed it (a minority) or alone did not (`missing_ranks`)."""
        kind_of = {f.rel: f.kind for f in files}
        groups = self.template_groups(files)
        out: list[PatternSummary] = []
        for pid, pc in self.pat_counts.items():
            p = self.cat[pid]
            ps = PatternSummary(
                id=pid, tier=p.tier, category=p.category, role=p.role, summary=p.summary, count=pc["count"],
                files=len(pc["files"]), rank_counts=dict(sorted(pc["ranks"].items())), unranked=pc["unranked"],
                first=_ev(self.first_hit.get(pid), kind_of), last=_ev(self.last_hit.get(pid), kind_of),
                groups=groups.get(pid, []))
            with_ = set(pc["ranks"])
            if len(seen) >= 2 and with_:
                if len(with_) * 2 < len(seen):
                    ps.only_ranks = sorted(with_)
                elif len(with_) < len(seen):
                    ps.missing_ranks = sorted(set(seen) - with_)
            out.append(ps)
        out.sort(key=lambda s: (s.tier if s.tier else 9, -s.count, s.id))
        return out

    def template_groups(self, files: list[FileScan]) -> dict[str, list[Group]]:
        """Per pattern, its kept hits grouped by line template (tools.groups.template, cached per digit-zeroed
        line: 4,096 ranks' copies of one watchdog line are one template, masked once), the smallest group first:
        a rank whose line differs leads. Built from the kept hits (first and last 5 per pattern and rank): the
        pattern's `count` is the total, a group's the lines kept. Exemplars: the first and the last line, and a
        line of each of the first OUTLIERS ranks whose count differs from the group's usual one."""
        kind_of = {f.rel: f.kind for f in files}
        by_rel = {f.rel: f for f in files}
        merged: dict[tuple[str, str], _Template] = {}
        for (pid, zeroed), t in self.templates.items():  # lines alike but for their digits were counted as one
            t.settle()  # hits that deduce_last_rank attributed since
            tk = (pid, template(zeroed.decode("utf-8", "surrogateescape")))
            if tk in merged:
                merged[tk].merge(t)
            else:
                merged[tk] = t
        out: dict[str, list[Group]] = {}
        for (pid, tmpl), t in merged.items():
            counts = list(t.per_rank.values())
            usual = max(set(counts), key=counts.count) if counts else 0
            odd = sorted(r for r, c in t.per_rank.items() if c != usual) if len(set(counts)) > 1 else []
            exs = [_ev(t.first, kind_of), _ev(t.last, kind_of)]
            exs += [self._line_of(by_rel, kind_of, pid, tmpl, r) for r in odd[:OUTLIERS]]
            g = Group(key=tmpl, ranks=sorted(t.per_rank), count=t.count, unranked=len(t.unranked),
                      first_time=t.first[1].time, last_time=t.last[1].time, outliers=odd,
                      exemplars=list(dict.fromkeys(e for e in exs if e is not None)))
            out.setdefault(pid, []).append(g)
        for gs in out.values():
            gs.sort(key=lambda g: len(g.ranks) or g.count)
        return out

    def _line_of(self, by_rel: dict, kind_of: dict, pid: str, tmpl: str, rank: int) -> Evidence | None:
        """A kept line of `rank` of this pattern and template (an outlier's exemplar): read back from its files."""
        for rel in sorted(self.rank_files.get(rank, ()), key=natural_key):
            for h in by_rel[rel].hits:
                if h.rank == rank and h.pattern == pid and template(h.text) == tmpl:
                    return to_evidence(h, rel, kind_of.get(rel))
        return None

    def rank_summaries(self, files: list[FileScan], seen: list[int]) -> dict[int, RankSummary]:
        kind_of = {f.rel: f.kind for f in files}
        last_lines = _last_lines(files)
        ranks: dict[int, RankSummary] = {}
        for r in sorted(set(seen) | set(self.per_rank)):
            node = self.rank_nodes[r].node if r in self.rank_nodes else None
            files_of = self.rank_files.get(r, ())
            rs = RankSummary(
                rank=r, files=sorted(files_of, key=natural_key) if len(files_of) > 1 else list(files_of),
                nodes=[node] if node else [],
                counts=dict(sorted(self.per_rank.get(r, {}).items())),
                first_match=_ev(self.rank_first.get(r), kind_of), last_match=_ev(self.rank_last.get(r), kind_of),
                last_line=last_lines.get(r))
            if r in self.retries:
                a, m, at1, atmax = self.retries[r]
                rs.retry = {"max_attempt": a, "max_attempts": m, "at_first_attempt": at1, "exhausted": atmax,
                            "state": "exhausted" if atmax else ("recovering" if a <= 1 else "escalating")}
            ranks[r] = rs
        return ranks


OUTLIERS = 3  # per template group: ranks whose count differs, with a line each
# lines alike but for their digits are one template: the merge counts kept hits per digit-zeroed line (one C-level
# translate per hit) and masks each distinct one once at the end (tools.groups.template)
ZERO = bytes.maketrans(b"123456789", b"000000000")


class _Template:
    """One pattern's kept hits of one line template: per rank how many, the first and the last (as _widen keeps
    them), and the hits with no rank yet (deduce_last_rank may give them one after the merge)."""

    __slots__ = ("per_rank", "count", "unranked", "first", "last")

    def __init__(self, kept: tuple):
        self.per_rank: dict[int, int] = {}
        self.count = 0
        self.unranked: list[Hit] = []
        self.first = self.last = kept  # (order key, hit, file) as _widen keeps them; _Merge._hits adds

    def merge(self, o: "_Template") -> None:
        for r, n in o.per_rank.items():
            self.per_rank[r] = self.per_rank.get(r, 0) + n
        self.count += o.count
        self.unranked += o.unranked
        self.first = min(self.first, o.first, key=lambda k: k[0])
        self.last = max(self.last, o.last, key=lambda k: k[0])

    def settle(self) -> None:
        if any(h.rank is not None for h in self.unranked):
            for h in self.unranked:
                if h.rank is not None:
                    self.per_rank[h.rank] = self.per_rank.get(h.rank, 0) + 1
            self.unranked = [h for h in self.unranked if h.rank is None]


def _widen(first: dict, last: dict, k, key: tuple, kept: tuple) -> None:
    """first[k] = kept when `key` is earlier than the one kept there, last[k] = kept when later."""
    cur = first.get(k)
    if cur is None or key < cur[0]:
        first[k] = kept
    cur = last.get(k)
    if cur is None or key > cur[0]:
        last[k] = kept


def _ev(kept: tuple | None, kind_of: dict[str, str]) -> Evidence | None:
    return to_evidence(kept[1], kept[2], kind_of.get(kept[2])) if kept else None


def _world_size(files: list[FileScan], sizes: dict[str, WorldSize]) -> int | None:
    """The world size a log states (the same sources, in the same order of trust, as coverage uses): the largest
    value of the most trusted kind that any hit states."""
    best: tuple[int, int] | None = None  # (trust, value)
    for f in files:
        for h in f.hits:
            ws = sizes.get(h.pattern)
            if ws is None:
                continue
            v = h.fields.get(ws.field)
            if isinstance(v, int) and (best is None or ws.trust < best[0] or ws.trust == best[0] and v > best[1]):
                best = (ws.trust, v)
    return best[1] if best else None


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


def _coverage(files: list[FileScan], rank_files: dict[int, set[str]], skipped: list[dict],
              sizes: dict[str, WorldSize]) -> Coverage:
    best = None  # (trust, -value, evidence, source, value)
    for f in files:
        for h in f.hits:
            ws = sizes.get(h.pattern)
            if ws is None:
                continue
            v = h.fields.get(ws.field)
            if isinstance(v, int) and 0 < v <= MAX_RANKS:  # over the ceiling: noted by the file pass, sizes nothing
                cand = (ws.trust, -v, to_evidence(h, f.rel, f.kind), ws.says, v)
                if best is None or cand[:2] < best[:2]:
                    best = cand
    seen = sorted(rank_files)
    cov = Coverage(seen_ranks=seen, files=len(files),
                   files_without_rank=sum(1 for f in files if not f.ranks and not any(h.rank is not None for h in f.hits)),
                   skipped=skipped, notes=[])
    if best is not None and not (best[0] > 0 and seen and max(seen) + 1 > best[4]):
        cov.expected_ranks, cov.expected_from, cov.expected_evidence = best[4], best[3], [best[2]]
    elif seen:  # no stated world size, and the largest NCCL communicator is smaller than the ranks seen: a subgroup
        cov.expected_ranks, cov.expected_from = max(seen) + 1, "max rank seen"
    if cov.expected_ranks:
        cov.missing_ranks = sorted(set(range(cov.expected_ranks)) - set(seen))
        extra = [r for r in seen if r >= cov.expected_ranks]
        if extra:
            cov.notes.append(f"ranks above the expected world size: {rank_set(extra)}")
    return cov


def _last_lines(files: list[FileScan]) -> dict[int, Evidence]:
    """Where each rank's log stops, over all its files (torchrun's stdout.log and stderr.log, a per-rank file and the
    launcher's prefixed copy). A line with a time beats one without: an undated last line of one file (a banner
    printed at start-up to stdout) says nothing about when it came, while the other file's dated line does.
    Between undated lines, the later file wins."""
    out: dict[int, Evidence] = {}
    for f in files:
        for r, ll in f.last_lines.items():
            if r is None:
                continue
            ev = Evidence(file=f.rel, line=ll.line, text=ll.text, time=ll.time, rank=r, kind=f.kind)
            prev = out.get(r)
            new_k, prev_k = (order_key(ev.time), order_key(prev.time)) if prev is not None else (None, None)
            if prev is None or (new_k is not None and (prev_k is None or new_k > prev_k)) \
                    or (new_k is None and prev_k is None):
                out[r] = ev
    return out


def _silent_first(ranks: dict[int, RankSummary]) -> list[dict]:
    """Ranks whose last timestamped line is well before the others': who stopped talking first."""
    times: dict[int, float] = {}
    stamps: dict[int, Stamp] = {}
    for r, rs in ranks.items():
        t = rs.last_line.time if rs.last_line else None
        secs = t.job_seconds() if t is not None else None
        if t is not None and secs is not None:
            times[r], stamps[r] = secs, t
    if len(times) < 2:
        return []
    from statistics import median  # ~3 ms to import (decimal, fractions): only when two ranks have times
    med = median(times.values())
    out = []
    for r, secs in sorted(times.items(), key=lambda kv: kv[1]):
        gap = med - secs
        if gap >= 60:
            out.append({"rank": r, "last_time": stamps[r].iso(), "seconds_before_median": round(gap, 1),
                        "last_line": ranks[r].last_line})
    return out

