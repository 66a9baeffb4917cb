"""Lines over LINE_CAP bytes (a 2 GB line of JSON, a progress bar that never printed a newline): matched in
overlapping pieces and shown cut, with their length, so that no line is too long to scan and no hit too long to
show. The scanner's per-line work never sees them: they are the rare exception, handled here."""

from __future__ import annotations

from collections.abc import Sequence

from trainlog_debugger.tools.scan.nearby import decode, head_text
from trainlog_debugger.tools.sources.pattern import Pattern

LINE_CAP = 1 << 20  # a longer line is matched in pieces of this size (overlapping by PIECE_OVERLAP)
PIECE_OVERLAP = 4096
SHOW = 2000  # characters of a long line kept as a hit's text: its head (prefixes) and the text around the match


def shown_long_line(head: str, piece: str, at: int, n_bytes: int) -> str:
    """What a line over LINE_CAP is shown as: its head (rank/host prefixes and time), the text around the match,
    and its length, so a reader knows it was cut and by how much."""
    half = (SHOW - 200) // 2
    mid = piece[max(0, at - half): at + half]
    return f"{head[:200]} … {mid} … [line of {n_bytes:,} bytes, shown truncated]"


def match_long_line(patterns: Sequence[Pattern], buf: bytes, start: int, end: int,
                    idxs: list[int]) -> tuple[str, list[Pattern]]:
    """A line over LINE_CAP: each candidate pattern (`idxs` into `patterns`) is tried on overlapping pieces of
    LINE_CAP bytes (a match longer than the overlap would be missed; triggers are short and line-local), and the
    line is shown as its head plus the text around the first match (shown_long_line)."""
    head = head_text(buf, start, end)
    matched: list[Pattern] = []
    shown = None
    pos = start
    while pos < end and len(matched) < len(idxs):
        piece = decode(buf[pos:min(end, pos + LINE_CAP)])
        for i in idxs:
            p = patterns[i]
            if p in matched:
                continue
            m = p._rx.search(piece)
            if m is not None:
                matched.append(p)
                if shown is None:
                    shown = shown_long_line(head, piece, m.start(), end - start)
        pos += LINE_CAP - PIECE_OVERLAP
    return shown or head, matched


def shown_tail_line(raw: bytes) -> str:
    """A last line as the tail walk keeps it: whole, or its first SHOW bytes and a marker when over LINE_CAP."""
    return decode(raw) if len(raw) <= LINE_CAP else \
        f"{decode(raw[:SHOW])} … [a line longer than {LINE_CAP >> 20} MiB, shown truncated]"
