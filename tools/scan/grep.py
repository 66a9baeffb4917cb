"""`debugger grep`: one user regex over every rank, its matching lines grouped by template across ranks
(tools.groups), with the ranks that have NO match.

Why the absent ranks matter: "511 ranks logged the barrier, rank 17 did not" is often the answer. The grep runs
through the same one-pass file scanner as `debugger scan` (same rank attribution, same line numbering, same
caps), with a one-pattern engine built on Python `re` so that the user's regex means what Python says it means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trainlog_debugger.tools.groups import SCHEMA_VERSION, Group, Grouper, per_rank, rank_set, template
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.sources.pattern import Pattern
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.scan.result import to_evidence


class RegexEngine:
    name = "re"

    def __init__(self, pattern: Pattern, flags: int = 0):
        self.patterns = [pattern]
        self.rx = re.compile(pattern.trigger.encode(), flags | re.MULTILINE)

    def candidates(self, buf: bytes) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        rfind, find = buf.rfind, buf.find
        pos, n = 0, len(buf)
        while pos <= n:
            m = self.rx.search(buf, pos)
            if not m:
                break
            start = rfind(b"\n", 0, m.start()) + 1
            out.add((start, 0))
            end = find(b"\n", m.end() if m.end() > m.start() else m.start())
            if end == -1:
                break
            pos = end + 1
        return out


@dataclass
class RankMatches:
    rank: int
    count: int
    first: Evidence | None
    last: Evidence | None
    lines: list[Evidence] = field(default_factory=list)


@dataclass
class GrepResult:
    pattern: str
    root: str
    total: int
    files_with_matches: int
    ranks: list[RankMatches]
    ranks_without_match: list[int]
    unranked: list[Evidence]
    unranked_count: int
    seen_ranks: int
    expected_ranks: int | None
    missing_ranks: list[int]
    notes: list[str]
    groups: list[Group] = field(default_factory=list)   # the matching lines by template across ranks
    grouped_lines: int = 0                               # lines in the groups (the kept hits; `total` counts all)

    def to_json(self) -> dict:
        """`debugger grep --json`, schema_version 2: the matching lines grouped by template across ranks (each with
        its ranks as a range set, count, first/last time and exemplars), the ranks with and without a match as
        range sets. The per-rank listing (`ranks`: every matching line of every rank, 12 MB at 4,096 ranks) only
        under tools.groups.per_rank() (`--per-rank`), unchanged."""
        from trainlog_debugger.tools.jsonable import to_jsonable
        with_match = [rm.rank for rm in self.ranks]
        d = {"schema_version": SCHEMA_VERSION, "pattern": self.pattern, "root": self.root, "total": self.total,
             "files_with_matches": self.files_with_matches, "grouped_lines": self.grouped_lines,
             "group_count": len(self.groups), "groups": [g.to_json() for g in self.groups[:MAX_GROUPS]],
             "ranks_with_match": rank_set(with_match), "ranks_with_match_count": len(with_match),
             "ranks_without_match": rank_set(self.ranks_without_match),
             "ranks_without_match_count": len(self.ranks_without_match),
             "unranked": to_jsonable(self.unranked[:MAX_UNRANKED]), "unranked_count": self.unranked_count,
             "seen_ranks": self.seen_ranks, "expected_ranks": self.expected_ranks,
             "missing_ranks": rank_set(self.missing_ranks), "missing_count": len(self.missing_ranks),
             "notes": self.notes}
        if per_rank():
            d["ranks"] = to_jsonable(self.ranks)
            d["unranked"] = to_jsonable(self.unranked)
        return d


MAX_GROUPS = 50       # templates in the JSON (`group_count` says how many there are)
MAX_UNRANKED = 10     # lines with no rank in the JSON (`unranked_count` says how many there are)


def grep_bundle(bundle, pattern: str, *, ignore_case: bool = False, workers: int | None = None) -> GrepResult:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None
    flags = re.IGNORECASE if ignore_case else 0
    trigger = f"(?i:{pattern})" if ignore_case else pattern
    p = Pattern("grep", 0, None, "context", trigger, (), "", f"lines matching {pattern}")
    res = scan_bundle(bundle, workers=workers, engine=RegexEngine(p, flags), pats=[p])
    by_rank: dict[int, list[Evidence]] = {}
    unranked: list[Evidence] = []
    grouper = Grouper()
    for f in res.files:
        for h in f.hits:
            ev = to_evidence(h, f.rel, f.kind)
            (by_rank.setdefault(h.rank, []) if h.rank is not None else unranked).append(ev)
            grouper.add(template(ev.text), h.rank, ev)
    summary = next((s for s in res.patterns if s.id == "grep"), None)
    counts = summary.rank_counts if summary else {}
    ranks = []
    for r in sorted(counts):
        evs = sorted(by_rank.get(r, []), key=lambda e: (e.file, e.line))
        ranks.append(RankMatches(rank=r, count=counts[r], first=evs[0] if evs else None,
                                 last=evs[-1] if evs else None, lines=evs))
    seen = res.coverage.seen_ranks
    groups = grouper.groups()
    return GrepResult(
        pattern=pattern, root=res.root, total=summary.count if summary else 0,
        files_with_matches=summary.files if summary else 0, ranks=ranks,
        ranks_without_match=sorted(set(seen) - set(counts)), unranked=unranked,
        unranked_count=summary.unranked if summary else 0, seen_ranks=len(seen),
        expected_ranks=res.coverage.expected_ranks, missing_ranks=res.coverage.missing_ranks, notes=res.notes,
        groups=groups, grouped_lines=sum(g.count for g in groups))

