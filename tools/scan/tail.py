"""Where each rank's log stops: the last line and the last timestamp of every rank of a file, read back from the
end of its last buffer (the final MiB).

Why backwards and bounded: a rank that went silent first is the one that hung or died, and its last words say
where; the rest of the file was already counted by the forward pass. A one-rank file stops at its first dated
line from the end; a multi-rank file stops once every rank it names has its last line and time (early only when
every tail line opens with a `[rankN]:` label: tail_ranks), else walks the whole tail.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.attribution import Attribution
from trainlog_debugger.tools.ranks import MAX_RANKS, plausible_rank
from trainlog_debugger.tools.scan.labels import FAST_RANK, bounded_attribution as attribute_line
from trainlog_debugger.tools.scan.longline import shown_tail_line
from trainlog_debugger.tools.scan.nearby import stamp
from trainlog_debugger.tools.scan.result import FileScan, LastLine

MAX_STEPS = 20000  # lines walked back at most

_TAIL_RANK = re.compile(rb"\[rank(\d{1,7})\]")
# A line that opens with c10's `[rankN]:` (after at most a torchrun role label) has rank N (filepass's FAST_RANK), and
# a line of blanks only is skipped by the walk; _OTHER is every other line (a torchrun `[default3]:terminate called
# ...` that c10 did not label, an unprefixed line), whose rank tail_ranks finds one by one
_OTHER = rb"(?!(?:\[(?!rank\d)[A-Za-z_]\w*?\d{1,7}\]:)?\[rank\d{1,7}\]:)(?![ \t\r\f\v]*(?:\n|\Z))([^\n]*)"
_TAIL_OTHER_FIRST = re.compile(_OTHER)  # at the tail's first line start
# after a newline: a pattern that opens with a literal is searched for by that literal (2 ms for a 575 KB tail),
# one that opens with `(?m)^` is tried at every byte (10 ms)
_TAIL_OTHER = re.compile(rb"\n" + _OTHER)
MAX_OTHER = 256  # other lines attributed one by one before the walk may stop early; more: it walks the whole tail


def read_tail(fs: FileScan, tail: bytes, tail_line: int, tail_nl: int, tail_cut: bool) -> None:
    """Each rank's last line and last timestamp into fs.last_lines (and fs.last_local for local ranks with no
    known global rank). `tail_line`: the line number before the tail's first line; `tail_nl`: the newlines in
    `tail`, already counted; `tail_cut`: the tail begins inside a line."""
    if not tail:
        return
    multi = len(fs.ranks) > 1
    single = None if multi else (fs.hint.get("rank") if fs.hint.get("rank") is not None else next(iter(fs.ranks), None))
    need_time: set[int | None] = set()
    end = len(tail)
    line_no = tail_line + tail_nl + (0 if tail.endswith(b"\n") else 1)
    if tail.endswith(b"\n"):
        end -= 1
    steps = 0
    attrs: dict[str, Attribution] = {}  # a line's attribution, made once for tail_ranks and the walk
    wanted = tail_ranks(fs, tail, tail_cut, attrs) if multi else None
    while end >= 0:  # walk back line by line with rfind: no split of the whole tail for one-rank files
        start = tail.rfind(b"\n", 0, end) + 1
        raw = tail[start:end]
        cur, end = line_no, start - 1
        line_no -= 1
        steps += 1
        if not raw.strip():
            if start == 0:
                break
            continue
        text = shown_tail_line(raw)
        rank = single
        if multi:
            # a `[rankN]:` line (after at most a role label) is rank N whatever follows (labels.FAST_RANK): most
            # lines of a per-node torchrun file, each of which attribution cost ~15 µs (a whole-tail walk: 2,500
            # lines a file, 70 % of a per-node file's scan)
            fast = FAST_RANK.match(text)
            if fast is not None and int(fast.group(1)) <= MAX_RANKS:
                rank = int(fast.group(1))
            else:
                a = attrs.get(text) or attribute_line(text)
                rank = a.rank
            if rank is None and a.local_rank is not None:
                mapped = fs.local_to_rank.get(a.local_rank, -1)
                if mapped >= 0:
                    rank = mapped
                elif a.local_rank not in fs.last_local:
                    fs.last_local[a.local_rank] = LastLine(cur, text)
        ll = fs.last_lines.get(rank)
        if ll is None:
            ll = fs.last_lines[rank] = LastLine(cur, text)
            need_time.add(rank)
        if rank in need_time:
            st = stamp(text)
            if st is not None and st.uptime_s is None:
                ll.time, ll.time_line = st, cur
                need_time.discard(rank)
        if not need_time and multi and wanted is not None and wanted <= fs.last_lines.keys() and tail_cut \
                and start > 0:
            # stopping early: still read the tail's cut first piece, as the full walk does (its prefix is gone,
            # so it may fall to no rank)
            end, line_no, tail_cut = tail.find(b"\n"), tail_line + 1, False
            continue
        if not need_time and (not multi or wanted is not None and wanted <= fs.last_lines.keys()) \
                or steps > MAX_STEPS or start == 0:
            break


def tail_ranks(fs: FileScan, tail: bytes, cut: bool, attrs: dict[str, Attribution] | None = None) -> set[int | None] | None:
    """The ranks whose last line the reverse walk of a multi-rank file's tail must reach before it may stop early,
    or None when it may not (it then walks the whole tail, as it must to find every last line). Early only where
    every rank that a line of the tail falls to is known beforehand: the `[rankN]:` labels (such a line's rank is
    its label) and, for the few other lines (at most MAX_OTHER: the C++ abort text under torchrun's `[default3]:`,
    which c10 did not label), each one's rank found as the walk finds it (attribution, then the file's own local →
    global mapping). A line that falls to no rank by a local rank the file does not map makes it walk everything
    (the walk keeps such lines apart: fs.last_local). One regex pass over the tail in C instead of attributing each
    of its ~20,000 lines: the whole walk cost 10 of 12.5 CPU-s of a 1,024-rank scan in per-node files, and two
    thirds of a 10,000-rank one whose tails hold a few dozen unlabelled abort lines. `cut`: the tail begins inside
    a line (the last MiB of a bigger file): that fragment is left out (a walk that stops early does not reach it).
    `attrs`: filled with each other line's attribution (by its shown text), so the walk does not make it again (half
    the attribution of a per-node file's tail)."""
    pos = tail.find(b"\n") + 1 if cut else 0
    if cut and pos == 0:
        return None
    wanted: set[int | None] = set(fs.ranks)
    first = _TAIL_OTHER_FIRST.match(tail, pos)
    others = ([first.group(1)] if first is not None else []) + _TAIL_OTHER.findall(tail, pos)
    if len(others) > MAX_OTHER:
        return None
    for raw in others:
        text = shown_tail_line(raw)
        fast = FAST_RANK.match(text)
        if fast is not None and int(fast.group(1)) <= MAX_RANKS:
            wanted.add(int(fast.group(1)))
            continue
        a = attribute_line(text)
        if attrs is not None:
            attrs[text] = a
        rank = a.rank
        if rank is None and a.local_rank is not None:
            rank = fs.local_to_rank.get(a.local_rank, -1)
            if rank < 0:
                return None
        wanted.add(rank)
    wanted.update(r for r in fs.local_to_rank.values() if r >= 0)
    if fs.hint.get("rank") is not None:
        # a file whose name states a rank had its `[rankN]` labels read in its head only (FileScanner._labels): the
        # tail's own labels are added; every other file's labels were read over all of it, the tail included
        wanted.update(r for r in map(int, set(_TAIL_RANK.findall(tail))) if plausible_rank(r))
    return wanted
