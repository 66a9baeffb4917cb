"""One streaming pass over one source: catalog hits, line count, rank labels, first/last times, last lines.

Why per-file and picklable: the scan forks worker processes over batches of files (PERF.md: two workers on two
cores, batches of tens of MB), so everything a file yields must travel back as plain data. Memory is bounded by
the read chunk (64 MiB, newline-aligned) plus capped hit lists: per (pattern, rank) the first and last
KEEP hits are kept in full and the rest are only counted; the caps are reported, never silent.

Python runs only on hit lines (thousands), never per line of the file; the per-line work (matching, line
counting, rank-label counting) is done by Hyperscan and by C-level `bytes` methods over whole buffers.
"""

from __future__ import annotations

import functools
import json
import re
from collections import deque

from trainlog_debugger.tools.lines.attribution import note_local_rank, strip_prefixes
from trainlog_debugger.tools.bundle.open import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks, newlines
from trainlog_debugger.tools.ranks import MAX_DIGITS, MAX_RANKS, plausible_rank
from trainlog_debugger.tools.scan.labels import (SRUN_LABEL, bounded_attribution as attribute_line,
                                                 bounded_path_hint as attribute_path, cr_lines, rank_labels,
                                                 srun_labelled)
from trainlog_debugger.tools.sources.pattern import IMPLAUSIBLE
from trainlog_debugger.tools.lines.timestamps import parse_stamp
from trainlog_debugger.tools.scan.result import FileScan, Hit, LastLine

HEAD = 64 << 10
TAIL = 1 << 20
KEEP = 5  # first KEEP and last KEEP hits per (pattern, rank) are kept in full
KEEP_STATE = 64  # collective-state lines: one per process group per rank, and a rank may be in many groups
STATE_PREFIXES = ("pytorch.", "gloo.")
LOOKAHEAD_LINES = 200  # how far a traceback's final exception line is searched for
LOOKBACK_LINES = 40  # how far back a time is looked for, for a fatal line that has none
MAX_INHERIT_GAP_S = 120  # an untimed line inherits a time only from a neighbour this close to the next timed line
MAX_LOOKBACKS = 2000  # per buffer: bounded work even when thousands of untimed lines match

_ROLE_RANK = re.compile(rb"\[[A-Za-z_]+(\d{1,7})\]:\[rank(\d{1,7})\]:")
# A line that opens with c10's `[rankN]:`, after at most a torchrun role label (`[default3]:`): the rank that
# tools.lines.attribution gives it is N (the first `[rankN]:` wrapper outranks every other rank source)
_FAST_RANK = re.compile(r"(?:\[(?!rank\d)[A-Za-z_]\w*?\d{1,7}\]:)?\[rank(\d{1,7})\]:")
LINE_CAP = 1 << 20  # a longer line is matched in pieces of this size (overlapping by PIECE_OVERLAP)
PIECE_OVERLAP = 4096
SHOW = 2000  # characters of a long line kept as a hit's text: its head (prefixes) and the text around the match
MAX_CLAIM_NOTES = 5  # implausible claims noted per file (each with its line); the first ones tell the story
STAMP_BYTES = 4096  # a timestamp is looked for in the first bytes of a neighbouring line only
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|StopIteration|Warning)|StopIteration|KeyboardInterrupt)\b:? ?(.*)")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')
MAX_FRAMES = 12  # innermost frames kept per traceback
_TB_SKIP = ("Traceback", "During handling", "The above exception", "File ", "^", "~")


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


