"""Reading step-time lines: one streaming pass per source → one StepSeries per (rank, metric, format), plus the
Megatron timer sums and the job facts (world size, pipeline size) the analysis needs. The line shapes are in
tools/steps/formats.py, timer blocks in tools/steps/timers.py.

How it stays fast: no per-line Python. Each 32 MiB newline-aligned buffer is searched with compiled bytes regexes
that begin with a literal, so sre's literal-prefix scan does the walking at GB/s and Python runs per MATCH only (the
step lines themselves). Rank labels are resolved per buffer with two `bytes.count`s when a file holds one rank, per
match otherwise. Series are array('q')/array('d'); offsets are kept so that only the few points cited as evidence
are located again (tools/steps/evidence.py). Everything a file yields is plain data (FileOut), because
tools.steps.analyze.scan_steps runs files in forked workers. Throughput: see tests/steps/test_steps.py (`--bench`).
"""

from __future__ import annotations

import io
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from trainlog_debugger.tools.ranks import MAX_RANKS
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks
from trainlog_debugger.tools.scan.labels import bounded_path_hint as attribute_path, srun_labelled
from trainlog_debugger.tools.sources import patterns
from trainlog_debugger.tools.steps.formats import (
    GENERIC_STEP,
    GENERIC_THROUGHPUT,
    GENERIC_TIME,
    GLOBAL_STEP,
    HF_LOSS,
    ITERATION_IN,
    MEGATRON_LINE,
    MEGATRON_TRAINING,
    NAN,
    NEMO_LOSS,
    PIPELINE,
    RANK_LABEL,
    SRUN_LABEL,
    STAMP,
    TIMER_HEADER,
    TIMER_LINE,
    TRAIN_STEP,
    WORD_BYTES,
    WORLD,
    epoch,
)
from trainlog_debugger.tools.steps.report import StepSeries
from trainlog_debugger.tools.steps.timers import block_regions, keep_block_whole, parse_all_block, timer_kind

HEAD = 512 << 10                # job facts (world size, pipeline size) are looked for in a file's first 512 KiB
MAX_POINTS = 1_000_000          # per series; later points are counted, not kept (noted)


class _Build:
    """One series while it is read: flat arrays, not per-point objects (a file can hold a million points)."""

    __slots__ = ("its", "vals", "times", "offs", "dropped")

    def __init__(self):
        self.its, self.vals, self.times, self.offs = array("q"), array("d"), array("d"), array("q")
        self.dropped = 0

    def add(self, it: int, v: float, t: float, off: int) -> None:
        if self.its and self.its[-1] == it and self.offs[-1] != off:
            self.vals[-1], self.times[-1], self.offs[-1] = v, t, off   # a progress bar repeating its last step
        elif len(self.its) < MAX_POINTS:
            self.its.append(it)
            self.vals.append(v)
            self.times.append(t)
            self.offs.append(off)
        else:
            self.dropped += 1


@dataclass
class FileOut:
    """What one file yields, as plain data: it travels back from a forked worker."""

    idx: int
    rel: str
    bytes: int = 0
    series: list[StepSeries] = field(default_factory=list)
    timers: dict[str, dict[int, list[float]]] = field(default_factory=dict)  # all: name → rank → [sum, n]
    minmax: dict[str, list[float]] = field(default_factory=dict)            # name → [Σmin, Σmax, n]
    maxonly: dict[str, list[float]] = field(default_factory=dict)           # name → [Σmax, n]
    last_block: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)  # kind → (header, name → line)
    world: tuple[int, int] | None = None        # (value, line offset)
    pp: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None


