"""`debugger diff`: every line reduced to a template, then the templates that only a few ranks printed, or that a
few ranks did NOT print, with those ranks.

Why: an unknown failure mode on one rank out of 512 is invisible to a pattern catalog but obvious as a difference
("rank 17 printed `Timeout while fetching batch result at index <NUM>`, no one else did"; "511 ranks printed
`saving checkpoint ...`, rank 17 did not").

The pieces: tools/rankdiff/mask.py turns a line into its template (Drain3-style named masks; real lines and their
templates are in its docstring); this module reads each file and attributes its lines to ranks;
tools/rankdiff/report.py merges the per-file counts and picks the minority and missing templates.

Rank of a line: its own c10 `[rankN]:` label (or srun `N: ` task id in srun-labelled files, read with
tools.lines.attribution; a file is srun-labelled by tools.scan.labels' `srun_labelled`, the scan's own test); a torchrun
`[default1]:`-only line takes the global rank the same file states for local rank 1 (`[default1]:[rank5]:`, as
tools.scan.filepass does); lines with no label take the file's rank (`attribute_path`, else the file's single labelled
rank); lines with none of these are left out, and said so (`unattributed_files`, `notes`).

How it stays fast, with no per-line regex in Python: each 32 MiB newline-aligned buffer is digit-zeroed with ONE
`bytes.translate` (C), split on newlines and counted with `Counter` (C). The named masks then run once per DISTINCT
zeroed line through a per-worker cache: the zeroed key keeps every non-digit byte, so the template is a function of
the key, and `template_of(line)` and the buffer path agree by construction. Rank labels: a buffer whose `[rank`
labels all name one rank (two `bytes.count`s) needs nothing per line; buffers interleaving ranks (per-node SLURM
files, srun --label) get ONE `findall` yielding exactly one label per line, zipped with the keys. First occurrences:
`Counter` keeps first-occurrence order, so each new key's first line is a C-level `list.index` from the previous one
(one scan at most); its verbatim text is cut from the buffer by offset (translate keeps lengths). Files go to 2
forked workers in batches of ≥ 32 MB (tools.bundle.parallel), merged in the worker. Memory: the buffers, a capped key
cache, ≤ 20k templates per file and ≤ 200k overall (caps are said in `notes`), one rank bitset (a Python int) per
template.

Throughput on the 2-core project VM: see tests/rankdiff/test_rankdiff.py (`python tests/rankdiff/test_rankdiff.py --bench`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

from trainlog_debugger.tools.lines.attribution import note_local_rank
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks
from trainlog_debugger.tools.scan.labels import (bounded_attribution as attribute_line, bounded_path_hint as attribute_path,
                                                 srun_labelled)
from trainlog_debugger.tools.bundle.parallel import Remote, map_sources
from trainlog_debugger.tools.rankdiff.mask import MAX_TEMPLATE_BYTES, RANK_LABEL0, ZERO, template_of, template_of_key
from trainlog_debugger.tools.rankdiff.report import Batch, DiffResult, FileOut, TemplateDiff, merge_batch, merge_file, report

__all__ = ["TemplateDiff", "DiffResult", "template_of", "diff_bundle"]

MAX_FILE_TEMPLATES = 20_000     # distinct templates kept per file; later new ones are counted, not kept
MAX_KEY_CACHE = 300_000         # zeroed line → template, per worker
PARALLEL_MIN_FILES = 256        # fork the workers from this many files (or from tools.bundle.parallel.PARALLEL_MIN_BYTES)
SKIP_KINDS = frozenset({"fr_dump"})
DEFAULT = -1                    # rank slot of an unlabelled line: the file's rank, decided at the end of the file
LOCAL = -2                      # LOCAL - n: slot of a line labelled only with local rank n ('[default<n>]:')


# -- per-line rank labels -----------------------------------------------------------------------------------------
_RANK_LABEL = re.compile(rb"\[rank(\d{1,6})\]")  # rank digits bounded below tools.ranks.MAX_RANKS
# One match per line over b'\n' + buf: the first c10 '[rankN]:' within 160 bytes of the line start.
_LINE_LABEL = re.compile(rb"\n(?:[^\n]{0,160}?\[rank(\d{1,6})\]:)?")
# srun-labelled files: the whole wrapper prefix per line (' 3: ', ' 0: [default3]:', ' 3: [rank3]:'), read once per
# distinct prefix with tools.lines.attribution (a torchrun role after the srun label makes it a node index, not a rank).
_LINE_LABEL_SRUN = re.compile(rb"\n( {0,6}\d{1,7}: (?:\[[A-Za-z_][A-Za-z_]*\d+\]:)?(?:\[rank\d+\]:)?)?")
# torchrun --tee role files: (local rank of '[default3]:', c10 rank) per line.
_LINE_LABEL_ROLE = re.compile(rb"\n(?:\[(?!rank\d)[A-Za-z_][A-Za-z_]*(\d{1,6})\]:)?(?:[^\n]{0,160}?\[rank(\d{1,6})\]:)?")
_ROLE_HEAD = re.compile(rb"\n\[(?!rank\d)[A-Za-z_][A-Za-z_]*\d+\]:")


def _line_labels(rx: re.Pattern, buf: bytes) -> list:
    """One label per line of `buf` (b'', or a tuple of b'' for a multi-group `rx`, where none): the first line's
    from a small copy, the others from one findall whose matches each start at a newline (no copy of the buffer)."""
    first = rx.findall(b"\n" + buf[:256].split(b"\n", 1)[0])[0]  # one match: all after the '\n' is optional
    return [first] + rx.findall(buf)


# -- one file -----------------------------------------------------------------------------------------------------
class _FileDiff:
    """Streams one source: keys counted per chunk, templates per (template, rank slot), resolved at the end."""

    def __init__(self, idx: int, rel: str, cache: dict[bytes, str]):
        self.out = FileOut(idx, rel)
        self.cache = cache
        self.hint = attribute_path(rel).rank
        self.table: dict[tuple[str, int | None], list] = {}  # (t, slot) → [count, first_line, text]
        # zeroed key (per fixed slot) or (label, key) → its table entry; None for blank lines
        self.known: dict[object, dict] = {}
        self.over = [0, 0, ""]           # entry collecting the lines of templates beyond MAX_FILE_TEMPLATES
        self.labels: dict = {}            # raw label → slot
        self.explicit: set[int] = set()   # ranks named by labels in this file
        self.n_templates: set[str] = set()
        self.last: dict[int | None, tuple[int, str]] = {}   # slot → (line, text)
        self.srun = False
        self.roles = False                # torchrun '[default3]:' role prefixes: labels are (local, rank)
        self.local_map: dict[int, int] = {}   # local rank → global rank stated in this file (-1: ambiguous)
        self.locals_seen: set[int] = set()
        self.mixed = False                # a chunk of this file had several ranks' labels
        self.split_lines = False

    def template(self, key: bytes) -> str:
        t = self.cache.get(key)
        if t is None:
            t = template_of_key(key)
            if len(key) <= 4 * MAX_TEMPLATE_BYTES:
                if len(self.cache) >= MAX_KEY_CACHE:
                    self.cache.clear()
                self.cache[key] = t
        return t

    def slot(self, label) -> int | None:
        s = self.labels.get(label, 0)
        if s != 0 or label in self.labels:
            return s
        if isinstance(label, tuple):     # torchrun role files: (local rank, c10 rank)
            local, rank = label
            if local:
                self.locals_seen.add(int(local))
            if rank and local:           # '[default1]:[rank5]:' states local 1 = rank 5 for this file
                note_local_rank(self.local_map, int(local), int(rank))
            s = int(rank) if rank else (LOCAL - int(local) if local else DEFAULT)
        elif not label:
            s = DEFAULT
        elif self.srun:
            s = attribute_line(label.decode("latin-1") + "x").rank
        else:
            s = int(label)
        if s is not None and s >= 0:
            self.explicit.add(s)
        self.labels[label] = s
        return s

    def resolve(self, s: int | None, default: int | None) -> int | None:
        """Rank of a slot at the end of the file: DEFAULT → the file's rank; a local-only slot → the global rank
        this file states for that local rank ('[default1]:[rank5]:' elsewhere), else the file's rank when it has
        only that one local rank, else None."""
        if s is None or s >= 0:
            return s
        if s == DEFAULT:
            return default
        r = self.local_map.get(LOCAL - s)
        if r is not None:
            return r if r >= 0 else None
        return default if len(self.locals_seen) == 1 else None

    @staticmethod
    def fixed_slot(key: bytes, fixed: int | None) -> int | None:
        """Slot of a line in a chunk whose '[rank' labels all name rank `fixed`: `fixed` if the line carries a
        '[rankN]:' label, else DEFAULT (the file's rank, decided at the end of the file, as in a mixed chunk)."""
        if fixed is None or fixed == DEFAULT or b"[rank" not in key or not RANK_LABEL0.search(key):
            return DEFAULT if fixed is not None else None
        return fixed

    def run(self, stream) -> FileOut:
        """Read `stream` in CHUNK-sized newline-aligned buffers; a read error keeps what was read and says so."""
        base, ends_nl, first = 0, True, True
        try:
            for ch in chunks(stream, CHUNK):
                buf = ch.buf
                if ch.cut_long_line and not self.split_lines:
                    self.out.notes.append(f"line {base + 1} is longer than {CHUNK >> 20} MiB; read in pieces")
                    self.split_lines = True
                if first:
                    self.srun = srun_labelled(buf[:64 << 10].split(b"\n", 50))
                    self.roles = not self.srun and bool(_ROLE_HEAD.search(b"\n" + buf[:64 << 10]))
                    first = False
                base += self.chunk(buf, base)
                self.out.bytes += len(buf)
                ends_nl = buf.endswith(b"\n")
        except READ_ERRORS as exc:
            self.out.error = read_error_reason(exc)
        self.out.lines = base + (0 if ends_nl else 1)
        return self.finish()

    def chunk(self, buf: bytes, base: int) -> int:
        """Count the lines of one newline-aligned buffer; returns its number of newlines."""
        keys = buf.translate(ZERO).split(b"\n")
        n = len(keys)
        labels = None
        fixed: int | None = DEFAULT
        if self.srun:
            labels = _line_labels(_LINE_LABEL_SRUN, buf)
        elif self.roles:
            labels = _line_labels(_LINE_LABEL_ROLE, buf)
        elif b"[rank" in buf:
            if not self.mixed:   # one rank in all its labels? (head check first: saves two passes when mixed)
                head = set(_RANK_LABEL.findall(buf, 0, 1 << 16)) or {m.group(1) for m in [_RANK_LABEL.search(buf)] if m}
                if len(head) == 1:
                    r0 = next(iter(head))
                    if buf.count(b"[rank%s]" % r0) == buf.count(b"[rank"):
                        fixed = int(r0)
                        self.explicit.add(fixed)
            if fixed == DEFAULT:
                self.mixed = True
                labels = _line_labels(_LINE_LABEL, buf)
        if labels is not None and len(labels) != n:     # cannot happen; never mis-attribute if it does
            self.out.notes.append(f"rank labels not aligned with lines near line {base + 1}; chunk left unattributed")
            labels, fixed = None, None
        cnt: dict = Counter(keys) if labels is None else Counter(zip(labels, keys))
        known = self.known.setdefault("pairs" if labels is not None else fixed, {})
        table = self.table
        new: list = []
        for k, c in cnt.items():
            e = known.get(k)
            if e is None and k not in known:
                new.append(k)
            elif e is not None:
                e[0] += c
        if new:
            if sum(map(len, self.known.values())) > MAX_KEY_CACHE:
                for d in self.known.values():
                    d.clear()
            firsts = _Firsts(keys, labels)
            want: dict[int, list] = {}
            for k in new:
                if labels is None:
                    key, s = k, self.fixed_slot(k, fixed)
                else:
                    key, s = k[1], self.slot(k[0])
                t = self.template(key)
                if not t:
                    known[k] = None
                    continue
                i = firsts[k]
                e = table.get((t, s))
                if e is None:
                    if t not in self.n_templates:
                        if len(self.n_templates) >= MAX_FILE_TEMPLATES:
                            self.over[0] += cnt[k]
                            known[k] = self.over
                            continue
                        self.n_templates.add(t)
                    e = table[(t, s)] = [0, base + i + 1, None]
                    want[i] = e
                elif e[2] is None and base + i + 1 < e[1]:   # same chunk, earlier line
                    e[1] = base + i + 1
                    want[i] = e
                e[0] += cnt[k]
                known[k] = e
            if want:
                texts = _texts(buf, keys, want)
                for i, e in want.items():
                    if e[1] == base + i + 1:
                        e[2] = texts[i]
        self.last_lines(buf, keys, labels, fixed, base)
        return n - 1

    def last_lines(self, buf: bytes, keys: list[bytes], labels, fixed, base: int) -> None:
        n = len(keys)
        if labels is None:
            i, tail = n - 1, 0
            while i >= 0 and not keys[i].strip():
                tail += len(keys[i]) + 1
                i -= 1
            if i >= 0:
                end = len(buf) - tail          # tail: the bytes after line i, its newline included
                text = buf[end - len(keys[i]):end]
                self.last[self.fixed_slot(keys[i], fixed)] = (base + i + 1,
                                                              text.decode("utf-8", "replace").rstrip("\r"))
            return
        lasts = dict(zip(labels, range(n)))
        by_slot: dict = {}
        for lab, i in lasts.items():
            s = self.slot(lab)
            if keys[i].strip() and by_slot.get(s, -1) < i:
                by_slot[s] = i
        if by_slot:
            texts = _texts(buf, keys, by_slot.values())
            for s, i in by_slot.items():
                self.last[s] = (base + i + 1, texts[i])

    def finish(self) -> FileOut:
        out = self.out
        default = self.hint if self.hint is not None else (
            next(iter(self.explicit)) if len(self.explicit) == 1 else None)
        for (t, s), (c, line, text) in self.table.items():
            r = self.resolve(s, default)
            if r is None:
                out.unranked_lines += c
                continue
            out.ranks.add(r)
            e = out.templates.get(t)
            if e is None:
                out.templates[t] = [c, line, r, text, {r}]
            else:
                e[0] += c
                e[4].add(r)
                if line < e[1]:
                    e[1], e[2], e[3] = line, r, text
        for s, (line, text) in self.last.items():
            r = self.resolve(s, default)
            if r is not None and (r not in out.last or out.last[r][0] < line):
                out.last[r] = (line, text)
        if self.over[0]:
            out.notes.append(f"more than {MAX_FILE_TEMPLATES:,} distinct templates; {self.over[0]:,} lines with "
                             f"templates beyond that cap were not compared")
        return out


class _Firsts:
    """First line index of each NEW key (or (label, key) pair) of a chunk, asked in first-occurrence order (the order
    `Counter` keeps): each lookup is a C-level `list.index` from the previous answer, so a chunk costs at most one
    scan, and usually a short one (new templates show up early). A pair hops over its key's lines with other labels;
    past a hop budget, the exact per-pair dict is built once for the chunk."""

    HOPS = 4096

    def __init__(self, keys: list[bytes], labels: list[bytes] | None):
        self.keys, self.labels = keys, labels
        self.pos = 0
        self.hops = 0
        self.exact: dict | None = None

    def __getitem__(self, k) -> int:
        if self.exact is not None:
            return self.exact[k]
        index = self.keys.index
        if self.labels is None:
            i = self.pos = index(k, self.pos)
            return i
        lab, key = k
        labels = self.labels
        i = index(key, self.pos)
        while labels[i] != lab:
            self.hops += 1
            if self.hops > self.HOPS:
                seq = list(zip(labels, self.keys))
                self.exact = dict(zip(reversed(seq), range(len(seq) - 1, -1, -1)))
                return self.exact[k]
            i = index(key, i + 1)
        self.pos = i
        return i


def _texts(buf: bytes, keys: list[bytes], idxs) -> dict[int, str]:
    """Verbatim text (trailing '\\r' dropped, as tools.scan.filepass does) of lines `idxs` of `buf`, found by offset:
    the digit-zeroed keys have the lengths of the original lines."""
    out: dict[int, str] = {}
    pos = prev = 0
    for i in sorted(idxs):
        if i > prev:
            pos += sum(map(len, keys[prev:i])) + (i - prev)
            prev = i
        out[i] = buf[pos:pos + len(keys[i])].decode("utf-8", "replace").rstrip("\r")
    return out


# -- batches (forked workers) -------------------------------------------------------------------------------------
_CACHE: dict[bytes, str] = {}


def _diff_sources(batch) -> Batch:
    agg = Batch()
    for idx, src in batch:
        fd = _FileDiff(idx, src.rel, _CACHE)
        try:
            with src.open() as stream:
                fo = fd.run(stream)
        except OSError as exc:        # open() itself failed
            fo = fd.finish()
            fo.error = read_error_reason(exc)
        merge_file(agg, fo)
    return agg


# -- the bundle ---------------------------------------------------------------------------------------------------
def diff_bundle(bundle, *, minority: float = 0.5, max_report: int = 50, workers: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> DiffResult:
    """Templates present in fewer than `minority` × N ranks ('only', ranks that have it) and templates present in at
    least half but not all ranks ('missing', ranks that lack it); N = ranks seen. Each list is ordered by how few
    ranks are involved; 'only' then puts error-looking templates (error, fail, timeout, traceback, glog E/W/F, ...)
    first, then templates of ranks that print few single-rank templates before those of chatty logging ranks (rank
    0, the last pipeline stage); both then by count (most lines first). At most `max_report` each, the cut said in
    `notes`. Templates every rank printed are not reported."""
    t0 = time.perf_counter()
    items = [(i, s) for i, s in enumerate(bundle.sources) if s.kind not in SKIP_KINDS]
    notes: list[str] = []
    skipped_kinds = [s.rel for s in bundle.sources if s.kind in SKIP_KINDS]
    if skipped_kinds:
        notes.append(f"{len(skipped_kinds)} flight-recorder dump(s) not diffed (binary): "
                     f"{', '.join(skipped_kinds[:5])}")
    agg = Batch()
    for b in map_sources(_diff_sources, items, workers=workers, progress=progress, min_files=PARALLEL_MIN_FILES,
                         remote=Remote(_diff_sources), private=getattr(bundle, "tmpdir", None), notes=notes):
        merge_batch(agg, b)
    res = report(bundle, agg, minority, max_report, notes)
    res.seconds = time.perf_counter() - t0
    return res