# A line's time and rank, remembered per process for lines up to MEMO_CHARS long. Why: the same lines are read
# again and again near a crash: each untimed line of a traceback looks back over the lines before it, which the
# lines after it look back over too, the traceback's exception is searched for over them, and the tail walk reads
# them once more. Per file of a crashed rank that is 3x the parses it needs (~15 µs each). Both are pure functions
# of the text, so a remembered answer is the answer. functools.lru_cache (C, thread-safe) keeps the newest MEMO
# lines (a few MB at most); the repeats are near each other (40 lines of look-back), so a small memo catches them.
# A longer line is parsed each time (not hashed, not kept), and forget_lines empties both when a scan ends: a
# long-lived process (the Slack bot) keeps no log lines of a bundle it is done with.
MEMO = 2048
MEMO_CHARS = 1024
_stamps = functools.lru_cache(maxsize=MEMO)(parse_stamp)
_ranks = functools.lru_cache(maxsize=MEMO)(lambda text: attribute_line(text).rank)


def _stamp(text: str):
    """parse_stamp(text), remembered."""
    return _stamps(text) if len(text) <= MEMO_CHARS else parse_stamp(text)


def _line_rank(text: str):
    """attribute_line(text).rank, remembered."""
    return _ranks(text) if len(text) <= MEMO_CHARS else attribute_line(text).rank


def forget_lines() -> None:
    """Drop what the memo holds (end of a scan)."""
    _stamps.cache_clear()
    _ranks.cache_clear()


def _head_text(buf: bytes, start: int, end: int) -> str:
    """The first STAMP_BYTES of a line, decoded: enough for its prefixes and time, bounded for a 2 GB line."""
    return _decode(buf[start:min(end, start + STAMP_BYTES)])


def shown_long_line(head: str, piece: str, at: int, n_bytes: int) -> str:
    """What a line over LINE_CAP is shown as: its head (rank/host prefixes and time), the text around the match,
    and its length, so a reader knows it was cut and by how much."""
    half = (SHOW - 200) // 2
    mid = piece[max(0, at - half): at + half]
    return f"{head[:200]} … {mid} … [line of {n_bytes:,} bytes, shown truncated]"


class _HitKeeper:
    """First KEEP and last KEEP hits per (pattern, rank); everything counted."""

    def __init__(self):
        self.first: dict[tuple, list[Hit]] = {}
        self.last: dict[tuple, deque] = {}
        self.counts: dict[tuple, int] = {}
        self.limit: dict[str, int] = {}  # per pattern id: how many first hits are kept
        self.unfinished = False  # the ring holds entries of the current buffer, not yet made into hits

    def first_limit(self, pattern: str) -> int:
        """How many first hits of a (pattern, rank) are kept for good (and finished at once); later ones only pass
        through the ring of the newest few, and most are pushed out again."""
        lim = self.limit.get(pattern)
        if lim is None:
            lim = self.limit[pattern] = KEEP_STATE if pattern.startswith(STATE_PREFIXES) else KEEP
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

    def add_unfinished(self, key: tuple, entry: tuple) -> None:
        """A repeat past the first few: counted, and only a tuple of what finishing it needs goes into the ring
        (most are pushed out again before the buffer ends: no Hit object, no time, no facts for them)."""
        self.counts[key] += 1
        self._ring(key).append(entry)
        self.unfinished = True

    def _ring(self, key: tuple) -> deque:
        dq = self.last.get(key)
        if dq is None:
            dq = self.last[key] = deque(maxlen=KEEP)
        return dq

    def finish(self, done) -> None:
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


