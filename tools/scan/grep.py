"""`debugger grep`: one user regex over every rank, grouped by rank, with the ranks that have NO match.

Why the absent ranks matter: "511 ranks logged the barrier, rank 17 did not" is often the answer. The grep runs
through the same one-pass file scanner as `debugger scan` (same rank attribution, same line numbering, same
caps), with a one-pattern engine built on Python `re` so that the user's regex means what Python says it means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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

    def to_json(self) -> dict:
        """`debugger grep --json`: every field as plain JSON, the view the agent's grep tool reads."""
        from trainlog_debugger.tools.jsonable import fields_jsonable
        return fields_jsonable(self)


def grep_bundle(bundle, pattern: str, *, ignore_case: bool = False, workers: int | None = None) -> GrepResult:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None
    flags = re.IGNORECASE if ignore_case else 0
    trigger = f"(?i:{pattern})" if ignore_case else pattern
    p = Pattern("grep", 0, None, "context", trigger, (), "", f"lines matching {pattern}")
    res = scan_bundle(bundle, workers=workers, engine=RegexEngine(p, flags), pats=[p])
    per_rank: dict[int, list[Evidence]] = {}
    unranked: list[Evidence] = []
    for f in res.files:
        for h in f.hits:
            ev = to_evidence(h, f.rel, f.kind)
            (per_rank.setdefault(h.rank, []) if h.rank is not None else unranked).append(ev)
    summary = next((s for s in res.patterns if s.id == "grep"), None)
    counts = summary.rank_counts if summary else {}
    ranks = []
    for r in sorted(counts):
        evs = sorted(per_rank.get(r, []), key=lambda e: (e.file, e.line))
        ranks.append(RankMatches(rank=r, count=counts[r], first=evs[0] if evs else None,
                                 last=evs[-1] if evs else None, lines=evs))
    seen = res.coverage.seen_ranks
    return GrepResult(
        pattern=pattern, root=res.root, total=summary.count if summary else 0,
        files_with_matches=summary.files if summary else 0, ranks=ranks,
        ranks_without_match=sorted(set(seen) - set(counts)), unranked=unranked,
        unranked_count=summary.unranked if summary else 0, seen_ranks=len(seen),
        expected_ranks=res.coverage.expected_ranks, missing_ranks=res.coverage.missing_ranks, notes=res.notes)
