"""The traceback-tail stage: where logs stop inside a stack trace whose header or exception line was cut off, into
Investigation.tails (tools/rules/software.py: `software.traceback_cut`).

Why: a paste of frames, or a log truncated by its collector, can end in the middle of a traceback:

    File "/opt/train/loader.py", line 212, in __next__
      batch = next(self._it)
    frame #3: c10d::ProcessGroupNCCL::watchdogHandler() + 0x1f5

A frame is printed only when something raised, so such an ending is the one sign left that the code failed. The
scan keeps a traceback by its `Traceback (most recent call last):` header; without it, only the file's own end
says so. This reads that end from disk, and only when nothing else failed visibly (the answer so far found no fault
and is inconclusive): otherwise the fault itself is the answer.

Caps: the first _TAIL_FILES files of the scan, each of at most _TAIL_MAX_BYTES (the tail is read through the
re-reader, from the start of the file); what the caps left unread is said in the answer's notes.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.bundle.reread import read_window
from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.model import Evidence, Status
from trainlog_debugger.tools.scan.result import ScanResult
from trainlog_debugger.tools.sources.detect import HW_KINDS

# a frame of a Python traceback or of c10's C++ backtrace (`frame #3: c10d::ProcessGroupNCCL::watchdogHandler()`)
_FRAME = re.compile(r'^\s*(?:File "[^"\n]+", line \d+, in \S|frame #\d+: \S)')
# a frame behind a prefix no launcher table knows (pytest's `E   `, a logger's own header): any `File "...", line N,
# in f` after a blank, which only a Python traceback prints
_FRAME_ANYWHERE = re.compile(r'(?:^|\s)File "[^"\n]+", line \d+, in \S')
_TAIL_LINES = 40
_TAIL_FILES = 64
_TAIL_MAX_BYTES = 64 << 20  # the tail is read through the re-reader, from the start: only files this small


def traceback_tails(bundle, scan: ScanResult) -> tuple[list[Evidence], int]:
    """(the last frame line in the last _TAIL_LINES lines of each file, as Evidence: where a log stops inside a stack
    trace, read from disk and numbered as the file is; how many files were left unread by the caps: at most
    _TAIL_FILES files, of at most _TAIL_MAX_BYTES each)."""
    sources = {s.rel: s for s in bundle.sources}
    out = []
    unread = max(0, len(scan.files) - _TAIL_FILES)
    for fs in scan.files[:_TAIL_FILES]:
        src = sources.get(fs.rel)
        if src is None or fs.kind in HW_KINDS or not fs.lines:
            continue
        if (getattr(src, "size", 0) or 0) > _TAIL_MAX_BYTES:
            unread += 1
            continue
        try:
            w = read_window(src, fs.lines, before=_TAIL_LINES, after=0)
        except READ_ERRORS:
            continue
        # a frame as the launcher printed it: `[rank8]:   File ...`, `[default0]:`, srun's `3: `, Ray's `(pid=12)`
        frames = [(n, t) for n, t in w.lines
                  if _FRAME.match(t) or _FRAME.match(strip_prefixes(t)) or _FRAME_ANYWHERE.search(t)]
        if frames:
            n, t = frames[-1]
            rank = next(iter(fs.ranks), None) if len(fs.ranks) == 1 else None
            out.append(Evidence(file=fs.rel, line=n, text=t, kind=fs.kind, rank=rank))
    return out, unread


def nothing_failed_visibly(ctx: Context) -> bool:
    d = ctx.inv.diagnosis
    return d is not None and d.category == "none" and d.status == Status.inconclusive


def read_tails(ctx: Context) -> tuple[object, list[str]]:
    """(the tails; a note when the caps left files unread)."""
    scan = ctx.inv.scan
    tails, unread = traceback_tails(ctx.bundle, scan)
    notes = [f"the ends of {len(scan.files) - unread} of {len(scan.files)} files were read for a cut-off stack trace "
             f"(at most {_TAIL_FILES} files, each of at most {_TAIL_MAX_BYTES >> 20} MiB; no other file was looked at "
             "for one)"] if unread else []
    return tails, notes


def found(tails: list[Evidence]) -> bool:
    return bool(tails)


STAGE = Stage("tails", when=nothing_failed_visibly, run=read_tails, redraws=found)