class FileScanner:
    def __init__(self, engine):
        self.engine = engine
        self.patterns = engine.patterns
        self._levels = [int(p.fallback) for p in self.patterns]  # Pattern.fallback: 0 specific, 1, 2 last resort

    # -- public -------------------------------------------------------------------------------------------
    def scan(self, rel: str, kind: str, size: int, stream, sized: bool = True) -> FileScan:
        """`sized`: `size` is the exact byte count of `stream` (plain files), so reads can be sized to the file:
        `read(64 MiB)` on a 1 MiB file allocates and page-faults 64 MiB (PERF.md pitfall 1)."""
        hint = attribute_path(rel)
        fs = FileScan(rel=rel, kind=kind, size=size,
                      hint={k: v for k in hint.__slots__ if (v := getattr(hint, k)) is not None})  # asdict: 0.1 ms
        self._hint = hint
        self.whole = None  # the file's bytes when one buffer held them all (for a reader that shares the pass)
        pieces = 0
        keeper = _HitKeeper()
        base_line = 0
        base_off = 0
        tail, tail_line, tail_nl, tail_cut = b"", 0, 0, False
        srun = None
        stream, cr_only = cr_lines(stream)
        if cr_only:
            fs.notes.append("lines end in a carriage return only (CR): each CR is read as a line end")
        try:
            for ch in chunks(stream, CHUNK, known_size=size if sized else None):
                buf = ch.buf
                pieces += 1
                if ch.cut_long_line and not any("longer than" in n for n in fs.notes):
                    fs.notes.append(f"line {base_line + 1} is longer than {CHUNK >> 20} MiB; scanned in pieces")
                if base_line == 0 and base_off == 0:
                    srun = self._head(fs, buf)
                self._labels(fs, buf, srun)
                pos, lines_before = self._hits(fs, keeper, buf, base_line, base_off)
                # One newline count per buffer, shared with the hits and the tail: the bytes after the last hit
                # are counted up to the tail, the tail once (1 MiB per file counted twice more cost a third of
                # the counting of a 1 GiB / 256-file scan)
                t0 = max(0, len(buf) - TAIL)
                if t0 >= pos:
                    nl = newlines(buf, t0)
                    n = lines_before + newlines(buf, pos, t0) + nl
                else:
                    n = lines_before + newlines(buf, pos)
                    nl = newlines(buf, t0)
                if len(buf) >= TAIL or not tail:
                    tail, tail_nl, tail_cut = buf[t0:], nl, t0 > 0 and buf[t0 - 1] != 10  # 10: b"\n"
                    tail_line = base_line + n - nl
                else:  # short final piece: keep the previous tail in front of it
                    tail, tail_nl = tail + buf, tail_nl + nl
                base_line += n
                base_off += len(buf)
        except READ_ERRORS as e:
            fs.error = read_error_reason(e)
            fs.notes.append(f"read stopped at byte {base_off}: {fs.error}")
        fs.bytes_read = base_off
        if pieces == 1 and fs.error is None:
            self.whole = buf
        fs.lines = base_line + (1 if tail and not tail.endswith(b"\n") else 0)
        fs.hits, fs.dropped_hits = keeper.hits()
        fs.counts = keeper.counts
        self._local_ranks(fs)
        self._tail(fs, tail, tail_line, tail_nl, tail_cut)
        self._file_nodes(fs)
        if hint.rank is not None:
            fs.ranks.add(hint.rank)
        return fs

    # -- pieces -------------------------------------------------------------------------------------------
    def _head(self, fs: FileScan, buf: bytes):
        """First timestamp of the file, and whether lines carry srun `--label` task prefixes."""
        lines = buf[:HEAD].split(b"\n", 200)[:200]
        for i, raw in enumerate(lines):
            st = _stamp(_decode(raw)) if raw else None
            if st is not None and st.uptime_s is None:
                fs.first_time, fs.first_time_line = st, i + 1
                break
        return srun_labelled(lines)

    def _labels(self, fs: FileScan, buf: bytes, srun: bool) -> None:
        """Every rank that has a line here, exactly, without a per-line loop (tools.scan.engine.rank_labels: one pass).
        A file whose NAME states its rank (rank_3.log, rank3.out) is that rank's log: its labels are read in the
        head only, which saves a full pass over per-rank layouts (the bulk of big bundles)."""
        named = self._hint.rank is not None
        found = rank_labels(buf[:HEAD] if named else buf, fs.ranks | {self._hint.rank} if named else fs.ranks)
        fs.ranks.update(found)
        if srun:
            fs.ranks.update(r for r in map(int, set(SRUN_LABEL.findall(buf))) if plausible_rank(r))
        head = buf[:HEAD]
        if found and b"]:[rank" in head:  # `[default1]:[rank5]:` states local 1 = rank 5
            for lr, r in sorted(set(_ROLE_RANK.findall(head))):
                if plausible_rank(int(lr)) and plausible_rank(int(r)):
                    note_local_rank(fs.local_to_rank, int(lr), int(r))

    def _hits(self, fs: FileScan, keeper: _HitKeeper, buf: bytes, base_line: int, base_off: int) -> tuple[int, int]:
        """Records the buffer's hits; returns (offset, newlines before it) of the last hit line, so the caller
        finishes the newline count from there instead of counting the buffer twice."""
        cands = self.engine.candidates(buf)
        if not cands:
            return 0, 0
        by_line: dict[int, list[int]] = {}
        for start, idx in cands:
            by_line.setdefault(start, []).append(idx)
        prev_start, prev_line = 0, base_line + 1
        budget = [0]  # look-backs made in this buffer (MAX_LOOKBACKS)
        pats, find, fast_rank = self.patterns, buf.find, _FAST_RANK.match
        for start in sorted(by_line):  # locals above and the one-pattern path below: this loop runs per hit line
            line_no = prev_line + newlines(buf, prev_start, start)
            prev_start, prev_line = start, line_no
            end = find(b"\n", start)
            end = len(buf) if end == -1 else end
            idxs = by_line[start]
            if end - start > LINE_CAP:
                text, matched = self._long_line(buf, start, end, sorted(set(idxs)))
                if not any("matched in pieces" in n for n in fs.notes):
                    fs.notes.append(f"line {line_no} has {end - start:,} bytes: matched in pieces of "
                                    f"{LINE_CAP >> 20} MiB and shown truncated")
            else:
                text = buf[start:end].decode("utf-8", "replace").rstrip("\r")  # as _decode
                if len(idxs) == 1:
                    p = pats[idxs[0]]
                    matched = [p] if p._rx.search(text) is not None else []
                else:
                    # specific patterns before fallbacks before last resorts (Pattern.fallback): a level is verified
                    # only when no pattern of a more specific one matched, since its matches would be dropped (the
                    # last resort's precise regex then runs on few of a crash's lines, not on every `Error` line)
                    uniq, levels, matched = sorted(set(idxs)), self._levels, []
                    for lv in sorted({levels[i] for i in uniq}):
                        matched = [pats[i] for i in uniq if levels[i] == lv and pats[i].match(text)]
                        if matched:
                            break
            if len(matched) > 1:  # specific patterns before fallbacks before last resorts (Pattern.fallback)
                least = min(p.fallback for p in matched)
                matched = [p for p in matched if p.fallback == least]
            if not matched:
                continue
            # The rank decides whether the hit is kept; a line that opens with c10's `[rankN]:` (after at most a
            # torchrun role label) has rank N whatever follows (attribution takes the first `[rankN]:` wrapper
            # before any other source), so most repeats, which are only counted, skip attribution (~10 µs).
            fast = fast_rank(text)
            attr = None
            if fast is not None and int(fast.group(1)) <= MAX_RANKS:  # plausible_rank: the regex has no sign
                rank = int(fast.group(1))
            else:
                attr = attribute_line(text)
                rank = self._rank_of(fs, attr)
            # The time (parse_stamp, ~70 µs, and a look back for untimed lines), the node, and the facts only for
            # hits that are kept: the first few per (pattern, rank) now, the ring's newest few when the buffer is
            # done (finish below). Retry facts are read for every hit: the escalation counts them all.
            counts, limit = keeper.counts, keeper.first_limit
            if (counts.get((matched[0].id, rank), 0) >= limit(matched[0].id) if len(matched) == 1 else
                    all(counts.get((p.id, rank), 0) >= limit(p.id) for p in matched)):
                # facts (and a note of an implausible claim in them) only for repeats still kept when the buffer
                # ends: a repeat pushed out of the ring has its facts used nowhere, so it has no claim to ignore
                for p in matched:
                    facts = None
                    if p.id == "io.retrying":
                        facts = self._facts(fs, p, text, line_no)
                        if "attempt" in facts:
                            self._retry(fs, rank, facts)
                    keeper.add_unfinished((p.id, rank), (p, start, end, line_no, text, rank, facts, matched))
                continue
            if attr is None:
                attr = attribute_line(text)
            fatal = any(p.tier in (1, 2) for p in matched)
            where = (start, end, line_no, text, attr.rank, fatal, attr.node or self._hint.node)
            time, node = self._when(fs, buf, where, budget)
            local = attr.local_rank if attr.local_rank is not None else self._hint.local_rank
            for p in matched:
                facts = self._facts(fs, p, text, line_no)
                if p.id == "python.traceback":
                    facts.update(_final_exception(buf, end, attr.rank, line_no))
                if p.id == "io.retrying" and "attempt" in facts:
                    self._retry(fs, rank, facts)
                keeper.add(Hit(p.id, line_no, base_off + start, text, rank, local, node, time, facts))
        if keeper.unfinished:
            when: dict[int, tuple] = {}  # one attribution and time per line, whichever of its patterns are kept

            def done(e: tuple) -> Hit:
                p, start, end, line_no, text, rank, facts, matched = e
                got = when.get(start)
                if got is None:
                    a = attribute_line(text)
                    fatal = any(q.tier in (1, 2) for q in matched)
                    where = (start, end, line_no, text, a.rank, fatal, a.node or self._hint.node)
                    got = when[start] = (a, self._when(fs, buf, where, budget))
                a, (time, node) = got
                if facts is None:
                    facts = self._facts(fs, p, text, line_no)
                if p.id == "python.traceback":
                    facts.update(_final_exception(buf, end, a.rank, line_no))
                local = a.local_rank if a.local_rank is not None else self._hint.local_rank
                return Hit(p.id, line_no, base_off + start, text, rank, local, node, time, facts)
            keeper.finish(done)
        return prev_start, prev_line - base_line - 1

    def _rank_of(self, fs: FileScan, attr) -> int | None:
        """A hit's rank: the line's own, else the file name's, else the file's mapping of its local rank."""
        rank = attr.rank if attr.rank is not None else self._hint.rank
        if rank is None and attr.local_rank is not None and fs.local_to_rank.get(attr.local_rank, -1) >= 0:
            rank = fs.local_to_rank[attr.local_rank]
        return rank

    @staticmethod
    def _facts(fs: FileScan, p, text: str, line_no: int) -> dict:
        """A kept hit's typed facts; a number beyond its bound is noted (the first few per file), not used."""
        facts = p.extract(text)
        if IMPLAUSIBLE in facts and sum(n.count("implausible claim") for n in fs.notes) < MAX_CLAIM_NOTES:
            fs.notes.append(f"line {line_no}: implausible claim ignored ({', '.join(facts[IMPLAUSIBLE])}; "
                            f"bounds: {MAX_RANKS:,} ranks, {MAX_DIGITS} digits)")
        return facts

    def _when(self, fs: FileScan, buf: bytes, where: tuple, budget: list[int]):
        """(time, node) of a kept hit's line: its own stamp, else (fatal tiers only, within MAX_LOOKBACKS per
        buffer) the previous timed line of the same rank when the next one is close after it; Cloud Logging
        entries give their task and timestamp."""
        start, end, line_no, text, attr_rank, fatal, node = where
        stamp = _stamp(text)
        inferred_from = None
        if stamp is None and budget[0] < MAX_LOOKBACKS and fatal:
            budget[0] += 1
            stamp, inferred_from = _previous_stamp(buf, start, line_no, attr_rank)
            if stamp is not None and not _bracketed(stamp, _next_stamp(buf, end, attr_rank)):
                stamp, inferred_from = None, None
        time = stamp
        if time is not None and inferred_from:  # a traceback line has no time of its own
            time = time.with_meta(inferred_from_line=inferred_from)
        if fs.kind == "cloud_logging":
            extra = _cloud_entry(buf, start, end)
            node = node or extra.get("task_name")
            time = time or extra.get("time")
        return time, node

    def _long_line(self, buf: bytes, start: int, end: int, idxs: list[int]) -> tuple[str, list]:
        """A line over LINE_CAP: each candidate pattern is tried on overlapping pieces of LINE_CAP bytes (a match
        longer than the overlap would be missed; triggers are short and line-local), and the line is shown as its
        head plus the text around the first match (shown_long_line)."""
        head = _head_text(buf, start, end)
        matched, shown = [], None
        pos = start
        while pos < end and len(matched) < len(idxs):
            piece = _decode(buf[pos:min(end, pos + LINE_CAP)])
            for i in idxs:
                p = self.patterns[i]
                if p in matched:
                    continue
                m = p._rx.search(piece)
                if m is not None:
                    matched.append(p)
                    if shown is None:
                        shown = shown_long_line(head, piece, m.start(), end - start)
            pos += LINE_CAP - PIECE_OVERLAP
        return shown or head, matched

    @staticmethod
    def _retry(fs: FileScan, rank, facts) -> None:
        a, m = facts.get("attempt"), facts.get("max_attempts")
        if not isinstance(a, int) or not isinstance(m, int):
            return
        r = fs.retries.setdefault(rank, [0, 0, 0, 0])
        r[0], r[1] = max(r[0], a), max(r[1], m)
        r[2] += a == 1
        r[3] += a >= m

    def _tail(self, fs: FileScan, tail: bytes, tail_line: int, tail_nl: int, tail_cut: bool) -> None:
        """Each rank's last line and last timestamp, read back from the end of the file (`tail_nl`: the newlines
        in `tail`, already counted; `tail_cut`: the tail begins inside a line)."""
        if not tail:
            return
        multi = len(fs.ranks) > 1
        single = None if multi else (fs.hint.get("rank") if fs.hint.get("rank") is not None else next(iter(fs.ranks), None))
        need_time: set = set()
        end = len(tail)
        line_no = tail_line + tail_nl + (0 if tail.endswith(b"\n") else 1)
        if tail.endswith(b"\n"):
            end -= 1
        steps = 0
        wanted = _tail_ranks(fs, tail, tail_nl, tail_cut) if multi else None
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
            text = _decode(raw) if len(raw) <= LINE_CAP else \
                f"{_decode(raw[:SHOW])} … [a line longer than {LINE_CAP >> 20} MiB, shown truncated]"
            rank = single
            if multi:
                a = attribute_line(text)
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
                st = _stamp(text)
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
                    or steps > 20000 or start == 0:
                break

    @staticmethod
    def _local_ranks(fs: FileScan) -> None:
        """Lines that carry only `[default1]:` get the global rank that this file itself states for local rank 1
        (`[default1]:[rank5]:` elsewhere in the file); an ambiguous local rank (two global ranks, e.g. after a
        restart with a new layout) is left unattributed rather than guessed."""
        for h in fs.hits:
            if h.rank is not None and h.local_rank is not None and f"[rank{h.rank}]" in h.text:
                prev = fs.local_to_rank.get(h.local_rank)
                fs.local_to_rank[h.local_rank] = h.rank if prev in (None, h.rank) else -1
        if not fs.local_to_rank:
            return
        moved: dict[tuple, int] = {}
        for h in fs.hits:
            if h.rank is None and h.local_rank is not None:
                r = fs.local_to_rank.get(h.local_rank, -1)
                if r >= 0:
                    h.rank = r
                    moved[(h.pattern, r)] = moved.get((h.pattern, r), 0) + 1
        for (pid, r), n in moved.items():  # only kept hits can move; dropped repeats stay counted as unranked
            fs.counts[(pid, None)] -= n
            if fs.counts[(pid, None)] <= 0:
                del fs.counts[(pid, None)]
            fs.counts[(pid, r)] = fs.counts.get((pid, r), 0) + n

    def _file_nodes(self, fs: FileScan) -> None:
        """A file whose lines name exactly one host (NCCL `host:pid:tid`, pdsh) belongs to that node."""
        nodes = {h.node for h in fs.hits if h.node}
        fs.nodes = nodes
        if len(nodes) == 1:
            node = next(iter(nodes))
            for h in fs.hits:
                if h.node is None:
                    h.node = node


