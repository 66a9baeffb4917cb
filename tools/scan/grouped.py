"""The scan in groups (issue 28, schema_version 2): ranks that behaved alike are one group, files alike are one
group, and a rank or a file that differs stands out as its own.

Why: in an at-scale failure every rank ends in the same watchdog cascade. One JSON entry per rank and per file made
the 4,096-rank scan 17 MB that nobody reads, and the one rank whose log differs was entry 901 of 4,096. Here:

- a rank's PROFILE is what it printed and where it stopped: its count per pattern, the template of its last line
  (tools.groups.template: numbers and names masked) and its retry state. Ranks of one profile are one group, with
  the first and the last rank's first match, last match and last line as proof (`file:line` and raw text).
- a file's profile is its kind, its counts per pattern, the template of its read error and of its notes, and how
  many ranks it holds. A file that could not be read, or has a note, is never hidden in a group of good files.

Order: the SMALLEST groups first, so a rank that differs comes before the 4,095 that do not; among groups of one
size, those that differ from the largest group only in job facts (tier 0: rank 0 alone prints the world size) come
after the others, then by first rank. A file group with an error or a note comes before any without, then the
smallest, then bundle order. When there are more groups than a
report can hold (MAX_GROUPS: a job whose ranks all differ has nothing to group), the smallest and the largest are
kept and the rest is said as a count and a rank set, never dropped silently.

Everything here reads the ScanResult as it is (its per-rank summaries stay the model's input); only the JSON and
the text views are grouped. `--per-rank` (tools.groups.per_rank) adds the per-rank listing back beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.groups import Grouper, rank_set, template
from trainlog_debugger.tools.lines.timestamps import Stamp, order_key

if TYPE_CHECKING:
    from trainlog_debugger.tools.scan.result import FileScan, RankSummary, ScanResult

MAX_GROUPS = 48      # rank groups and file groups each, in the JSON and the text
KEEP_LARGEST = 8     # of them, when cut: the largest groups (the rest are the smallest: the ranks that differ)


@dataclass
class RankGroup:
    """Ranks of one profile. `first` and `last`: the RankSummary of the group's lowest and highest rank."""

    ranks: list[int]
    counts: dict[str, int]
    last_template: str | None
    retry: str | None
    first: RankSummary
    last: RankSummary
    first_time: Stamp | None = None      # the earliest first match of any rank of the group
    last_time: Stamp | None = None       # the latest last line of any rank of the group
    outliers: list[int] = field(default_factory=list)  # ranks of the group that went silent first

    def to_json(self) -> dict:
        d: dict[str, Any] = {"ranks": rank_set(self.ranks), "rank_count": len(self.ranks), "counts": self.counts,
                             "last_line_template": self.last_template}
        if self.retry:
            d["retry"] = self.retry
        d["first_time"] = _iso(self.first_time)
        d["last_time"] = _iso(self.last_time)
        if self.outliers:
            d["outliers"] = rank_set(self.outliers)
        d["exemplars"] = [_rank_exemplar(rs) for rs in _distinct(self.first, self.last)]
        return d


@dataclass
class FileGroup:
    """Files of one profile. `names`: the first and the last file (bundle order); `error`/`notes`: the first
    file's own text (the group shares their templates)."""

    kind: str
    ranks_per_file: int
    counts: dict[str, int]
    error: str | None
    notes: list[str]
    files: int = 0
    bytes: int = 0
    lines: int = 0
    ranks: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    names: list[str] = field(default_factory=list)
    first_time: Stamp | None = None     # the earliest first timestamp of any file of the group
    order: int = 0

    @property
    def stands_out(self) -> bool:
        return bool(self.error or self.notes)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "files": self.files, "bytes": self.bytes, "lines": self.lines,
                             "ranks": rank_set(self.ranks), "rank_count": len(self.ranks),
                             "ranks_per_file": self.ranks_per_file, "node_count": len(self.nodes),
                             "counts": self.counts, "first_time": _iso(self.first_time)}
        if self.error:
            d["error"] = self.error
        if self.notes:
            d["notes"] = self.notes
        d["exemplars"] = self.names
        return d


def _iso(t: Stamp | None) -> str | None:
    return t.iso() if t is not None else None


def _distinct(a, b) -> list:
    return [a] if a is b else [a, b]


def _rank_exemplar(rs: RankSummary) -> dict:
    d: dict[str, Any] = {"rank": rs.rank, "files": rs.files[:4]}
    if len(rs.files) > 4:
        d["file_count"] = len(rs.files)
    if rs.nodes:
        d["nodes"] = rs.nodes
    for k in ("first_match", "last_match", "last_line"):
        ev = getattr(rs, k)
        if ev is not None:
            d[k] = ev.to_json()
    return d


