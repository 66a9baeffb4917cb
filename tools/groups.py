"""Evidence that many ranks share, as one group: a line template, the ranks that printed it as a range set, the first
and last time, a count, and a few exemplars with `file:line` and raw text.

Why (issue 28): in an at-scale failure every rank ends in the same watchdog cascade. One entry per rank per line made
a 4,096-rank scan report 17 MB of JSON that no person reads and no model can be given, and it hid the one rank that
differs among 4,095 that do not. A group says what 4,095 ranks printed once, with its proof (the first and the last
exemplar, the outliers, always the culprit's), and a rank that differs stands out as its own group.

What a group is keyed on is the caller's choice: a line template (tools.rankdiff.mask: numbers and names masked, as
the rank diff does) for lines; a profile (the counts per pattern of a rank, its last line's template) for ranks.
`Grouper` collects streaming, one `add` per member, so a caller never builds a per-rank list it does not keep.

The range-set text is the public form of a rank list in every JSON document of schema_version 2 and in the text
reports: `0-4095 except 1365`, `0-3,7`, `-` for none. `parse_rank_set` reads it back (bounded: tools.ranks).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.lines.timestamps import Stamp
from trainlog_debugger.tools.lines.memo import remember
from trainlog_debugger.tools.ranks import parse_ranges

# The version of the public JSON of `ask --json` and `scan --json` (and of every report's `--json`). 2: evidence
# that many ranks share is grouped (rank lists are range-set strings; per-rank listings only with --per-rank).
SCHEMA_VERSION = 2
EXEMPLARS = 2      # per group: the first and the last member (then outliers and the focus ranks)
OUTLIERS = 3       # per group: members whose count differs from the group's usual count

_PER_RANK: ContextVar[bool] = ContextVar("per_rank", default=False)


def per_rank() -> bool:
    """Whether the JSON being written also lists every rank (`--per-rank`): each report's `to_json` asks. Why a
    context variable and not an argument: a report's JSON is written by one walk (tools.jsonable) that calls the
    `to_json` of every report and evidence nested in it; the CLI sets it around that walk, and a thread of the
    Slack bot that writes another report is not affected."""
    return _PER_RANK.get()


@contextmanager
def per_rank_listing(on: bool = True) -> Iterator[None]:
    """Within this block, reports' JSON keeps today's full per-rank listing beside the groups (`--per-rank`)."""
    token = _PER_RANK.set(on)
    try:
        yield
    finally:
        _PER_RANK.reset(token)


def runs(rs: list[int]) -> list[tuple[int, int]]:
    """Sorted unique ints as (start, end) runs."""
    out: list[tuple[int, int]] = []
    for r in rs:
        if out and r == out[-1][1] + 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


def _runs_text(runs: list[tuple[int, int]]) -> str:
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def rank_set(ranks: Iterable[int]) -> str:
    """A rank list as exact text: `0-3,7`, or `0-4095 except 1365` when the holes are at most an eighth of the
    span (the way a person says "all but"); `-` for none. Exact, never cut (a text report cuts with tools.ranks.ranks_str)."""
    rs = sorted({r for r in ranks if isinstance(r, int)})
    if not rs:
        return "-"
    got = runs(rs)
    span = rs[-1] - rs[0] + 1
    if len(got) > 1 and (span - len(rs)) * 8 <= span:  # a few holes in a long span: name the holes
        have = set(rs)
        return f"{rs[0]}-{rs[-1]} except {_runs_text(runs([r for r in range(rs[0], rs[-1] + 1) if r not in have]))}"
    return _runs_text(got)


def parse_rank_set(text: str, limit: int = 100_000) -> list[int]:
    """`rank_set`'s text back to ranks (`0-4095 except 1365` → 4,095 ranks); malformed parts are ignored and the
    result holds at most `limit` ranks (tools.ranks.parse_ranges' bounds)."""
    t = (text or "").strip()
    if not t or t == "-":
        return []
    keep, _sep, drop = t.partition(" except ")
    out = parse_ranges(keep, limit)
    if drop:
        gone = set(parse_ranges(drop, limit))
        out = [r for r in out if r not in gone]
    return out


def _later(a: Stamp | None, b: Stamp | None) -> bool:
    """b is later than a (stamps of one source; an unknown time is never later)."""
    return b is not None and (a is None or b.sort_key() > a.sort_key())


@dataclass
class Group:
    """One line template (or rank profile) and every rank that printed it. `exemplars` are real lines: the first
    and the last member, the outliers (a count unlike the group's), and the caller's focus ranks (the culprit)."""

    key: str
    ranks: list[int]
    count: int = 0               # lines (or members) in the group
    unranked: int = 0            # of them, lines with no rank
    first_time: Stamp | None = None
    last_time: Stamp | None = None
    exemplars: list[Evidence] = field(default_factory=list)
    pattern: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)   # what every member shares (the caller's)
    outliers: list[int] = field(default_factory=list)     # ranks whose count differs from the group's usual one

    def to_json(self) -> dict:
        d: dict[str, Any] = {"template": self.key}
        if self.pattern is not None:
            d["pattern"] = self.pattern
        d.update({"ranks": rank_set(self.ranks), "rank_count": len(self.ranks), "count": self.count})
        if self.unranked:
            d["unranked"] = self.unranked
        d["first_time"] = self.first_time.iso() if self.first_time is not None else None
        d["last_time"] = self.last_time.iso() if self.last_time is not None else None
        if self.facts:
            d["facts"] = self.facts
        if self.outliers:
            d["outliers"] = rank_set(self.outliers)
        d["exemplars"] = [e.to_json() for e in self.exemplars]
        return d

    def cites(self) -> list[str]:
        return [e.cite() for e in self.exemplars]