_TAIL_RANK = re.compile(rb"\[rank(\d{1,7})\]")
# a line that opens with c10's `[rankN]:` (after at most a torchrun role label): its rank is N (_FAST_RANK); and a
# line of blanks only, which the walk skips. Each counted once per line start.
_TAIL_LABELLED = re.compile(rb"(?m)^(?:\[(?!rank\d)[A-Za-z_]\w*?\d{1,7}\]:)?\[rank\d{1,7}\]:")
_TAIL_BLANK = re.compile(rb"(?m)^[ \t\r\f\v]*$")


def _tail_ranks(fs: FileScan, tail: bytes, tail_nl: int, cut: bool) -> set | None:
    """The ranks whose last line the reverse walk of a multi-rank file's tail must reach before it may stop early,
    or None when it may not (it then walks the whole tail, as it must to find every last line). Early only where
    every line of the tail opens with a `[rankN]:` label (or is blank): such a line's rank is its label, so the
    ranks present are exactly the labels found, and no line falls to another rank source (unprefixed lines, `[Rank
    r]` tags, NeMo `rank:N`, srun or elastic labels, unmapped local ranks), whose last lines would be missed. Two
    regex counts over the tail in C, instead of attributing each of its ~20,000 lines: that walk cost 10 of 12.5
    CPU-s of a 1,024-rank scan in per-node files. `cut`: the tail begins inside a line (the last MiB of a bigger
    file): that fragment is left out of the test (a walk that stops early does not reach it)."""
    pos = tail.find(b"\n") + 1 if cut else 0
    if cut and pos == 0:
        return None
    pieces = tail_nl + 1 - (1 if cut else 0)  # split on newlines; a final empty piece counts as blank
    if len(_TAIL_LABELLED.findall(tail, pos)) + len(_TAIL_BLANK.findall(tail, pos)) != pieces:
        return None
    wanted = set(fs.ranks) | {r for r in fs.local_to_rank.values() if r >= 0}
    wanted.update(r for r in map(int, set(_TAIL_RANK.findall(tail))) if plausible_rank(r))
    return wanted


