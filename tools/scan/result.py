"""What the scan produces, at the bottom of the scan package so that rules, analyses and renderers can read a
scan without importing the scanner (its engines, workers and bundle I/O).

Per file (FileScan): the kept hits (Hit: pattern, line, offset, verbatim text, rank/node attribution, Stamp,
extracted fields), counts per (pattern, rank), the last line of each rank, retry escalation. Per bundle
(ScanResult): per-pattern summaries (first/last hit, ranks with and without it), per-rank summaries, coverage.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from trainlog_debugger.tools.evidence import Coverage, Evidence
from trainlog_debugger.tools.groups import SCHEMA_VERSION, Group, per_rank, rank_set
from trainlog_debugger.tools.jsonable import to_jsonable
from trainlog_debugger.tools.lines.timestamps import Stamp

if TYPE_CHECKING:  # pydantic is imported only when a diagnosis asks for findings
    from trainlog_debugger.tools.model import Finding


INPUT_NOTE_MARKS = ("implausible claim", "shown truncated", "carriage return only", "are read as UTC",
                    # the bundle's own (tools/bundle/open.py): a budget that stopped extraction, files not read whole
                    "extraction stopped", "extraction cap", "files budget", "still growing", "partial", "replaced by",
                    "tar stops")


@dataclass
class Hit:
    pattern: str
    line: int
    offset: int
    text: str
    rank: int | None = None
    local_rank: int | None = None
    node: str | None = None
    time: Stamp | None = None
    fields: dict = field(default_factory=dict)
    # its sort key in the bundle (order_then_place(time, file, line)), set by the merge that computes it anyway
    # (tools.scan.summary), read by the rules' time-ordered views (tools.rules.base): not pickled, not compared
    key: tuple | None = field(default=None, compare=False, repr=False, metadata={"pickled": False})

    def __reduce__(self):
        """Pickled as the constructor's arguments (workers send every kept hit to the parent): a fifth cheaper to
        read back than the default's state dict."""
        return type(self), (self.pattern, self.line, self.offset, self.text, self.rank, self.local_rank, self.node,
                            self.time, self.fields)


@dataclass
class LastLine:
    line: int
    text: str
    time: Stamp | None = None
    time_line: int | None = None


@dataclass
class FileScan:
    rel: str
    kind: str
    size: int
    bytes_read: int = 0
    lines: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    hint: dict = field(default_factory=dict)
    ranks: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    hits: list[Hit] = field(default_factory=list)
    counts: dict[tuple[str, int | None], int] = field(default_factory=dict)
    dropped_hits: int = 0
    first_time: Stamp | None = None
    first_time_line: int | None = None
    last_lines: dict[int | None, LastLine] = field(default_factory=dict)
    retries: dict[int | None, list[int]] = field(default_factory=dict)  # rank → [max attempt, M, n at 1/M, n at M/M]
    local_to_rank: dict[int, int] = field(default_factory=dict)  # stated by lines like `[default1]:[rank5]:`
    last_local: dict[int, LastLine] = field(default_factory=dict)  # last lines of local ranks with no known rank

    def reattribute(self, h: Hit, rank: int, own_line: bool = True) -> None:
        """Give one kept hit of this file, scanned with no rank, the rank a source's scan step states for it
        (torchrun's failure report, a Ray worker's own set-up line), its count moving with it. `own_line` False
        for a report about that rank printed by someone else (the launcher's, the Ray driver's): the line belongs
        to the rank's story, but this file is not the rank's own output."""
        h.rank = rank
        key = (h.pattern, None)
        if self.counts.get(key):
            self.counts[key] -= 1
            if not self.counts[key]:
                del self.counts[key]
            self.counts[(h.pattern, rank)] = self.counts.get((h.pattern, rank), 0) + 1
        if own_line:
            self.ranks.add(rank)


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
    groups: list[Group] = field(default_factory=list)  # its kept hits by line template (tools.scan.summary)


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
    """The whole bundle's scan (a tools.model.Report)."""

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

    def findings(self) -> list[Finding]:
        """One Finding per pattern that matched: its first and last line, the ranks that printed it."""
        from trainlog_debugger.tools.model import Finding, Role  # pydantic: for the diagnosis, not for a scan
        out = []
        for p in self.patterns:
            evs = [e for e in (p.first, p.last) if e is not None]
            if evs and evs[-1] == evs[0]:
                evs = evs[:1]
            if evs:
                out.append(Finding(id=p.id, summary=p.summary, role=Role(p.role), category=p.category, tier=p.tier,
                                   ranks=list(p.rank_counts), count=p.count, evidence=evs))
        return out

    def input_notes(self, cap: int = 8) -> list[str]:
        """The notes about the input itself, not the job: numbers too large to be true (ignored for sizing, each
        with its line), lines matched in pieces, CR-only line ends. At most `cap`, then how many more."""
        out = [n for n in self.notes if any(m in n for m in INPUT_NOTE_MARKS)]
        return out[:cap] + ([f"{len(out) - cap} more such note(s) in `debugger scan`"] if len(out) > cap else [])

    def without_hits(self) -> "ScanResult":
        """A shallow copy whose files carry no kept hits: what `debugger scan` shows (the summaries, and per file its
        counts, last lines and notes; `to_json` and the text renderer read no kept hit). Why: the report goes
        through redaction (agent/render.shown) before it is shown, and walking every kept hit of 4,096 files took
        longer than the scan itself, for text nobody prints."""
        return replace(self, files=[replace(f, hits=[]) for f in self.files])

    def to_json(self) -> dict:
        """`debugger scan --json`, schema_version 2: per pattern its ranks as range sets and its lines by template;
        the ranks and the files in groups (tools.scan.grouped); the nodes as {node: ranks}. Bounded in the number
        of ranks: no list per rank, only range-set strings. `--per-rank` (tools.groups.per_rank) adds today's
        per-rank keys beside them, unchanged: `ranks`, `files`, `rank_nodes`, each pattern's `rank_counts`, and
        every silent rank."""
        from trainlog_debugger.tools.scan import grouped as G
        full = per_rank()
        rgs, rcut = G.cut(G.rank_groups(self), lambda g: len(g.ranks))
        fgs, fcut = G.cut(G.file_groups(self.files), lambda g: g.files)
        nodes, node_lines = G.node_groups(self.rank_nodes)
        out: dict = {"schema_version": SCHEMA_VERSION, "root": self.root, "engine": self.engine,
                     "seconds": round(self.seconds, 3), "bytes": self.bytes, "lines": self.lines,
                     "coverage": self.coverage, "patterns": [_pattern_json(p, full) for p in self.patterns],
                     "rank_groups": [g.to_json() for g in rgs]}
        if rcut:
            out["rank_groups_cut"] = {"groups": len(rcut), "ranks": rank_set(r for g in rcut for r in g.ranks),
                                      "rank_count": sum(len(g.ranks) for g in rcut)}
        out["file_groups"] = [g.to_json() for g in fgs]
        if fcut:
            out["file_groups_cut"] = {"groups": len(fcut), "files": sum(g.files for g in fcut)}
        out["nodes"] = nodes
        out["node_lines"] = node_lines
        silent = self.silent_first if full else self.silent_first[:SILENT_SHOWN]
        out["silent_first"] = silent
        if len(silent) < len(self.silent_first):
            out["silent_first_ranks"] = rank_set(s["rank"] for s in self.silent_first)
            out["silent_first_count"] = len(self.silent_first)
        out["notes"] = self.notes
        if full:
            files = [{"file": f.rel, "kind": f.kind, "bytes": f.bytes_read, "lines": f.lines,
                      "ranks": sorted(f.ranks), "nodes": sorted(f.nodes), "counts": file_counts(f),
                      "last_lines": f.last_lines, "first_time": f.first_time, "error": f.error, "notes": f.notes}
                     for f in self.files]
            out.update({"ranks": self.ranks, "rank_nodes": self.rank_nodes, "files": files})
        return to_jsonable(out)


