"""Python stack dumps (py-spy `dump`, faulthandler / `kill -SIGUSR1` with faulthandler registered): where each
process's threads were when someone looked at a hung job.

Why frames and not whole dumps: the question a dump answers in a hang is "was this rank inside the collective, or
stuck before it" (../shared/DEVELOPERS.md protocol, step 3). Two kinds of frames say it:
- waiting on the DataLoader's queue: the main thread never got its next batch (a hung worker, a read that never
  returns): the rank never reached the next collective;
- inside a torch.distributed collective: the rank reached it and waits for the others.

    py-spy        Thread 1439102 (idle): "MainThread"
                      _try_get_data (torch/utils/data/dataloader.py:1011)
                      broadcast (torch/distributed/distributed_c10d.py:1191)
    faulthandler  Thread 0x00007f3b (most recent call first):
                    File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1011 in _try_get_data
    probing       | func | file | lineno | depth |      (the header of its python.backtrace table; rows in tools/sources/pyspy/report.py)
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, Head, Reader, json_head, share
from trainlog_debugger.tools.sources.pattern import P

PYSPY = "pyspy"
KINDS = {PYSPY: "dump"}

_LOADER_FUNCS = r"_(?:try_get_data|get_data|next_data)"
_COLLECTIVES = r"(?:all_reduce|all_gather\w*|reduce_scatter\w*|broadcast|barrier|recv|send|wait|all_to_all\w*)"
_COLLECTIVE_HEADS = r"(?:all_reduce|all_gather|reduce_scatter|broadcast|barrier|recv|send|wait|all_to_all)"  # line end: bounded

PATTERNS = [
    P("pyspy.loader_wait", 3, "data_loading_stall", "root_candidate",
      r"(?:" + _LOADER_FUNCS + r" \(\S*torch/utils/data/dataloader\.py:\d+\)|torch/utils/data/dataloader\.py\", line "
      r"\d+ in " + _LOADER_FUNCS + r")",
      ("torch/utils/data/dataloader.py",),
      "    _try_get_data (torch/utils/data/dataloader.py:1011)",
      "a stack dump shows a thread waiting for its next batch from the DataLoader",
      fields=r"(?P<func>" + _LOADER_FUNCS + r")"),
    P("pyspy.in_collective", 3, None, "context",
      r"(?:" + _COLLECTIVES + r" \(\S*torch/distributed/distributed_c10d\.py:\d+\)|torch/distributed/distributed_c10d\.py\", "
      r"line \d+ in " + _COLLECTIVE_HEADS + r")",
      ("torch/distributed/distributed_c10d.py",),
      "    broadcast (torch/distributed/distributed_c10d.py:1191)",
      "a stack dump shows a thread inside a torch.distributed collective",
      fields=r"(?P<func>" + _COLLECTIVES + r")"),
    # faulthandler's thread header (CPython Python/traceback.c _Py_DumpTracebackThreads: `Current thread 0x%lx` /
    # `Thread 0x%lx`, then ` (most recent call first):`), behind a launcher's prefix: the file holds a dump whatever
    # its frames are (a lock, a file write, the program's own code), not only where they are a loader's or a
    # collective's
    P("pyspy.fh_thread", 3, None, "context",
      r"(?:Current thread|Thread) 0x[0-9a-fA-F]{1,16} \(most recent call first\):", ("(most recent call first):",),
      "11: Thread 0x00007f38c27fc700 (most recent call first):",
      "a faulthandler stack dump starts here (one thread's frames follow)"),
    # probing's python.backtrace table (tools/sources/pyspy/report.py reads the rows): the header marks the file as a dump
    P("pyspy.probing_table", 3, None, "context",
      r"\bfunc *[|,] *file *[|,] *lineno\b", ("lineno",),
      "| func          | file                                   | lineno | depth | frame_type |",
      "a probing backtrace table (python.backtrace: func, file, lineno, depth)"),
]


# ---- detection: a dump says what it is in its first line, wherever it was saved (`slurm-42.out`, `node3.txt`)
_THREAD = re.compile(r'^Thread (?:\d+|0X[0-9A-F]+) \((?:idle|active|active\+gil|gil)\)', re.M)
_JSON = re.compile(r'"os_thread_id"\s*:.*?"frames"|"frames"\s*:.*?"os_thread_id"', re.S)  # `py-spy dump --json`
_NAME = re.compile(r"py-?spy", re.I)
_NATIVE = re.compile(r'^(?:Thread \d+ \(Thread 0x[0-9a-fA-F]+ \(LWP \d+\)|#0 +(?:0x[0-9a-fA-F]+ in )?\S[^(\n]*\(|'
                     r'Traceback \(most recent call first\):$)', re.M)
# any line of such a dump: a thread header, a frame (`#3  0x... in f (...) from lib`), py-bt's header and frames
_NATIVE_LINE = re.compile(r'(?:Thread \d+ \(Thread 0x|#\d+ +\S|Traceback \(most recent call first\)|\s+File ")')
# faulthandler's thread header (the dump's reader parses with it too: report.py): which thread, and its id
FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]{1,16}) \(most recent call first\):", re.M)


def _content(h: Head) -> str | None:
    if json_head(h.text) and _JSON.search(h.text):
        return PYSPY
    # `Thread N (active+gil): ...`, or faulthandler's own header (a dump saved on its own)
    if "hread " in h.text and (_THREAD.search(h.text) or FH_THREAD.search(h.text)):
        return PYSPY
    # gdb's (pstack's) thread headers and backtrace frames, gdb's py-bt (tools/sources/pyspy/report.py reads them):
    # most of the head, not one backtrace a crash handler printed into a worker's log
    # (a substring first: the regex over every file's head cost the open of 4,096 rank logs)
    if not any(t in h.text for t in ("#0 ", "(LWP ", "most recent call first")):
        return None
    return PYSPY if _NATIVE.search(h.text) and share(_NATIVE_LINE, [ln for ln in h.lines if ln.strip()]) >= 0.3 else None


DETECT = (Detector("content", 30, _content,  # after Cloud Logging's JSON export, which also starts with `[`/`{`
                   ("slurm-42.out", b'Thread 4127 (idle): "MainThread"\n    _try_get_data (torch/utils/data/dataloader.py:1011)\n')),
          Detector("name", 60, lambda h: PYSPY if _NAME.search(h.name) else None, ("node3_pyspy.log", b"(empty)\n")))

READER = Reader(
    "reader.stacks", None,
    "stack dumps of a hung job, grouped STAT-style; the few ranks outside the collective the rest wait in",
    ("py-spy dump (text)", "py-spy dump --json", "faulthandler (SIGABRT, dump_traceback_later, SIGUSR1)",
     "probing python.backtrace table", "gdb/pstack/lldb backtraces (native frames, gdb py-bt)"),
    'Thread 4127 (idle): "MainThread"', ("collective.stack_outlier", "collective.stacks_all_in_collective"))