class _Acc:
    __slots__ = ("ranks", "per_rank", "count", "unranked", "first", "last", "first_ev", "last_ev", "focus", "order",
                 "pattern")

    def __init__(self, order: int, pattern: str | None):
        self.ranks: set[int] = set()
        self.per_rank: dict[int, int] = {}
        self.count = 0
        self.unranked = 0
        self.first: Stamp | None = None
        self.last: Stamp | None = None
        self.first_ev: Evidence | None = None
        self.last_ev: Evidence | None = None
        self.focus: dict[int, Evidence] = {}
        self.order = order
        self.pattern = pattern


class Grouper:
    """Streaming groups: `add(key, rank, evidence, n)` per member; `groups()` at the end. Bounded per group: a rank
    set, a count per rank (for the outliers), two exemplars and the focus ranks' own."""

    def __init__(self, focus: Iterable[int] = ()):
        self.focus = {r for r in focus if isinstance(r, int)}
        self._acc: dict[Hashable, _Acc] = {}
        self._ev_of: dict[tuple[Hashable, int], Evidence] = {}   # one line per (group, outlier candidate) is enough

    def add(self, key: Hashable, rank: int | None, ev: Evidence | None = None, n: int = 1, *,
            time: Stamp | None = None, pattern: str | None = None) -> None:
        a = self._acc.get(key)
        if a is None:
            a = self._acc[key] = _Acc(len(self._acc), pattern)
        a.count += n
        t = time if time is not None else (ev.time if ev is not None else None)
        if rank is None:
            a.unranked += n
        else:
            a.ranks.add(rank)
            a.per_rank[rank] = a.per_rank.get(rank, 0) + n
            if ev is not None and rank in self.focus and rank not in a.focus:
                a.focus[rank] = ev
            if ev is not None and (key, rank) not in self._ev_of:
                self._ev_of[(key, rank)] = ev
        if t is not None:
            if a.first is None or t.sort_key() < a.first.sort_key():
                a.first = t
                if ev is not None:
                    a.first_ev = ev
            if _later(a.last, t) or a.last is None:
                a.last = t
                if ev is not None:
                    a.last_ev = ev
        if ev is not None:
            if a.first_ev is None:
                a.first_ev = ev
            if t is None and (a.last_ev is None or a.last is None):
                a.last_ev = ev

    def groups(self, key_text: Callable[[Hashable], str] = str) -> list[Group]:
        """Groups in the order their first member came; each with its exemplars (first, last, outliers, focus)."""
        out = []
        for key, a in sorted(self._acc.items(), key=lambda kv: kv[1].order):
            counts = list(a.per_rank.values())
            usual = max(set(counts), key=counts.count) if counts else 0
            odd = sorted(r for r, c in a.per_rank.items() if c != usual) if len(set(counts)) > 1 else []
            exs: list[Evidence] = []
            for ev in [a.first_ev, a.last_ev] + [self._ev_of.get((key, r)) for r in odd[:OUTLIERS]] + list(
                    a.focus.values()):
                if ev is not None and ev not in exs:
                    exs.append(ev)
            out.append(Group(key=key_text(key), ranks=sorted(a.ranks), count=a.count, unranked=a.unranked,
                             first_time=a.first, last_time=a.last, exemplars=exs, pattern=a.pattern, outliers=odd))
        self._ev_of.clear()
        return out


_TEMPLATES: dict[bytes, str] = {}
_ZERO = bytes.maketrans(b"123456789", b"000000000")   # tools.rankdiff.mask.ZERO (a test checks they agree)
MAX_TEMPLATES = 20_000   # distinct zeroed lines remembered per process (a cascade has a handful)


def template(text: str) -> str:
    """The rank diff's template of a line (tools.rankdiff.mask), cached on its digit-zeroed bytes: 4,096 ranks'
    copies of one cascade line differ only in digits, so the masks run once for all of them."""
    k = text.encode("utf-8", "surrogateescape").replace(b"\n", b" ").translate(_ZERO)
    return remember(_TEMPLATES, k, _template_of_key, MAX_TEMPLATES)


def _template_of_key(k: bytes) -> str:
    from trainlog_debugger.tools.rankdiff.mask import template_of_key  # its regexes compile on first use only
    return template_of_key(k)


def group_evidence(evs: Iterable[Evidence], *, focus: Iterable[int] = (), pattern: str | None = None,
                   key: Callable[[Evidence], Hashable] | None = None) -> list[Group]:
    """Lines grouped by template (default) or by `key`: what `ask`, the agent's tools and the renderers use to speak
    of evidence that many ranks share."""
    g = Grouper(focus)
    keyf = key or (lambda e: template(e.text))
    for e in evs:
        g.add(keyf(e), e.rank, e, pattern=pattern)
    return g.groups()
