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
        """`debugger scan --json`: the summaries, and per file its counts by pattern (not every kept hit)."""
        files = [{"file": f.rel, "kind": f.kind, "bytes": f.bytes_read, "lines": f.lines, "ranks": sorted(f.ranks),
                  "nodes": sorted(f.nodes), "counts": _file_counts(f), "last_lines": f.last_lines,
                  "first_time": f.first_time, "error": f.error, "notes": f.notes} for f in self.files]
        return to_jsonable({"root": self.root, "engine": self.engine, "seconds": round(self.seconds, 3),
                            "bytes": self.bytes, "lines": self.lines, "coverage": self.coverage,
                            "patterns": self.patterns, "ranks": self.ranks, "rank_nodes": self.rank_nodes,
                            "silent_first": self.silent_first, "files": files, "notes": self.notes})


def _file_counts(f: FileScan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (pid, _rank), n in f.counts.items():
        counts[pid] = counts.get(pid, 0) + n
    return dict(sorted(counts.items()))


def to_evidence(h: Hit, rel: str, kind: str | None = None) -> Evidence:
    return Evidence(file=rel, line=h.line, text=h.text, offset=h.offset, time=h.time, rank=h.rank,
                    node=h.node, kind=kind)
