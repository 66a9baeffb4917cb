"""Which hits of a file are kept in full: per (pattern, rank) the first few and the last KEEP, every one counted.

Why bounded: a rank that prints the same NCCL warning a million times must cost a million counts, not a million
Hit objects (each with its time parsed, ~70 µs). The first hits say when a pattern began, the last ones when it
stopped; the middle is a count. A source may keep more first hits of its patterns (KEEP_FIRST, declared by id
prefix): the collective-state lines of PyTorch and gloo come once per process group per rank, and a rank may be
in many groups, so their first 64 are kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from trainlog_debugger.tools.scan.result import Hit

KEEP = 5  # first KEEP and last KEEP hits per (pattern, rank) are kept in full

Key = tuple[str, "int | None"]


class HitKeeper:
    """First and last KEEP hits per (pattern, rank); everything counted. `more`: (pattern id prefix, first hits
    kept) pairs, for patterns whose first KEEP are too few."""

    def __init__(self, more: Iterable[tuple[str, int]] = ()):
        self.first: dict[Key, list[Hit]] = {}
        self.last: dict[Key, deque] = {}
        self.counts: dict[Key, int] = {}
        self.limit: dict[str, int] = {}  # per pattern id: how many first hits are kept
        self.more = tuple(more)
        self.unfinished = False  # the ring holds entries of the current buffer, not yet made into hits

    def first_limit(self, pattern: str) -> int:
        """How many first hits of a (pattern, rank) are kept for good (and finished at once); later ones only pass
        through the ring of the newest few, and most are pushed out again."""
        lim = self.limit.get(pattern)
        if lim is None:
            lim = next((n for prefix, n in self.more if pattern.startswith(prefix)), KEEP)
            self.limit[pattern] = lim
        return lim

    def add(self, h: Hit) -> None:
        """A finished hit: one of the first few, or (a line that also holds a first hit) into the ring."""
        key = (h.pattern, h.rank)
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        if n < self.first_limit(h.pattern):
            self.first.setdefault(key, []).append(h)
        else:
            self._ring(key).append(h)  # the newest few as well

    def add_unfinished(self, key: Key, entry: tuple) -> None:
        """A repeat past the first few: counted, and only a tuple of what finishing it needs goes into the ring
        (most are pushed out again before the buffer ends: no Hit object, no time, no facts for them)."""
        self.counts[key] += 1
        self._ring(key).append(entry)
        self.unfinished = True

    def _ring(self, key: Key) -> deque:
        dq = self.last.get(key)
        if dq is None:
            dq = self.last[key] = deque(maxlen=KEEP)
        return dq

    def finish(self, done: Callable[[tuple], Hit]) -> None:
        """Each unfinished entry still in a ring (at most KEEP per key) becomes `done(entry)`, a Hit; the rest were
        dropped unfinished. Called before the buffer they point into is released."""
        if not self.unfinished:
            return
        self.unfinished = False
        for dq in self.last.values():
            if any(type(e) is tuple for e in dq):
                for i, e in enumerate(dq):
                    if type(e) is tuple:
                        dq[i] = done(e)

    def hits(self) -> tuple[list[Hit], int]:
        out: list[Hit] = []
        for key, firsts in self.first.items():
            out.extend(firsts)
            out.extend(self.last.get(key, ()))
        out.sort(key=lambda h: h.line)
        return out, sum(self.counts.values()) - len(out)
