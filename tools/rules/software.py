"""A program error that no specific rule explains: the exception a traceback ended in, segfaults, aborts."""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources import is_cascade
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.rules.base import RuleInputs, candidate



# What a terminal exception says was at fault (../shared/TAXONOMY.md), read from its meaning, not its class: the errno
# an OSError carries, PyTorch's own wrappers. First match wins; no match leaves it `software`, weak.
TERMINAL_ERRORS = (
    (re.compile(r"\[Errno 28\]|No space left on device|\bENOSPC\b"), "storage_io", "the filesystem is full (ENOSPC)"),
    (re.compile(r"\[Errno 122\]|Disk quota exceeded|\bEDQUOT\b"), "storage_io", "a disk quota was exceeded (EDQUOT)"),
    (re.compile(r"\[Errno 30\]|Read-only file system|\bEROFS\b"), "storage_io", "the filesystem is read-only (EROFS)"),
    (re.compile(r"\[Errno 116\]|Stale file handle|\bESTALE\b"), "storage_io", "a stale network-filesystem handle (ESTALE)"),
    (re.compile(r"\[Errno 5\]|Input/output error|\bEIO\b"), "storage_io", "the storage returned an I/O error (EIO)"),
    (re.compile(r"\[Errno 98\]|Address already in use|\bEADDRINUSE\b"), "config",
     "the address or port is already in use (EADDRINUSE)"),
    (re.compile(r"\[Errno 24\]|Too many open files|\bEMFILE\b"), "config", "the open-files limit was reached (EMFILE)"),
    (re.compile(r"^MemoryError\b|\[Errno 12\]|Cannot allocate memory|\bENOMEM\b"), "oom", "host memory ran out"),
    (re.compile(r"Caught \w+ in DataLoader worker process \d+"), "data",
     "raised inside a DataLoader worker (the dataset, a transform or collate)"),
)


def classify_terminal(text: str) -> tuple[str, str] | None:
    """(category, why) for an exception line whose meaning names what was at fault; None when it does not."""
    for rx, category, why in TERMINAL_ERRORS:
        if rx.search(text):
            return category, why
    return None


def exception(f: RuleInputs):
    for ev in f.hits("python.traceback"):
        fx = f.fields_of(ev, "python.traceback")
        text = fx.get("exception_text")
        if not text or is_cascade(text):
            continue
        exc = Evidence(file=ev.file, line=fx["exception_line"], text=text, time=ev.time, rank=ev.rank, node=ev.node,
                       kind=ev.kind)
        said = classify_terminal(text)
        if said:  # a clearly classified terminal error is decisive
            return [candidate("software.terminal_error", said[0], f"{said[1]}: {text.strip()[:160]}", 0.75, [exc, ev], f,
                              facts={"classified_by": "terminal exception"},
                              recommendations=["fix what the error names, then restart"])]
        return [candidate("software.exception", "software", f"{fx['exception']}: {fx.get('message', '')[:160]}", 0.45,
                     [exc, ev], f, recommendations=["fix the error in the traceback (its last frames are in the file)"])]
    evs = [e for e in f.hits("python.exception") if not is_cascade(e.text)]
    if evs:
        return [candidate("software.exception", "software", evs[0].text.strip()[:160], 0.35, evs[:1], f)]
    return []


def native_crash(f: RuleInputs):
    evs = f.hits("process.segfault", "python.fatal_error")
    return [candidate("software.native_crash", "software", "a process crashed in native code (segfault / fatal error)", 0.5,
                 evs[:2], f, recommendations=["get a core dump or py-spy --native stack; check extension/CUDA versions"])] \
        if evs else []


def workers_failed(f: RuleInputs):
    """The launcher says workers failed and nothing more specific fires: the job did NOT end normally. Weak on
    purpose, so the answer is `inconclusive` and says what is missing, never `completed`."""
    evs = [e for e in f.hits("torchrun.exitcode", "torchrun.worker_failed", "torchrun.child_failed", "slurm.task_exit",
                             "slurm.failed") if f.fields_of(e, "torchrun.exitcode").get("exitcode", 1) != 0]
    if not evs:
        return []
    return [candidate("software.workers_failed", "software", "workers exited with errors, and no line in the bundle says "
                 "why", 0.2, evs[:2], f, ranks=[], nodes=[], facts={"fallback": True},
                 recommendations=["collect each failed rank's own stderr (torchrun --log-dir, or SLURM per-task "
                                  "output)"])]


RULES = [exception, native_crash, workers_failed]
