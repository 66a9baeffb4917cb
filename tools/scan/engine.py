"""Multi-pattern matching over whole buffers: which lines of a buffer does any catalog pattern hit?

Why two engines (measured in ../shared/PERF.md on this machine kind): Hyperscan scans all patterns at once over
a whole buffer at ~1 GB/s per core; a Python `re` alternation is ~200x slower, and per-line Python loops are out
of the question at tens of GB. Without Hyperscan (no wheel for the platform) the fallback finds each pattern's
literal anchors with `bytes.find` (C speed) and runs the regex only on those lines: ~40 MB/s per core, slow but
correct and identical in results.

Both engines return candidate (line_start, pattern_index) pairs; the caller verifies each line with the
pattern's Python regex, so the two engines cannot disagree on what counts as a match.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainlog_debugger.tools.sources.pattern import Pattern

_hs: Any
try:  # optional compiled dependency
    import hyperscan as _hs
except Exception:  # pragma: no cover - depends on the platform
    _hs = None


def available_engines() -> list[str]:
    return (["hyperscan"] if _hs is not None else []) + ["re"]


class ReEngine:
    """Literal-anchor prefilter: `bytes.find` for each anchor, regex confirmation on the anchor's line."""

    name = "re"

    def __init__(self, patterns: Sequence[Pattern]):
        self.patterns = list(patterns)
        self._anchors: list[tuple[bytes, list[int]]] = []
        by_anchor: dict[bytes, list[int]] = {}
        for i, p in enumerate(self.patterns):
            for a in p.anchors:
                by_anchor.setdefault(a.encode(), []).append(i)
        self._anchors = list(by_anchor.items())

    def candidates(self, buf: bytes) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        find, rfind = buf.find, buf.rfind
        for anchor, idxs in self._anchors:
            pos = find(anchor)
            while pos != -1:
                start = rfind(b"\n", 0, pos) + 1
                for i in idxs:
                    out.add((start, i))
                end = find(b"\n", pos)
                if end == -1:
                    break
                pos = find(anchor, end + 1)
        return out


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainlog-debugger"


_SCRATCH = threading.local()
SCRATCH_KEPT = 4  # databases per thread whose scratch is kept (the catalog's, the labels', a grep's)


def thread_scratch(db):
    """This thread's Hyperscan scratch for `db`. Why: a scratch serves one scan at a time (a second concurrent scan
    on it raises ScratchInUseError), and `scan_bundle` may run in several threads of one process (the Slack bot's
    conversations). Each thread gets its own scratch per database, made once (a clone of the database's scratch);
    a forked worker inherits the forking thread's."""
    per = getattr(_SCRATCH, "by_db", None)
    if per is None:
        per = _SCRATCH.by_db = {}
    s = per.get(id(db))
    if s is None or s[0] is not db:
        if len(per) >= SCRATCH_KEPT:  # a long-lived thread scanning with many engines keeps only the newest few
            del per[next(iter(per))]
        s = per[id(db)] = (db, db.scratch.clone() if getattr(db, "scratch", None) is not None else _hs.Scratch(db))
    return s[1]


def _cached_db(exprs: list[bytes], flags: list[int] | None = None):
    """Compiling the catalog takes ~0.4 s; a serialized database keyed by the patterns and the Hyperscan version
    loads in milliseconds. The cache is ours (never user input) and any problem with it just means compiling."""
    flags = flags or [0] * len(exprs)
    key = hashlib.sha256(b"\0".join(exprs) + repr(flags).encode()
                         + getattr(_hs, "__version__", "").encode()).hexdigest()[:24]
    path = _cache_dir() / f"hs-{key}.db"
    try:
        db = _hs.loadb(path.read_bytes(), mode=_hs.HS_MODE_BLOCK)
        db.scratch = _hs.Scratch(db)  # a deserialized database comes without scratch space
        return db
    except Exception:
        pass
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(_hs.dumpb(db))
        os.replace(tmp, path)
    except OSError:
        pass
    return db


class HyperscanEngine:
    """All triggers in one block-mode database; the callback records only where each match ends."""

    name = "hyperscan"
    MAX_BLOCK = (1 << 32) - 1  # block mode takes an unsigned int length (PERF.md pitfall 2)

    def __init__(self, patterns: Sequence[Pattern]):
        if _hs is None:
            raise RuntimeError("hyperscan is not installed")
        self.patterns = list(patterns)
        exprs = [p.trigger.encode() for p in self.patterns]
        self.db = _cached_db(exprs)

    def candidates(self, buf: bytes) -> set[tuple[int, int]]:
        ends: list[tuple[int, int]] = []
        add = ends.append
        scratch = thread_scratch(self.db)

        def on_match(idx, _from, to, _flags, _ctx):
            add((to, idx))
            return None

        for base in range(0, max(len(buf), 1), self.MAX_BLOCK):
            view = buf[base: base + self.MAX_BLOCK]
            if not view:
                break
            ends_before = len(ends)
            self.db.scan(view, match_event_handler=on_match, scratch=scratch)
            if base:
                ends[ends_before:] = [(to + base, i) for to, i in ends[ends_before:]]
        out: set[tuple[int, int]] = set()
        rfind = buf.rfind
        last_hi, last_start = 0, 0
        for to, idx in ends:
            # Matches arrive in end-offset order: the line start of this one is the last newline before it, which
            # lies either between the previous match and this one or is the previous line start. Searching only
            # that stretch keeps a whole buffer linear: searching back to the buffer's start for every match took
            # 186 s on one 30 MB line with a hit every 70 bytes (issue 30).
            hi = max(to - 1, 0)
            if hi >= last_hi:
                nl = rfind(b"\n", last_hi, hi)
                if nl != -1:
                    last_start = nl + 1
            else:  # out of order (never seen): the full search
                last_start = rfind(b"\n", 0, hi) + 1
            last_hi = hi
            out.add((last_start, idx))
        return out


def make_engine(patterns: Sequence[Pattern], name: str | None = None):
    """`name` None → the fastest available; env DEBUGGER_ENGINE=re forces the fallback (tests use both)."""
    name = name or os.environ.get("DEBUGGER_ENGINE") or ("hyperscan" if _hs is not None else "re")
    if name == "hyperscan":
        return HyperscanEngine(patterns)
    if name == "re":
        return ReEngine(patterns)
    raise ValueError(f"unknown engine {name!r}; available: {', '.join(available_engines())}")