def _previous_stamp(buf: bytes, start: int, line_no: int, rank: int | None):
    """The nearest earlier timestamped line of the same rank (a traceback's lines carry no time of their own)."""
    end = start - 1
    for k in range(1, LOOKBACK_LINES + 1):
        if end <= 0:
            return None, None
        s = buf.rfind(b"\n", 0, end) + 1
        st = _own_stamp(_head_text(buf, s, end), rank)
        end = s - 1
        if st is not None:
            return st, line_no - k
    return None, None


def _next_stamp(buf: bytes, end: int, rank: int | None):
    """The nearest later timestamped line of the same rank, within LOOKBACK_LINES; None at the end of what is read."""
    pos = end + 1
    for _ in range(LOOKBACK_LINES):
        if pos >= len(buf):
            return None
        nxt = buf.find(b"\n", pos)
        nxt = len(buf) if nxt == -1 else nxt
        st = _own_stamp(_head_text(buf, pos, nxt), rank)
        pos = nxt + 1
        if st is not None:
            return st
    return None


def _own_stamp(text: str, rank: int | None):
    """The wall-clock time of a line that belongs to `rank` (or names no rank); None for another rank's line or
    one without such a time."""
    if rank is not None:
        r = _line_rank(text)
        if r is not None and r != rank:
            return None
    st = _stamp(text)
    return st if st is not None and st.uptime_s is None else None