class FileSteps:
    """Streams one source: per buffer, one literal-prefixed regex pass per format; Python only on matches."""

    def __init__(self, idx: int, src):
        hint = attribute_path(src.rel)
        self.out = FileOut(idx, src.rel)
        self.hint_rank, self.node = hint.rank, hint.node
        self.series: dict[tuple[int | None, str, str], _Build] = {}
        self.last_meg: tuple[int, int, float] | None = None    # (offset, iteration, time) of the latest one
        self.prev_meg: tuple[int, int, float] | None = None
        self.minutes: dict[bytes, float] = {}                  # 'YYYY-MM-DD HH:MM' → POSIX seconds
        self.labels: set[int] = set()
        self.srun = False
        self.block_no = 0
        self.assumed_unit = 0

    # -- reading ---------------------------------------------------------------------------------------------------
    def run(self, stream) -> FileOut:
        base, first = 0, True
        try:
            for ch in chunks(stream, CHUNK, align=keep_block_whole):
                buf = ch.buf
                if ch.cut_long_line:
                    self.out.notes.append(f"a line near byte {base} is longer than {CHUNK >> 20} MiB; "
                                          f"read in pieces")
                if first:
                    first = False
                    # the scan's own test, so the scan and the step reader agree on which files are srun-labelled
                    self.srun = srun_labelled(buf[:64 << 10].split(b"\n", 50))
                if base < HEAD:
                    self._facts(buf[:HEAD - base], base)
                self._chunk(buf, base)
                base += len(buf)
        except READ_ERRORS as exc:
            self.out.error = read_error_reason(exc)
        self.out.bytes = base
        return self.finish()

    def _facts(self, head: bytes, base: int) -> None:
        """World size and pipeline size, stated once per job (rank 0's banner and argument dump): a process that
        has found both stops looking in its other files."""
        out = self.out
        if _FACTS_FOUND[0]:
            return
        for attr, rx, lits in (("world", WORLD, (b"world size", b"world_size")),
                               ("pp", PIPELINE, (b"pipeline-model-parallel size", b"pipeline_model_parallel_size"))):
            if getattr(out, attr) is not None:
                continue
            for lit in lits:
                i, tries = head.find(lit), 0
                while i >= 0 and tries < 20 and getattr(out, attr) is None:
                    m = rx.search(head, max(0, i - 8), i + 100)
                    if m:
                        ls = head.rfind(b"\n", 0, m.start()) + 1
                        n = int(next(g for g in m.groups() if g))
                        if 0 < n <= MAX_RANKS:  # a larger claim sizes nothing (tools.ranks)
                            setattr(out, attr, (n, base + ls))
                    i, tries = head.find(lit, i + 1), tries + 1
        _FACTS_FOUND[0] = out.world is not None and out.pp is not None

    # -- one buffer ------------------------------------------------------------------------------------------------
    def _chunk(self, buf: bytes, base: int) -> None:
        fixed, per_line = self._rank_mode(buf)
        self.prev_meg = self.last_meg        # the latest Megatron line of the EARLIER buffers
        if b"elapsed time per iteration (ms): " in buf:
            self._megatron(buf, base, fixed, per_line)
        if b" across ranks (ms):" in buf:
            self._timer_blocks(buf, base)
        if b"train_step_timing in s" in buf:
            self._train_step(buf, base, fixed, per_line)
        if b"{'loss': " in buf:
            self._losses(buf, base, fixed, per_line)
        self._generic(buf, base, fixed, per_line)      # its literal 'tep' scans as fast as a gate would

    def _rank_mode(self, buf: bytes) -> tuple[int | None, bool]:
        """(the rank of every line, False) when the buffer's labels all name one rank, else (None, True): each match
        then reads its own line's label."""
        if self.srun:
            return None, True
        n = buf.count(b"[rank")
        if n == 0:
            return self._default(), False
        m = RANK_LABEL.search(buf)
        if m and buf.count(b"[rank%s]" % m.group(1)) == n:
            r = int(m.group(1))
            self.labels.add(r)
            return r, False
        return None, True

    def _default(self) -> int | None:
        if self.hint_rank is not None:
            return self.hint_rank
        return next(iter(self.labels)) if len(self.labels) == 1 else None

    def _rank_at(self, buf: bytes, ls: int, s: int) -> int | None:
        m = RANK_LABEL.search(buf, ls, s)
        if m:
            return int(m.group(1))
        if self.srun:
            m = SRUN_LABEL.match(buf, ls, s)
            if m:
                return int(m.group(1))
        return self.hint_rank

    def _add(self, rank, metric: str, fmt: str, it: int, v: float, t: float, off: int) -> None:
        b = self.series.get((rank, metric, fmt))
        if b is None:
            b = self.series[(rank, metric, fmt)] = _Build()
        b.add(it, v, t, off)

    def _meg_time(self, buf: bytes, s: int) -> float:
        """The ` [YYYY-MM-DD HH:MM:SS[.ffffff]] ` stamp right before `iteration` (FORMATS §7.3), by slicing."""
        if buf[s - 2:s] != b"] ":
            return NAN
        j = s - 29 if buf[s - 29:s - 28] == b"[" else s - 22 if buf[s - 22:s - 21] == b"[" else buf.rfind(
            b"[", max(0, s - 40), s)
        if j < 0:
            return NAN
        key = buf[j + 1:j + 17]
        t = self.minutes.get(key)
        if t is None:
            m = STAMP.match(buf, j + 1, s - 2)
            t = self.minutes[key] = epoch(m) - float(m.group(4).replace(b",", b".")) if m else NAN
        try:
            return t + float(buf[j + 18:s - 2])
        except ValueError:
            return NAN

    def _megatron(self, buf: bytes, base: int, fixed, per_line: bool) -> None:
        """The hot loop (35 % of a Megatron bundle's lines can be these): per match only what the point needs;
        offsets are the match's own (the line start is found again only for cited points)."""
        when = self._meg_time
        m = None
        find = buf.find
        if per_line:
            rfind = buf.rfind
            for m in MEGATRON_LINE.finditer(buf):
                s = m.start()
                it_b, ms_b = m.groups()
                rank, it, t = self._rank_at(buf, rfind(b"\n", 0, s) + 1, s), int(it_b), when(buf, s)
                self._add(rank, "iteration_ms", "megatron", it, float(ms_b), t, base + s)
                e = m.end()
                j = find(b" loss: ", e, find(b"\n", e) % (len(buf) + 1))
                if j >= 0:
                    for metric, v in _meg_training(buf, j):
                        self._add(rank, metric, "megatron", it, v, t, base + s)
        else:
            key = (fixed, "iteration_ms", "megatron")
            b = self.series.get(key) or self.series.setdefault(key, _Build())
            its, vals, times, offs = b.its.append, b.vals.append, b.times.append, b.offs.append
            minute = self.minutes.get
            # (the key, its length, the series it fills) for the loss, then the grad norm on the same line
            builds = [((fixed, metric, "megatron"), self.series.get((fixed, metric, "megatron")) or _Build(), k)
                      for k, metric in MEGATRON_TRAINING]
            probes = tuple((k, len(k), (bb.its.append, bb.vals.append, bb.times.append, bb.offs.append))
                           for _, bb, k in builds)
            n = len(buf) + 1
            for m in MEGATRON_LINE.finditer(buf):
                s = m.start()
                it_b, ms_b = m.groups()
                it = int(it_b)
                its(it)
                vals(float(ms_b))
                offs(base + s)
                # ' [YYYY-MM-DD HH:MM:SS.ffffff] iteration': the usual stamp read in place (else _meg_time)
                st = minute(buf[s - 28:s - 12]) if s >= 29 and buf[s - 29] == 91 and buf[s - 2] == 93 else None
                t = when(buf, s) if st is None else st + float(buf[s - 11:s - 2])
                times(t)
                # the loss and grad norm on the same line (formats.MEGATRON_TRAINING): C-speed finds per line, a value
                # parsed only where they are (_meg_training's reading, inlined: this loop runs per iteration line)
                j, eol = m.end(), find(b"\n", m.end()) % n
                for key_b, width, (a_it, a_v, a_t, a_o) in probes:
                    j = find(key_b, j, eol)
                    if j < 0:
                        break
                    end = find(b" ", j + width, eol)
                    try:
                        v = float(buf[j + width:eol if end < 0 else end])
                    except ValueError:
                        break
                    a_it(it)
                    a_v(v)
                    a_t(t)
                    a_o(base + s)
            for k, bb in [(k, bb) for k, bb, _ in builds] + [(key, b)]:
                if bb.its:
                    self.series[k] = bb
                if len(bb.its) > MAX_POINTS:
                    extra = len(bb.its) - MAX_POINTS
                    for arr in (bb.its, bb.vals, bb.times, bb.offs):
                        del arr[MAX_POINTS:]
                    bb.dropped += extra
        if m is not None:
            self.last_meg = (base + m.start(), int(m.group(1)), when(buf, m.start()))

    def _iteration_before(self, buf: bytes, base: int, ls: int) -> tuple[int, float] | None:
        """Iteration and time of the Megatron line that precedes a timer block (printed just before it)."""
        p = buf.rfind(b"elapsed time per iteration (ms): ", max(0, ls - (1 << 20)), ls)
        if p >= 0:
            m = MEGATRON_LINE.search(buf, buf.rfind(b"\n", 0, p) + 1, p + 64)
            if m:
                return int(m.group(1)), self._meg_time(buf, m.start())
        if self.prev_meg and base + ls - self.prev_meg[0] < (1 << 20):
            return self.prev_meg[1:]
        return None

    def _timer_blocks(self, buf: bytes, base: int) -> None:
        rfind = buf.rfind
        for h in TIMER_HEADER.finditer(buf):
            kind = timer_kind(buf, h.start())
            eol = buf.find(b"\n", h.end())
            if kind is None or eol < 0:
                continue
            ls = rfind(b"\n", 0, h.start()) + 1
            header = base + ls
            regions = block_regions(buf, eol + 1, kind, buf[ls:h.start()])
            if not regions:
                continue
            prev = self._iteration_before(buf, base, ls)
            if prev:
                it, t = prev
            else:
                self.block_no += 1
                it, t = self.block_no, NAN
            lines: dict[str, int] = {}
            if kind == "all":
                per = parse_all_block(buf, base, regions, lines, self.out.timers)
                fc, bc = per.get("forward-compute"), per.get("backward-compute")
                if fc and bc:
                    metric, vals = "compute_ms", {r: v + bc[r] for r, v in fc.items() if r in bc}
                elif per.get("forward-backward"):
                    metric, vals = "forward_backward_ms", per["forward-backward"]
                else:
                    metric, vals = "", {}  # neither timer that is read: nothing to add (the block is still noted)
                for r, v in vals.items():
                    self._add(r, metric, "megatron_timers", it, v, t, header)
            else:
                rx = TIMER_LINE[kind]
                acc = self.out.minmax if kind == "minmax" else self.out.maxonly
                for a, z in regions:
                    for m in rx.finditer(buf, a, z):
                        name = m.group(1).decode("ascii", "replace")
                        lines[name] = base + rfind(b"\n", 0, m.start()) + 1
                        e = acc.get(name)
                        if e is None:
                            e = acc[name] = [0.0] * (3 if kind == "minmax" else 2)
                        if kind == "minmax":
                            e[0] += float(m.group(2))
                            e[1] += float(m.group(3))
                        else:
                            e[0] += float(m.group(2))
                        e[-1] += 1
            self.out.last_block[kind] = (header, lines)

    def _train_step(self, buf: bytes, base: int, fixed, per_line: bool) -> None:
        rfind = buf.rfind
        for m in TRAIN_STEP.finditer(buf):
            s = m.start()
            ls = rfind(b"\n", 0, s) + 1
            seg = max(ls, rfind(b"\r", ls, s) + 1)
            g = GLOBAL_STEP.search(buf, seg, s)
            if g:
                it = int(g.group(1))
            else:
                g = ITERATION_IN.search(buf, seg, s)
                it = int(g.group(1) or g.group(2)) if g else -1
            st = STAMP.search(buf, ls, min(s, ls + 120))
            rank = self._rank_at(buf, ls, s) if per_line else fixed
            if it < 0:
                b = self.series.get((rank, "train_step_ms", "train_step_timing"))
                it = len(b.its) + 1 if b else 1
            t = epoch(st) if st else NAN
            self._add(rank, "train_step_ms", "train_step_timing", it, float(m.group(1)) * 1000.0, t, base + ls)
            # the loss on the same progress line (`reduced_train_loss=9.47`, before the timing in both NeMo shapes)
            lm = NEMO_LOSS.search(buf, seg, s)
            if lm:
                self._add(rank, "loss", "train_step_timing", it, _num(lm.group(1)), t, base + ls)

    def _losses(self, buf: bytes, base: int, fixed, per_line: bool) -> None:
        """The HF Trainer's logged dicts (`{'loss': 2.3164, 'grad_norm': 1.52, ...}`, numbered in file order) as the
        series `loss` / `grad_norm`. Megatron's and NeMo's losses are read in their step lines' own loops."""
        rfind = buf.rfind
        for m in HF_LOSS.finditer(buf):
            s = m.start()
            ls = rfind(b"\n", 0, s) + 1
            rank = self._rank_at(buf, ls, s) if per_line else fixed
            b = self.series.get((rank, "loss", "hf_trainer"))
            it = len(b.its) + 1 if b else 1
            st = STAMP.search(buf, ls, min(s, ls + 120))
            t = epoch(st) if st else NAN
            self._add(rank, "loss", "hf_trainer", it, _num(m.group(1)), t, base + ls)
            if m.group(2) is not None:
                self._add(rank, "grad_norm", "hf_trainer", it, _num(m.group(2)), t, base + ls)

    def _generic(self, buf: bytes, base: int, fixed, per_line: bool) -> None:
        rfind, find = buf.rfind, buf.find
        for m in GENERIC_STEP.finditer(buf):
            s = m.start()
            if s < 1 or buf[s - 1] not in b"sS" or (s >= 2 and buf[s - 2] in WORD_BYTES):
                continue
            e = find(b"\n", m.end())
            e = len(buf) if e < 0 else e
            ls = rfind(b"\n", 0, s) + 1
            if find(b"train_step_timing", ls, e) >= 0 or find(b"elapsed time per iteration", ls, e) >= 0:
                continue
            r_end = min(e, m.end() + 400)
            tm = GENERIC_TIME.search(buf, m.end(), r_end)
            metric, v = "step_ms", None
            if tm:
                g = tm.groupdict()
                if g["t"] is not None:
                    v = float(g["t"])
                    unit = (g["u"] or g["u1"] or b"").strip(b" ()_").lower()
                    if unit == b"ms":
                        pass
                    elif unit:
                        v *= 1000.0
                    else:
                        self.assumed_unit += 1
                        v = v * 1000.0 if v < 100 else v
                elif g["spi"] is not None:
                    v = float(g["spi"]) * 1000.0
                elif g["ips"] is not None:
                    ips = float(g["ips"])
                    v = 1000.0 / ips if ips > 0 else None
                else:
                    v = float(g["mspi"])
            else:
                for name, rx in GENERIC_THROUGHPUT:
                    tp = rx.search(buf, m.end(), r_end)
                    if tp:
                        metric, v = name, float(next(g for g in tp.groups() if g).replace(b",", b""))
                        break
            if v is None:
                continue
            st = STAMP.search(buf, ls, min(s, ls + 120))
            rank = self._rank_at(buf, ls, s) if per_line else fixed
            self._add(rank, metric, "generic", int(m.group(1)), v, epoch(st) if st else NAN, base + ls)

    def finish(self) -> FileOut:
        out = self.out
        default = self._default()
        for (rank, metric, fmt), b in self.series.items():
            if not b.its:
                continue
            r = default if rank is None and fmt != "megatron_timers" else rank
            out.series.append(StepSeries(r, self.node, b.its, b.vals, b.times, out.rel, metric, fmt, b.offs,
                                         b.dropped, out.idx))
            if b.dropped:
                out.notes.append(f"rank {r} {metric}: more than {MAX_POINTS:,} points; {b.dropped:,} later ones "
                                 f"counted only")
        if self.assumed_unit:
            out.notes.append(f"{self.assumed_unit:,} step line(s) state no time unit: read as seconds below 100, "
                             f"else ms")
        return out


