"""What the lines near a hit say: their time and rank, remembered, and the time an untimed hit line may borrow.

A line's time and rank are remembered per process for lines up to MEMO_CHARS long. Why: the same lines are read
again and again near a crash: each untimed line of a traceback looks back over the lines before it, which the
lines after it look back over too, the traceback's exception is searched for over them (a hook of the generic
source, which reads them through the same memo: HitContext.rank_of), and the tail walk reads them once more. Per
file of a crashed rank that is 3x the parses it needs (~15 µs each). Both are pure functions of the text, so a
remembered answer is the answer. functools.lru_cache (C, thread-safe) keeps the newest MEMO lines (a few MB at
most); the repeats are near each other (40 lines of look-back), so a small memo catches them. A longer line is
parsed each time (not hashed, not kept), and forget_lines empties both when a scan ends: a long-lived process (the
Slack bot) keeps no log lines of a bundle it is done with.
"""

from __future__ import annotations

import functools
import re

from trainlog_debugger.tools.lines.timestamps import Stamp, parse_stamp
from trainlog_debugger.tools.ranks import plausible_rank
from trainlog_debugger.tools.scan.labels import FAST_RANK, bounded_attribution as attribute_line

MEMO = 2048
MEMO_CHARS = 1024
STAMP_BYTES = 4096  # a timestamp is looked for in the first bytes of a neighbouring line only
LOOKBACK_LINES = 40  # how far back a time is looked for, for a fatal line that has none
MAX_INHERIT_GAP_S = 120  # an untimed line inherits a time only from a neighbour this close to the next timed line

_stamps = functools.lru_cache(maxsize=MEMO)(parse_stamp)
_ranks = functools.lru_cache(maxsize=MEMO)(lambda text: attribute_line(text).rank)


def decode(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


# c10's rank prefix: parse_stamp of `[rankN]:` + body is the same for every N (no stamp format can match in or
# across the prefix: none starts with `[r`, a digit run followed by `]` or a `:` then `]`, and their lookbehinds
# see at most the prefix's last `:`, which every such prefix shares), so such a line is remembered as `[rank0]:` +
# its body: the ranks of a job print the same bodies (the launch banner, the first iteration line: each file's first
# time; a warning every rank prints), parsed once instead of once per rank.
_C10_PREFIX = re.compile(r"\[rank\d{1,7}\]:")


def stamp(text: str) -> Stamp | None:
    """parse_stamp(text), remembered (a c10-prefixed line by its body, whatever its rank)."""
    if len(text) > MEMO_CHARS:
        return parse_stamp(text)
    if text.startswith("[rank") and (m := _C10_PREFIX.match(text)) is not None:
        return _stamps("[rank0]:" + text[m.end():])
    return _stamps(text)


def line_rank(text: str) -> int | None:
    """attribute_line(text).rank, remembered; a line that opens with c10's `[rankN]:` is N without attributing it
    (labels.FAST_RANK: ~25 µs a line saved, and a node's file searches forward over every rank's watchdog lines)."""
    if (fast := FAST_RANK.match(text)) is not None and plausible_rank(r := int(fast.group(1))):
        return r
    return _ranks(text) if len(text) <= MEMO_CHARS else attribute_line(text).rank


def forget_lines() -> None:
    """Drop what the memo holds (end of a scan)."""
    _stamps.cache_clear()
    _ranks.cache_clear()


def head_text(buf: bytes, start: int, end: int) -> str:
    """The first STAMP_BYTES of a line, decoded: enough for its prefixes and time, bounded for a 2 GB line."""
    return decode(buf[start:min(end, start + STAMP_BYTES)])


def previous_stamp(buf: bytes, start: int, line_no: int, rank: int | None) -> tuple[Stamp | None, int | None]:
    """The nearest earlier timestamped line of the same rank (a traceback's lines carry no time of their own), and
    its line number."""
    end = start - 1
    for k in range(1, LOOKBACK_LINES + 1):
        if end <= 0:
            return None, None
        s = buf.rfind(b"\n", 0, end) + 1
        st = own_stamp(head_text(buf, s, end), rank)
        end = s - 1
        if st is not None:
            return st, line_no - k
    return None, None


def next_stamp(buf: bytes, end: int, rank: int | None, seen: dict | None = None) -> Stamp | None:
    """The nearest later timestamped line of the same rank, within LOOKBACK_LINES; None at the end of what is read.

    `seen` (one dict per buffer): what earlier searches of this buffer found, by rank, as (from, upto, stamp): every
    search that starts in [from, upto] has the same answer: the timed line that starts at `upto` (it is nearer still),
    or None when the search from `from` reached the buffer's end. Why: in a per-node file every rank's abort text
    (untimed: `terminate called ...`, `what():`) sits at the end among the other ranks' untimed lines, and each of
    its lines searched forward to the end again (a third of such a file's hit work). Under the key _LINES it also
    keeps what each line it read says (where it ends, its own time, its rank): the 8 ranks of a node's file search
    forward over the same lines, and each line is read once, not once per rank."""
    pos = first = end + 1
    if seen is not None and (got := seen.get(rank)) is not None and got[0] <= pos <= got[1]:
        return got[2]
    lines = seen.setdefault(_LINES, {}) if seen is not None else {}
    for _ in range(LOOKBACK_LINES):
        if pos >= len(buf):
            if seen is not None:
                seen[rank] = (first, len(buf), None)
            return None
        said = lines.get(pos)
        if said is None:
            nxt = buf.find(b"\n", pos)
            nxt = len(buf) if nxt == -1 else nxt
            text = head_text(buf, pos, nxt)
            st = stamp(text)
            said = lines[pos] = ((nxt, st, line_rank(text)) if st is not None and st.uptime_s is None
                                 else (nxt, None, None))
        nxt, st, who = said
        if st is not None and (rank is None or who is None or who == rank):  # own_stamp, from what the line said
            if seen is not None:
                seen[rank] = (first, pos, st)
            return st
        pos = nxt + 1
    return None


_LINES = "lines"  # next_stamp's key for what each line said (the rank keys are ints or None)


def own_stamp(text: str, rank: int | None) -> Stamp | None:
    """The wall-clock time of a line that belongs to `rank` (or names no rank); None for another rank's line or
    one without such a time."""
    if rank is not None:
        r = line_rank(text)
        if r is not None and r != rank:
            return None
    st = stamp(text)
    return st if st is not None and st.uptime_s is None else None


def bracketed(prev: Stamp, nxt: Stamp | None) -> bool:
    """May an untimed line take the time of the line before it? Only when the next timed line of the same rank is
    close after it (the untimed line happened between the two): a traceback printed after an hour of silence must
    not inherit the hour-old time and win the 'earliest trigger' ordering. With no later timed line (the end of the
    log) the previous time is the best bound there is, and it is marked as inferred."""
    if nxt is None:
        return True
    a, b = prev.job_seconds(), nxt.job_seconds()
    return a is None or b is None or 0 <= b - a <= MAX_INHERIT_GAP_S