def _bracketed(prev, nxt) -> bool:
    """May an untimed line take the time of the line before it? Only when the next timed line of the same rank is
    close after it (the untimed line happened between the two): a traceback printed after an hour of silence must
    not inherit the hour-old time and win the 'earliest trigger' ordering. With no later timed line (the end of the
    log) the previous time is the best bound there is, and it is marked as inferred."""
    if nxt is None:
        return True
    a, b = prev.job_seconds(), nxt.job_seconds()
    return a is None or b is None or 0 <= b - a <= MAX_INHERIT_GAP_S


def _final_exception(buf: bytes, end: int, rank: int | None, tb_line: int) -> dict:
    """The exception that ended a traceback: the first unindented line after the frames (same rank label), and the
    innermost frames (`file:function`, innermost last): where it was raised decides what was at fault as much as
    its class does (a ValueError inside a Dataset's __getitem__ is the data's; in a forward pass it is the code's).
    "Unindented" is relative to the header: torchrun's failure report copies a worker's error.json under
    `  traceback : Traceback (...)`, frames indented four, the exception line two."""
    pos = end + 1
    head = strip_prefixes(_decode(buf[buf.rfind(b"\n", 0, end) + 1:end]))
    base = len(head) - len(head.lstrip(" \t"))
    frames: deque = deque(maxlen=MAX_FRAMES)
    for k in range(1, LOOKAHEAD_LINES + 1):
        if pos >= len(buf):
            return {}
        nxt = buf.find(b"\n", pos)
        nxt = len(buf) if nxt == -1 else nxt
        text = _head_text(buf, pos, nxt)
        pos = nxt + 1
        if rank is not None:
            r = _line_rank(text)
            if r is not None and r != rank:
                continue
        body = strip_prefixes(text)
        if base:
            if body[:base].strip():  # less indented than the header: the block ended
                return {}
            body = body[base:]
        fm = _FRAME.match(body)
        if fm:
            frames.append(f"{fm.group(1)[-120:]}:{fm.group(2)[:60]}")
        if not body.strip() or body[:1] in (" ", "\t") or body.startswith(_TB_SKIP):
            continue
        m = _EXC_LINE.match(body)
        if m:
            return {"exception": m.group(1), "message": m.group(2)[:500], "exception_line": tb_line + k,
                    "exception_text": text, "frames": list(frames)}
        return {}
    return {}