def _meg_training(buf: bytes, j: int) -> list[tuple[str, float]]:
    """The loss and grad norm of the Megatron iteration line whose ` loss: ` is at `j` (formats.MEGATRON_TRAINING),
    for the per-line-rank path of _megatron."""
    out: list[tuple[str, float]] = []
    n = len(buf) + 1
    eol = buf.find(b"\n", j) % n
    for key, name in MEGATRON_TRAINING:
        j = buf.find(key, j, eol)
        if j < 0:
            break
        end = buf.find(b" ", j + len(key), eol)
        try:
            out.append((name, float(buf[j + len(key):eol if end < 0 else end])))
        except ValueError:
            break
    return out


def _num(b: bytes) -> float:
    """A logged value as a float: `nan`/`inf` stay non-finite (they are the finding), anything unreadable is NaN."""
    try:
        return float(b)
    except ValueError:
        return NAN


_FACTS_FOUND = [False]          # per process; reset by scan_steps before the workers fork


def reset_facts() -> None:
    """A new job: look for world and pipeline size again (call before the workers fork)."""
    _FACTS_FOUND[0] = False


def scan_sources(batch) -> list[FileOut]:
    """[(index in bundle.sources, Source)] → one FileOut each; a source that cannot be opened says why in `error`."""
    outs = []
    for idx, src in batch:
        fs = FileSteps(idx, src)
        try:
            with src.open() as stream:
                fo = fs.run(stream)
        except OSError as exc:
            fo = fs.finish()
            fo.error = read_error_reason(exc)
        outs.append(fo)
    return outs


