"""Which ranks a file's lines name, and whether its lines carry srun `--label` task ids: the two label tests
every reader of a file shares (the scan, the rank diff, the step reader), so they agree on what a file is.

`[rankN]` labels come from c10's logging (`[rank3]:[E1105 ...`) and the excepthook; srun `--label` prefixes each
line with the task id (` 3: ...`), which tools.lines.attribution reads.
"""

from __future__ import annotations

import re
from dataclasses import replace

from trainlog_debugger.tools.lines.attribution import Attribution, attribute_line, c10_headed
from trainlog_debugger.tools.sources.paths import PathHint, attribute_path
from trainlog_debugger.tools.ranks import plausible_rank
from trainlog_debugger.tools.scan.engine import HyperscanEngine, _cached_db, _hs, thread_scratch

SRUN_LABEL = re.compile(rb"(?m)^ *(\d{1,7}): ")  # srun pads to digits(ntasks-1): 7 digits is 10^7 tasks
_NO_ATTRIBUTION = Attribution()
# A line that opens with c10's `[rankN]:`, after at most a torchrun role label (`[default3]:`): the rank that
# tools.lines.attribution gives it is N (the first `[rankN]:` wrapper outranks every other rank source), so the
# readers that need only a line's rank (the scan's repeats, the tail walk) skip attributing it (~10-30 µs a line).
FAST_RANK = re.compile(r"(?:\[(?!rank\d)[A-Za-z_]\w*?\d{1,7}\]:)?\[rank(\d{1,7})\]:")
_C10_ATTRS: dict[tuple[int, int | None], Attribution] = {}


def c10_attribution(text: str) -> Attribution | None:
    """The attribution of a c10 log line (`[default3]:[rank3]:[E1105 03:33:27.000023757 ProcessGroupNCCL.cpp:636]
    ...`: rank N from its `[rankN]:`, the local rank from its torchrun role label, no node), without attributing
    it; None for any other line (tools.lines.attribution.c10_headed says which), attributed as before. Why: a rank
    of a 10,000-rank cascade keeps ~40 such lines (the watchdog's report), each attributed at ~25 µs, a tenth of a
    per-node file's scan. Only the fields the scan reads are filled (rank, local rank, node)."""
    if (m := c10_headed(text)) is None:
        return None
    rank, local = int(m.group(2)), (int(m.group(1)) if m.group(1) is not None else None)
    if not plausible_rank(rank) or (local is not None and not plausible_rank(local)):
        return None
    key = (rank, local)
    got = _C10_ATTRS.get(key)
    if got is None:
        if len(_C10_ATTRS) >= 1 << 16:
            _C10_ATTRS.clear()
        got = _C10_ATTRS[key] = Attribution(rank=rank, local_rank=local)
    return got


def bounded_attribution(text: str) -> Attribution:
    """attribute_line with every number bounded (tools.ranks): a `[rank<5,000 digits>]` label would make int()
    raise, and a 4,000-digit one would become a rank that sizes per-rank lists. Such a line is left unattributed."""
    try:
        a = attribute_line(text)
    except (ValueError, OverflowError):
        return _NO_ATTRIBUTION
    if (a.rank is None or plausible_rank(a.rank)) and (a.local_rank is None or plausible_rank(a.local_rank)):
        return a
    return replace(a, rank=a.rank if plausible_rank(a.rank) else None,
                   local_rank=a.local_rank if plausible_rank(a.local_rank) else None)


def bounded_path_hint(rel: str) -> PathHint:
    """attribute_path with the rank numbers of a file name bounded the same way (`rank_<huge>.log`)."""
    try:
        h = attribute_path(rel)
    except (ValueError, OverflowError):
        return PathHint()
    if (h.rank is None or plausible_rank(h.rank)) and (h.local_rank is None or plausible_rank(h.local_rank)):
        return h
    return replace(h, rank=h.rank if plausible_rank(h.rank) else None,
                   local_rank=h.local_rank if plausible_rank(h.local_rank) else None)


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


