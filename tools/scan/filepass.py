"""One streaming pass over one source: catalog hits, line count, rank labels, first/last times, last lines.

Why per-file and picklable: the scan forks worker processes over batches of files (PERF.md: two workers on two
cores, batches of tens of MB), so everything a file yields must travel back as plain data. Memory is bounded by
the read chunk (64 MiB, newline-aligned) plus capped hit lists: per (pattern, rank) the first and last
KEEP hits are kept in full and the rest are only counted (tools.scan.keeper); the caps are reported, never silent.

Python runs only on hit lines (thousands), never per line of the file; the per-line work (matching, line
counting, rank-label counting) is done by Hyperscan and by C-level `bytes` methods over whole buffers.

The pass knows no source. What a source does on a hit beyond its pattern's fields is the source's hook, declared
beside its patterns (tools.sources.pattern.Hook, `HOOKS` by pattern id, `KIND_HOOKS` by file kind) and called
here: on a kept hit (its time and node read), or on every hit for a hook that counts them all. A hook costs only
per hit of its own pattern, never per line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks, newlines
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.lines.attribution import Attribution, note_local_rank
from trainlog_debugger.tools.lines.timestamps import Stamp
from trainlog_debugger.tools.ranks import MAX_DIGITS, MAX_RANKS, plausible_rank
from trainlog_debugger.tools.scan.keeper import HitKeeper
from trainlog_debugger.tools.scan.labels import (FAST_RANK, SRUN_LABEL, bounded_attribution as attribute_line, c10_attribution,
                                                 bounded_path_hint as attribute_path, cr_lines, rank_labels,
                                                 srun_labelled)
from trainlog_debugger.tools.scan.longline import LINE_CAP, SHOW, match_long_line
from trainlog_debugger.tools.scan.nearby import (bracketed, decode, forget_lines, line_rank, next_stamp,
                                                 previous_stamp, stamp)
from trainlog_debugger.tools.scan.result import FileScan, Hit
from trainlog_debugger.tools.scan.tail import read_tail
from trainlog_debugger.tools.sources import declared, resolve
from trainlog_debugger.tools.sources.nccl.format import HOST_PID
from trainlog_debugger.tools.sources.pattern import IMPLAUSIBLE, HitContext, Hook, Pattern

__all__ = ["FileScanner", "forget_lines", "LINE_CAP", "SHOW"]



HEAD = 64 << 10
HEAD_LINES = 200  # the file's first time is looked for in its first lines
SRUN_LINES = 50  # srun_labelled's sample
TAIL = 1 << 20
MAX_LOOKBACKS = 2000  # per buffer: bounded work even when thousands of untimed lines match
MAX_CLAIM_NOTES = 5  # implausible claims noted per file (each with its line); the first ones tell the story

_ROLE_RANK = re.compile(rb"\[[A-Za-z_]+(\d{1,7})\]:\[rank(\d{1,7})\]:")

_FAST_RANK = FAST_RANK  # the name the scan's tests know it by (it lives in tools.scan.labels now)

Run = Callable[[HitContext], None]


def head_lines(buf: bytes, end: int, n: int):
    """The first `n` pieces of `buf[:end].split(b"\\n")`, one at a time (the caller mostly stops at the first few)."""
    pos, find = 0, buf.find
    for _ in range(n):
        e = find(b"\n", pos, end)
        if e == -1:
            yield buf[pos:end]
            return
        yield buf[pos:e]
        pos = e + 1


def declared_hooks(name: str) -> dict[str, list[Hook]]:
    """Every hook the sources declare under `name` (HOOKS, KIND_HOOKS), by the key it is declared for, in registry
    order."""
    out: dict[str, list[Hook]] = {}
    for _src, table in declared(name):
        for key, hook in cast("dict[str, Hook]", table).items():
            out.setdefault(key, []).append(hook)
    return out


def _runs(hooks: list[Hook]) -> list[Run]:
    return [h.run if callable(h.run) else cast(Run, resolve(h.run)) for h in hooks]


class FileScanner:
    def __init__(self, engine: Any):
        self.engine = engine
        self.patterns: list[Pattern] = engine.patterns
        self._levels = [int(p.fallback) for p in self.patterns]  # Pattern.fallback: 0 specific, 1, 2 last resort
        ids = {p.id for p in self.patterns}
        hooks = {pid: hs for pid, hs in declared_hooks("HOOKS").items() if pid in ids}
        # on a kept hit: every hook of its pattern; on a repeat only counted: the `every` ones; when a repeat left in
        # the ring is finished into a kept hit: the others (the `every` ones saw it when it was read)
        self._on_hit = {pid: _runs(hs) for pid, hs in hooks.items()}
        self._on_repeat = {pid: _runs([h for h in hs if h.every]) for pid, hs in hooks.items() if any(h.every for h in hs)}
        self._on_finish = {pid: _runs([h for h in hs if not h.every]) for pid, hs in hooks.items()
                           if not all(h.every for h in hs)}
        self._kind_hooks = {kind: _runs(hs) for kind, hs in declared_hooks("KIND_HOOKS").items()}
        self._final = False  # the buffer being read is the file's last (HitContext.final)
        # patterns whose first few hits are too few (KEEP_FIRST: pattern id prefix → first hits kept)
        self._more_first = [(prefix, n) for _src, table in declared("KEEP_FIRST")
                            for prefix, n in cast("dict[str, int]", table).items()]
        self._on_line: list[Run] = []
        self._nexts: dict = {}
        self.whole: bytes | None = None

    # -- public -------------------------------------------------------------------------------------------
    def scan(self, rel: str, kind: str, size: int, stream: Any, sized: bool = True) -> FileScan:
        """`sized`: `size` is the exact byte count of `stream` (plain files), so reads can be sized to the file:
        `read(64 MiB)` on a 1 MiB file allocates and page-faults 64 MiB (PERF.md pitfall 1)."""
        hint = attribute_path(rel)
        fs = FileScan(rel=rel, kind=kind, size=size,
                      hint={k: v for k in hint.__slots__ if (v := getattr(hint, k)) is not None})  # asdict: 0.1 ms
        self._hint = hint
        self._on_line = self._kind_hooks.get(kind, [])
        self.whole = None  # the file's bytes when one buffer held them all (for a reader that shares the pass)
        pieces = 0
        keeper = HitKeeper(self._more_first)
        base_line = 0
        base_off = 0
        buf = b""
        tail, tail_line, tail_nl, tail_cut = b"", 0, 0, False
        srun = False
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
                self._final = ch.eof or (sized and base_off + len(buf) >= size)
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
        read_tail(fs, tail, tail_line, tail_nl, tail_cut)
        if hint.rank is None:
            self._one_process_file(fs)
        self._file_nodes(fs)
        if hint.rank is not None:
            fs.ranks.add(hint.rank)
        return fs

    # -- pieces -------------------------------------------------------------------------------------------
    def _head(self, fs: FileScan, buf: bytes) -> bool:
        """First timestamp of the file (in its first HEAD_LINES lines, within HEAD bytes), and whether lines carry
        srun `--label` task prefixes (its first SRUN_LINES). Why line by line with `find`: the time is nearly always
        on one of the first few lines, and splitting the whole 64 KiB head (a copy and 200 line objects) cost more
        than the rest of the head's work on a 128 KiB rank log."""
        end = min(len(buf), HEAD)
        for i, raw in enumerate(head_lines(buf, end, HEAD_LINES)):
            st = stamp(decode(raw)) if raw else None
            if st is not None and st.uptime_s is None:
                fs.first_time, fs.first_time_line = st, i + 1
                break
        pos = 0
        for _ in range(SRUN_LINES):  # the SRUN_LINES-th newline, if the head has that many
            pos = buf.find(b"\n", pos, end) + 1
            if not pos:
                break
        return srun_labelled(buf[:pos - 1 if pos else end].split(b"\n"))

    def _labels(self, fs: FileScan, buf: bytes, srun: bool) -> None:
        """Every rank that has a line here, exactly, without a per-line loop (tools.scan.engine.rank_labels: one pass).
        A file whose NAME states its rank (rank_3.log, rank3.out) is that rank's log: its labels are read in the
        head only, which saves a full pass over per-rank layouts (the bulk of big bundles)."""
        named = self._hint.rank
        head = buf[:HEAD]  # one copy of the head for both tests (none when the buffer is no longer)
        found = rank_labels(head if named is not None else buf, fs.ranks | {named} if named is not None else fs.ranks)
        fs.ranks.update(found)
        if srun:
            fs.ranks.update(r for r in map(int, set(SRUN_LABEL.findall(buf))) if plausible_rank(r))
        if found and b"]:[rank" in head:  # `[default1]:[rank5]:` states local 1 = rank 5
            for lr, r in sorted(set(_ROLE_RANK.findall(head))):
                if plausible_rank(int(lr)) and plausible_rank(int(r)):
                    note_local_rank(fs.local_to_rank, int(lr), int(r))

    def _hits(self, fs: FileScan, keeper: HitKeeper, buf: bytes, base_line: int, base_off: int) -> tuple[int, int]:
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
        self._nexts = {}  # what this buffer's forward searches for a time found (nearby.next_stamp)
        pats, find, fast_rank = self.patterns, buf.find, FAST_RANK.match
        on_hit, on_repeat = self._on_hit, self._on_repeat
        matched: list[Pattern]
        for start in sorted(by_line):  # locals above and the one-pattern path below: this loop runs per hit line
            line_no = prev_line + newlines(buf, prev_start, start)
            prev_start, prev_line = start, line_no
            end = find(b"\n", start)
            end = len(buf) if end == -1 else end
            idxs = by_line[start]
            if end - start > LINE_CAP:
                text, matched = match_long_line(pats, buf, start, end, sorted(set(idxs)))
                if not any("matched in pieces" in n for n in fs.notes):
                    fs.notes.append(f"line {line_no} has {end - start:,} bytes: matched in pieces of "
                                    f"{LINE_CAP >> 20} MiB and shown truncated")
            else:
                text = buf[start:end].decode("utf-8", "replace").rstrip("\r")  # as decode
                if len(idxs) == 1:
                    p = pats[idxs[0]]
                    matched = [p] if p._rx.search(text) is not None else []
                else:
                    # specific patterns before fallbacks before last resorts (Pattern.fallback): a level is verified
                    # only when no pattern of a more specific one matched, since its matches would be dropped (the
                    # last resort's precise regex then runs on few of a crash's lines, not on every `Error` line)
                    # A job fact (tier 0: `world_size=8` inside a store-barrier timeout) explains no failure: it
                    # is kept and the fallbacks after it are still tried (it hid the line's RuntimeError from every
                    # rule); not the last resort (an `error_file: .../error.json` report field is no error line)
                    uniq, levels, matched = sorted(set(idxs)), self._levels, []
                    for lv in sorted({levels[i] for i in uniq}):
                        if matched and lv >= 2:
                            break
                        got = [pats[i] for i in uniq if levels[i] == lv and pats[i].match(text)]
                        matched += got
                        if any(p.tier for p in got):
                            break
            if len(matched) > 1:  # specific patterns before fallbacks before last resorts (Pattern.fallback)
                least = min((p.fallback for p in matched if p.tier), default=0)
                matched = [p for p in matched if not p.tier or p.fallback == least]
            if not matched:
                continue
            # The rank decides whether the hit is kept; a line that opens with c10's `[rankN]:` (after at most a
            # torchrun role label) has rank N whatever follows (attribution takes the first `[rankN]:` wrapper
            # before any other source), so most repeats, which are only counted, skip attribution (~10 µs).
            fast = fast_rank(text)
            attr = None
            if fast is not None and int(fast.group(1)) <= MAX_RANKS:  # plausible_rank: the regex has no sign
                rank: int | None = int(fast.group(1))
            else:
                attr = attribute_line(text)
                rank = self._rank_of(fs, attr)
            # The time (parse_stamp, ~70 µs, and a look back for untimed lines), the node, and the facts only for
            # hits that are kept: the first few per (pattern, rank) now, the ring's newest few when the buffer is
            # done (finish below). A hook that counts every hit (Hook.every) gets the facts of every hit.
            counts, limit = keeper.counts, keeper.first_limit
            if (counts.get((matched[0].id, rank), 0) >= limit(matched[0].id) if len(matched) == 1 else
                    all(counts.get((p.id, rank), 0) >= limit(p.id) for p in matched)):
                # facts (and a note of an implausible claim in them) only for repeats still kept when the buffer
                # ends: a repeat pushed out of the ring has its facts used nowhere, so it has no claim to ignore
                for p in matched:
                    facts = None
                    runs = on_repeat.get(p.id)
                    if runs:
                        facts = self._facts(fs, p, text, line_no)
                        ctx = HitContext(buf, start, end, line_no, text, rank,
                                         attr.rank if attr is not None else rank, facts, fs, line_rank,
                                         final=self._final)
                        for run in runs:
                            run(ctx)
                    keeper.add_unfinished((p.id, rank), (p, start, end, line_no, text, rank, facts, matched))
                continue
            if attr is None:  # a `[rankN]:` line: c10's own log lines need no attribution (labels.c10_attribution)
                attr = c10_attribution(text) or attribute_line(text)
            fatal = any(p.tier in (1, 2) for p in matched)
            where = (start, end, line_no, text, rank, attr.rank, fatal, attr.node or self._hint.node)
            time, node = self._when(fs, buf, where, budget)
            local = attr.local_rank if attr.local_rank is not None else self._hint.local_rank
            for p in matched:
                facts = self._facts(fs, p, text, line_no)
                runs = on_hit.get(p.id)
                if runs:
                    ctx = HitContext(buf, start, end, line_no, text, rank, attr.rank, facts, fs, line_rank, time, node,
                                     self._final)
                    for run in runs:
                        run(ctx)
                keeper.add(Hit(p.id, line_no, base_off + start, text, rank, local, node, time, facts))
        if keeper.unfinished:
            keeper.finish(self._finisher(fs, buf, base_off, budget))
        return prev_start, prev_line - base_line - 1

    def _finisher(self, fs: FileScan, buf: bytes, base_off: int, budget: list[int]) -> Callable[[tuple], Hit]:
        """What makes a ring entry left at the end of a buffer into a kept hit: its line's attribution and time
        (once per line, whichever of its patterns are kept), its facts, and the hooks that had not seen it."""
        when: dict[int, tuple[Attribution, tuple[Stamp | None, str | None]]] = {}
        on_finish = self._on_finish

        def done(e: tuple) -> Hit:
            p, start, end, line_no, text, rank, facts, matched = e
            got = when.get(start)
            if got is None:
                a = c10_attribution(text) or attribute_line(text)
                fatal = any(q.tier in (1, 2) for q in matched)
                where = (start, end, line_no, text, rank, a.rank, fatal, a.node or self._hint.node)
                got = when[start] = (a, self._when(fs, buf, where, budget))
            a, (time, node) = got
            if facts is None:
                facts = self._facts(fs, p, text, line_no)
            runs = on_finish.get(p.id)
            if runs:
                ctx = HitContext(buf, start, end, line_no, text, rank, a.rank, facts, fs, line_rank, time, node,
                                 self._final)
                for run in runs:
                    run(ctx)
            local = a.local_rank if a.local_rank is not None else self._hint.local_rank
            return Hit(p.id, line_no, base_off + start, text, rank, local, node, time, facts)
        return done

    def _rank_of(self, fs: FileScan, attr: Attribution) -> int | None:
        """A hit's rank: the line's own, else the file name's, else the file's mapping of its local rank."""
        rank = attr.rank if attr.rank is not None else self._hint.rank
        if rank is None and attr.local_rank is not None and fs.local_to_rank.get(attr.local_rank, -1) >= 0:
            rank = fs.local_to_rank[attr.local_rank]
        return rank

    @staticmethod
    def _facts(fs: FileScan, p: Pattern, text: str, line_no: int) -> dict:
        """A kept hit's typed facts; a number beyond its bound is noted (the first few per file), not used."""
        facts = p.extract(text)
        if IMPLAUSIBLE in facts and sum(n.count("implausible claim") for n in fs.notes) < MAX_CLAIM_NOTES:
            fs.notes.append(f"line {line_no}: implausible claim ignored ({', '.join(facts[IMPLAUSIBLE])}; "
                            f"bounds: {MAX_RANKS:,} ranks, {MAX_DIGITS} digits)")
        return facts

    def _when(self, fs: FileScan, buf: bytes, where: tuple, budget: list[int]) -> tuple[Stamp | None, str | None]:
        """(time, node) of a kept hit's line: its own stamp, else (fatal tiers only, within MAX_LOOKBACKS per
        buffer) the previous timed line of the same rank when the next one is close after it; then the hooks of
        the file's kind, which may fill what the line does not state (a Cloud Logging entry's task and time)."""
        start, end, line_no, text, rank, attr_rank, fatal, node = where
        st = stamp(text)
        inferred_from = None
        if st is None and budget[0] < MAX_LOOKBACKS and fatal:
            budget[0] += 1
            st, inferred_from = previous_stamp(buf, start, line_no, attr_rank)
            if st is not None and not bracketed(st, next_stamp(buf, end, attr_rank, self._nexts)):
                st, inferred_from = None, None
        time = st
        if time is not None and inferred_from:  # a traceback line has no time of its own
            time = time.with_meta(inferred_from_line=inferred_from)
        if self._on_line:
            ctx = HitContext(buf, start, end, line_no, text, rank, attr_rank, {}, fs, line_rank, time, node,
                             self._final)
            for run in self._on_line:
                run(ctx)
            time, node = ctx.time, ctx.node
        return time, node

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
        moved: dict[tuple[str, int], int] = {}
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

    @staticmethod
    def _one_process_file(fs: FileScan) -> None:
        """A file that no line's prefix ranks (srun -o out-%t.log, a per-process log of python started by the
        scheduler) but where one process, one host:pid, printed NCCL's communicator init lines: its rank in the
        largest of them (the world's) is the rank of every line of the file. Two processes' init lines, or any
        line ranked otherwise, and the file stays as it is: one console of many ranks is never given one rank."""
        if any(h.rank is not None or h.local_rank is not None for h in fs.hits):
            return
        inits = [h for h in fs.hits if h.pattern == "nccl.comm_init"]
        if len(inits) < fs.counts.get(("nccl.comm_init", None), 0):  # some were only counted: not all processes seen
            return
        procs = {(m.group("host"), m.group("pid")) for h in inits if (m := HOST_PID.search(h.text))}
        if not inits or len(procs) != 1:
            return
        most = max(h.fields.get("nranks") or 0 for h in inits)
        said = {h.fields.get("comm_rank") for h in inits if (h.fields.get("nranks") or 0) == most}
        rank = next(iter(said)) if len(said) == 1 else None  # one process has one rank in one communicator
        if not isinstance(rank, int) or not plausible_rank(rank):
            return
        for h in fs.hits:
            fs.reattribute(h, rank)
        for key in [k for k in fs.counts if k[1] is None]:  # the counted repeats are the same process's
            fs.counts[(key[0], rank)] = fs.counts.get((key[0], rank), 0) + fs.counts.pop(key)
        if None in fs.last_lines:
            fs.last_lines[rank] = fs.last_lines.pop(None)
        if None in fs.retries:
            fs.retries[rank] = fs.retries.pop(None)
        fs.ranks.add(rank)

    @staticmethod
    def _file_nodes(fs: FileScan) -> None:
        """A file whose lines name exactly one host (NCCL `host:pid:tid`, pdsh) belongs to that node."""
        nodes = {h.node for h in fs.hits if h.node}
        fs.nodes = nodes
        if len(nodes) == 1:
            node = next(iter(nodes))
            for h in fs.hits:
                if h.node is None:
                    h.node = node