SILENT_SHOWN = 20   # silent-first ranks listed in the JSON (all of them with --per-rank; their rank set always)
TEMPLATE_GROUPS = 12  # line-template groups per pattern in the JSON (the smallest, and the 4 largest)


def _pattern_json(p: PatternSummary, full: bool) -> dict:
    """One pattern: its ranks as a range set and a histogram (`ranks_by_count`: how many lines → which ranks
    printed that many, exact: {"3": "0-4095"}), its minority or missing ranks, its lines by template."""
    from trainlog_debugger.tools.scan.grouped import cut
    hist: dict[int, list[int]] = {}
    for r, n in p.rank_counts.items():
        hist.setdefault(n, []).append(r)
    d: dict = {"id": p.id, "tier": p.tier, "category": p.category, "role": p.role, "summary": p.summary,
               "count": p.count, "files": p.files, "ranks": rank_set(p.rank_counts), "rank_count": len(p.rank_counts),
               "unranked": p.unranked, "ranks_by_count": {str(n): rank_set(rs) for n, rs in sorted(hist.items())},
               "first": p.first, "last": p.last,
               "only_ranks": rank_set(p.only_ranks), "only_rank_count": len(p.only_ranks),
               "missing_ranks": rank_set(p.missing_ranks), "missing_rank_count": len(p.missing_ranks)}
    kept, dropped = cut(p.groups, lambda g: len(g.ranks) or g.count, TEMPLATE_GROUPS, 4)
    d["groups"] = [g.to_json() for g in kept]
    if dropped:
        d["groups_cut"] = {"groups": len(dropped), "lines": sum(g.count for g in dropped),
                           "ranks": rank_set(r for g in dropped for r in g.ranks)}
    if full:
        d["rank_counts"] = p.rank_counts
    return d


def file_counts(f: FileScan) -> dict[str, int]:
    """A file's hits per pattern (over its ranks), by pattern id."""
    counts: dict[str, int] = {}
    for (pid, _rank), n in f.counts.items():
        counts[pid] = counts.get(pid, 0) + n
    return dict(sorted(counts.items()))


def to_evidence(h: Hit, rel: str, kind: str | None = None) -> Evidence:
    return Evidence(file=rel, line=h.line, text=h.text, offset=h.offset, time=h.time, rank=h.rank,
                    node=h.node, kind=kind)