def _cloud_entry(buf: bytes, start: int, end: int) -> dict:
    """Task name and timestamp of the Cloud Logging entry that holds this line (JSONL or pretty JSON)."""
    line = buf[start:end].strip().rstrip(b",")
    obj = None
    if line.startswith(b"{") and line.endswith(b"}"):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
    if obj is None:
        s = buf.rfind(b"\n  {", max(0, start - (1 << 20)), start + 1)
        e = buf.find(b"\n  }", end)
        if s != -1 and e != -1:
            try:
                obj = json.loads(buf[s + 1: e + 4])
            except ValueError:
                obj = None
    if not isinstance(obj, dict):
        return {}
    out = {}
    task = _str_at(obj, "resource", "labels", "task_name") or _str_at(obj, "labels", "task_name")
    if task:
        out["task_name"] = task[:200]
    ts = obj.get("timestamp")
    if isinstance(ts, str) and len(ts) < 64:
        st = parse_stamp(ts)
        if st:
            out["time"] = st
    return out


def _str_at(obj, *keys) -> str | None:
    """obj[k1][k2]... when every step is a dict and the value a string; None otherwise. A Cloud Logging export
    edited or produced by another tool may carry numbers, lists or null where the LogEntry schema has strings
    (resource: null, task_name: 5): what has the expected type is read, the rest is not."""
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj if isinstance(obj, str) else None