@lru_cache(maxsize=1)
def _fatal_ids() -> frozenset[str]:
    return frozenset(p.id for p in patterns() if p.tier in (1, 2))


def read_in_scan(idx: int, src: Any, fs: Any, whole: bytes) -> FileOut | None:
    """The step reader as a reader that shares the scan's pass (tools.scan.driver.SharedReader): the FileOut of a
    file the scan just held whole in memory, read from those bytes (no second read), when the file has no fatal
    line (tiers 1-2: a crash, an error, the cascade after one). Why that test: `ask` needs step times only when the
    diagnosis finds no fault (was the job slow?); such a bundle has no fatal line in any file, so every file is read
    once, while a crashed or hung bundle (fatal lines in nearly every rank's file) pays almost nothing for it. Files
    not read here (fatal lines, several buffers, CR-only line ends) are read by tools.steps.analyze.scan_steps
    later, only if the diagnosis needs them. Each file looks for the job facts afresh (reset_facts), as on a
    cluster worker: the analysis takes each from the first file in bundle order. `fs`: the file's FileScan."""
    fatal = _fatal_ids()
    if any(pid in fatal for pid, _rank in fs.counts):
        return None
    reset_facts()
    return FileSteps(idx, src).run(io.BytesIO(whole))  # BytesIO shares the bytes: read(n >= size) returns them