def _earlier(a: Stamp | None, b: Stamp | None) -> bool:
    """b is earlier than a (dated stamps of one job; an undated one never wins over a dated one)."""
    kb = order_key(b)
    if kb is None:
        return a is None and b is not None
    ka = order_key(a)
    return ka is None or kb < ka


def rank_groups(res: ScanResult) -> list[RankGroup]:
    """Every rank of the scan in exactly one group (see the module docstring for the profile and the order)."""
    silent = {s["rank"] for s in res.silent_first}
    by: dict[tuple, RankGroup] = {}
    for r, rs in res.ranks.items():  # in rank order (tools.scan.summary)
        ll = template(rs.last_line.text) if rs.last_line is not None else None
        retry = rs.retry["state"] if rs.retry else None
        key = (tuple(rs.counts.items()), ll, retry)
        g = by.get(key)
        if g is None:
            g = by[key] = RankGroup(ranks=[], counts=rs.counts, last_template=ll, retry=retry, first=rs, last=rs)
        g.ranks.append(r)
        g.last = rs
        if r in silent:
            g.outliers.append(r)
        t = rs.first_match.time if rs.first_match is not None else None
        if _earlier(g.first_time, t):
            g.first_time = t
        t = rs.last_line.time if rs.last_line is not None else None
        if t is not None and (g.last_time is None or _earlier(t, g.last_time)):
            g.last_time = t
    groups = list(by.values())
    if not groups:
        return groups
    usual = max(groups, key=lambda g: len(g.ranks))
    facts = {p.id for p in res.patterns if p.tier == 0}
    return sorted(groups, key=lambda g: (len(g.ranks), _only_facts_differ(g, usual, facts), g.ranks[0]))


def _only_facts_differ(g: RankGroup, usual: RankGroup, facts: set[str]) -> bool:
    """The group differs from the usual one only in job facts (tier 0: rank 0 prints the world size and NCCL's
    version): among groups of one size it comes after those that printed, or stopped at, something else."""
    if g is usual or g.last_template != usual.last_template or g.retry != usual.retry:
        return False
    return all(g.counts.get(pid) == usual.counts.get(pid) for pid in set(g.counts) | set(usual.counts)
               if pid not in facts)


def _profile_text(s: str | None) -> str | None:
    return template(s) if s else None


def file_groups(files: list[FileScan]) -> list[FileGroup]:
    """Every file in exactly one group: those with an error or a note first, then the smallest groups."""
    from trainlog_debugger.tools.scan.result import file_counts
    by: dict[tuple, FileGroup] = {}
    for f in files:
        counts = file_counts(f)
        key = (f.kind, tuple(counts.items()), _profile_text(f.error), tuple(template(n) for n in f.notes),
               len(f.ranks))
        g = by.get(key)
        if g is None:
            g = by[key] = FileGroup(kind=f.kind, ranks_per_file=len(f.ranks), counts=counts, error=f.error,
                                    notes=list(f.notes), order=len(by))
            g.names.append(f.rel)
        elif len(g.names) == 1:
            g.names.append(f.rel)
        else:
            g.names[-1] = f.rel
        g.files += 1
        g.bytes += f.bytes_read
        g.lines += f.lines
        g.ranks |= f.ranks
        g.nodes |= f.nodes
        if _earlier(g.first_time, f.first_time):
            g.first_time = f.first_time
    return sorted(by.values(), key=lambda g: (not g.stands_out, g.files, g.order))


def cut(groups: list, size, most: int = MAX_GROUPS, largest_kept: int = KEEP_LARGEST) -> tuple[list, list]:
    """(kept, cut): at most `most`, the first ones (the smallest, the ones that stand out) and the
    `largest_kept` largest; the order kept."""
    if len(groups) <= most:
        return groups, []
    largest = set(map(id, sorted(groups, key=size, reverse=True)[:largest_kept]))
    head = [g for g in groups if id(g) not in largest][:most - largest_kept]
    keep = set(map(id, head)) | largest
    return [g for g in groups if id(g) in keep], [g for g in groups if id(g) not in keep]


def node_groups(rank_nodes: dict[int, Evidence]) -> tuple[dict[str, str], list[dict]]:
    """{node: its ranks as a range set} (nodes in natural order), and the lines that stated them, one group per
    template with its exemplars (a launcher's line and NCCL's are two groups, 4,096 copies of one line are one)."""
    from trainlog_debugger.tools.bundle.source import natural_key
    nodes: dict[str, list[int]] = {}
    g = Grouper()
    for r, ev in rank_nodes.items():
        nodes.setdefault(ev.node or "?", []).append(r)
        g.add(template(ev.text), r, ev)
    by_name = {n: rank_set(rs) for n, rs in sorted(nodes.items(), key=lambda kv: natural_key(kv[0]))}
    return by_name, [x.to_json() for x in g.groups()]