def srun_labelled(head_lines: list[bytes]) -> bool:
    """Whether a file's lines carry srun `--label` task ids (' 3: '): at least 3, and at least half, of the first 50
    non-blank lines start with a label that tools.lines.attribution reads as srun's. One test for every reader of a file
    (tools.scan.summary, tools.rankdiff.analyze), so they agree on which files are srun-labelled. `head_lines`: the file's first
    lines, split on b'\\n'."""
    sample = head_lines[:50]
    candidates = [raw for raw in sample if SRUN_LABEL.match(raw)]  # cheap bytes test first
    if len(candidates) < 3:
        return False
    labelled = sum(1 for raw in candidates if "srun_label" in bounded_attribution(_decode(raw)).styles)
    return labelled >= max(3, len([x for x in sample if x.strip()]) // 2)


_RANK_LABEL = re.compile(rb"\[rank(\d{1,7})\]")  # a longer label is no rank (tools.ranks.MAX_RANKS)
LABEL_RANKS = 10000  # one literal per rank below this; bigger or zero-padded labels fall back to findall
COUNTED = 2  # known ranks counted label by label (rank_labels): one pass over the buffer each
_label_db = None


def rank_labels(buf: bytes, known: set[int] | None = None) -> set[int]:
    """The ranks of every `[rankN]` label in `buf`, exactly, in ONE pass whatever the number of ranks.

    Why not count each known label: that is one pass per rank (a per-node file of 8 ranks = 9 passes, a 240-rank
    srun output = 241). With Hyperscan: one literal per rank, each reported at most once (SINGLEMATCH), so a
    per-rank file costs one callback. Without it: count `[rank` and the known labels (exact for per-rank files)
    and `findall` only when they do not add up. `known`: ranks the file is known to hold (its name's, or those found
    in earlier buffers): when they are at most COUNTED and their labels account for every `[rank` in `buf`, a few
    `bytes.count`s answer with either engine (a third of the database scan's cost on a 64 KiB head: 0.1 ms of each
    128 KiB rank log at 4,096 ranks). Never for more: each count is a pass over `buf`."""
    if known and len(known) <= COUNTED:  # a file of one or two ranks: when every `[rank` opens one of theirs, done
        total = buf.count(b"[rank")  # counted once: no `[rank` at all answers here, without a separate `in` pass
        if not total:
            return set()
        n = {r: buf.count(b"[rank%d]" % r) for r in known}
        if sum(n.values()) == total:  # each `[rank` opens at most one label: these are all of them
            return {r for r, c in n.items() if c}
    elif b"[rank" not in buf:
        return set()
    if _hs is None:
        total = buf.count(b"[rank")
        known = _ints(_RANK_LABEL.findall(buf[: 64 << 10]))
        if sum(buf.count(b"[rank%d]" % r) for r in known) == total:
            return set(known)
        return _ints(_RANK_LABEL.findall(buf))
    db = label_db()
    seen: set[int] = set()
    scratch = thread_scratch(db)
    for base in range(0, len(buf), HyperscanEngine.MAX_BLOCK):
        db.scan(buf[base: base + HyperscanEngine.MAX_BLOCK], match_event_handler=lambda i, *_: seen.add(i),
                scratch=scratch)
    if LABEL_RANKS in seen:
        seen.discard(LABEL_RANKS)
        seen |= _ints(_RANK_LABEL.findall(buf))
    return seen


def label_db():
    """The label database (one literal per rank below LABEL_RANKS), loaded once per process (the scan loads it
    before its workers fork); None without Hyperscan."""
    global _label_db
    if _label_db is None and _hs is not None:
        exprs = [b"\\[rank%d\\]" % r for r in range(LABEL_RANKS)]
        exprs.append(rb"\[rank(?:0[0-9]+|[1-9][0-9]{4,})\]")
        _label_db = _cached_db(exprs, [_hs.HS_FLAG_SINGLEMATCH] * len(exprs))
    return _label_db


def _ints(labels) -> set[int]:
    """Distinct label numbers that are plausible ranks (at most 7 digits by the regex, at most MAX_RANKS)."""
    return {r for r in map(int, set(labels)) if plausible_rank(r)}


CR_PROBE = 64 << 10


class _Probed:
    """The probed first bytes handed back in front of the rest of the stream (streams need not support seek);
    with `cr`, every CR read as LF: the same length, so sizes and offsets stay true."""

    def __init__(self, stream, first: bytes, cr: bool):
        self._s, self._first, self._cr = stream, first, cr

    def read(self, n: int = -1) -> bytes:
        if self._first:  # a read of n bytes still returns n (short reads would cut lines at the probe's end)
            out, self._first = self._first, b""
            if n is not None and 0 <= n < len(out):
                out, self._first = out[:n], out[n:]
            elif n is None or n < 0:
                out += self._s.read()
            elif n > len(out):
                out += self._s.read(n - len(out))
        else:
            out = self._s.read(n)
        return out.replace(b"\r", b"\n") if self._cr else out


def cr_lines(stream):
    """(stream, cr_only): a file whose lines end in CR alone (classic Mac output, a log of only progress-bar
    redraws) would be one line: when its first 64 KiB hold CRs and no LF, every CR is read as a line end.

    A seekable stream (plain files, gzip) is probed and rewound, and handed back as it is when it has LFs (nearly
    always): prepending the probe to the first read instead cost a copy of every file's first read (a 4 MiB rank
    log copied once more: 0.7 of 4.1 CPU-s of a 1 GiB scan). A buffered stream (every Source.open) is probed with
    `peek`, which reads nothing twice (a read, a seek back and a second read of the same 64 KiB were a third of the
    reading of a 128 KiB rank log); a peek shorter than the probe (a file under 64 KiB, a decompressor's short
    read) is probed as above, so both the answer and where a read error shows are the same."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        # a read error propagates, as from the read below; a shorter peek is probed by that read, which reads all
        # 64 KiB, so an error in them still stops the file here, before its scan
        first = peek(CR_PROBE)[:CR_PROBE]
        if len(first) >= CR_PROBE:
            cr = b"\n" not in first and first.count(b"\r") >= 2
            return (_Probed(stream, b"", True) if cr else stream), cr
    pos = _tell(stream)
    first = stream.read(CR_PROBE)
    cr = b"\n" not in first and first.count(b"\r") >= 2
    if pos is not None:
        try:
            stream.seek(pos)
        except (OSError, ValueError):
            pos = None
    if pos is None:
        return _Probed(stream, first, cr), cr
    return (_Probed(stream, b"", True) if cr else stream), cr


def _tell(stream) -> int | None:
    """The stream's position when it can seek back to it, else None (pipes, sockets, wrapped streams)."""
    try:
        return stream.tell() if stream.seekable() else None
    except (AttributeError, OSError, ValueError):
        return None
