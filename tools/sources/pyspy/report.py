"""Stack dumps of a hung job, read the way STAT reads them: every process's main-thread stack, grouped by where it
is, so that "1,023 ranks in all_reduce ← backward; rank 17 in _try_get_data ← __next__" is one line.

Why a structured read and not line patterns: a dump is one record per process (threads, then frames innermost
first), and the question is which processes are somewhere the others are not. Formats (innermost frame first):

    py-spy dump   Process 4127: python train.py
                  Thread 4127 (idle): "MainThread"
                      _try_get_data (torch/utils/data/dataloader.py:1011)
    faulthandler  Current thread 0x00007f3b3e5d4740 (most recent call first):
                    File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1011 in _try_get_data

    py-spy --json [{"pid": 4127, "thread_name": "MainThread", "os_thread_id": 4127, "frames": [{"name":
                  "_try_get_data", "filename": "/usr/lib/.../dataloader.py", "short_filename": "torch/utils/data/
                  dataloader.py", "line": 1011, ...}, ...]}, ...]   (py-spy 0.3.x and 0.4.x: pretty-printed, one key
                  per line; each frame is cited at its `"name":` line)
    gdb / pstack  Thread 1 (Thread 0x7f1c2a955740 (LWP 5125) "python3"):       (thread 1, LWP = pid: the main thread)
                  #1  0x00007f1c2d9d5a18 in caffe2::serialize::PyTorchStreamWriter::writeRecord(...) () from .../libtorch_cpu.so
                  (`$ gdb -p PID` / `Attaching to process PID` start a process; gdb's py-bt and lldb's
                  `frame #N: 0x... lib`func` are read too; native frames in c10d's or NCCL's collectives count as
                  inside the collective: NATIVE_COLLECTIVE)
    probing       the documented columns of its `python.backtrace` table (func, file, lineno, depth; depth 0 =
                  innermost; frame_type Python/Native), as `probing <endpoint> query "SELECT func, file, lineno,
                  depth FROM python.backtrace"` prints them: a bordered table (`| func | file | lineno | depth |`,
                  its query engine's pretty format) or CSV. Only the columns are documented, not the console layout,
                  so any table whose header names func, file and lineno is read; one table = one process.

The rank of a dump is the rank its file or its lines name (`rank_17.pyspy.txt`, `[rank17]:` prefixes), else the
rank the job's own lines give its pid (`attach_ranks`: NCCL's `host:pid:tid [dev] ... rank R nranks N` init lines,
torchrun's failure entries `rank : R` / `exitcode : E (pid: P)`, a `debugger collect` manifest). A file that holds
several processes with no rank for them counts each process once, unranked. Pure functions over text.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

from trainlog_debugger.tools.sources.collect.attribute import node_of
from trainlog_debugger.tools.lines.attribution import attribute_line, strip_prefixes
from trainlog_debugger.tools.sources.paths import attribute_path
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.sources.nccl.format import HOST_PID
from trainlog_debugger.tools.sources.pyspy.format import FH_THREAD
from trainlog_debugger.tools.sources.pyspy.format import PYSPY

_PYSPY_PROC = re.compile(r"^Process (\d+): ")
_PYSPY_THREAD = re.compile(r"^Thread (0x[0-9a-fA-F]+|\d+) \(([^)]*)\)(?:: \"([^\"]*)\")?")
_PYSPY_FRAME = re.compile(r"^\s+(\S[^(]*?) \((\S+?):(\d+)\)\s*$")
# faulthandler `File "f", line N in fn`; gdb's py-bt (CPython Tools/gdb/libpython.py) `File "f", line N, in fn`
_FH_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+),? in (\S+)')
# Native stacks as gdb prints them (`gdb -p PID -batch -ex "thread apply all bt"`, pstack/gstack, a core's `bt`):
# the attach (`$ gdb -p 5125 ...`, `Attaching to process 5125`) starts a process's record; gdb's thread header
# (gdb/thread.c: `Thread 1 (Thread 0x7f1c2a955740 (LWP 5125) "python3"):`, thread 1 is the main thread, whose LWP is
# the pid); frames from gdb/stack.c print_frame (`#1  0x00007f1c... in caffe2::...::writeRecord(...) () from
# /.../libtorch_cpu.so`, `#3  train_step (x=...) at train.cc:42`); py-bt's own header; lldb's thread and frame
# lines (`* thread #1, name = 'python'`, `frame #1: 0x00007f3b... libnccl.so.2`ncclGroupEnd + 12`)
_GDB_PROC = re.compile(r"^(?:\$ )?(?:(?:gdb|eu-stack)\b[^\n]*?(?:-p\s*|--pid[= ])|(?:pstack|gstack)\s+)(\d+)\b|"
                       r"^Attaching to process (\d+)")
_GDB_THREAD = re.compile(r'^Thread (\d+) \(Thread 0x[0-9a-fA-F]+ \(LWP (\d+)\)(?: "[^"]*")?\):')
_PYBT_HEAD = re.compile(r"^Traceback \(most recent call first\):")
_LLDB_THREAD = re.compile(r"^\s*\*?\s*thread #(\d+)\b")
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?([^\s(][^(]*)\(")
_GDB_WHERE = re.compile(r"\) (?:at (\S+:\d+)|from (\S+))\s*$")  # the frame's source line or library, at its end
_LLDB_FRAME = re.compile(r"^\s*\*?\s*frame #\d+: 0x[0-9a-fA-F]+ ([^`\s]+)`([^\s(]+)")
DEPTH = 3  # frames (innermost first) that name where a process is
COLLECTIVE = re.compile(r"^(?:all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|barrier|all_to_all\w*|"
                        r"_?wait|recv|send|monitored_barrier)$")
# a native frame inside a collective or its wait: c10d's ProcessGroupNCCL/Gloo entry points and WorkNCCL's wait
# (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), and NCCL's own collective calls (src/collectives.cc, group.cc)
NATIVE_COLLECTIVE = re.compile(r"^c10d::ProcessGroup(?:NCCL|Gloo)(?:::WorkNCCL)?::(?:wait|synchronize\w*|allreduce\w*|"
                               r"allgather\w*|_allgather_base|reduce_scatter\w*|_reduce_scatter_base|broadcast|barrier|"
                               r"alltoall\w*|send|recv)$|^nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|"
                               r"Recv|GroupEnd)$")
WHERE = (  # what a minority stack's frames say it was doing: (regex on function/file, category, what, strength)
    (re.compile(r"_try_get_data|_get_data|_next_data|dataloader|__getitem__|fetch|read_batch"), "data_loading_stall",
     "reading data", 0.8),
    # (torch.save's native writer, caffe2::serialize::PyTorchStreamWriter, in a gdb stack)
    (re.compile(r"save_checkpoint|torch/serialization|_save|write_file|checkpoint|PyTorchStreamWriter"), "storage_io",
     "saving a checkpoint", 0.7),
    (re.compile(r"evaluat|validat|_eval\b|eval_step|compute_metrics|generate"), "software",
     "evaluating alone", 0.7),
)


@dataclass
class Stack:
    """One process's main-thread stack: innermost frame first, each frame with the dump line that shows it."""

    file: str
    rank: int | None
    node: str | None
    pid: str | None
    frames: list[tuple[str, str, Evidence]] = field(default_factory=list)  # (function, file:line, line)

    def signature(self) -> tuple[str, ...]:
        return tuple(f for f, _, _ in self.frames[:DEPTH])

    def in_collective(self) -> bool:
        return any((COLLECTIVE.match(f) and "distributed" in where) or NATIVE_COLLECTIVE.match(f)
                   for f, where, _ in self.frames[:8])


MAX_JSON_THREADS = 100_000  # a py-spy --json dump of one process; more is not a dump


def parse(rel: str, text: str) -> list[Stack]:
    """Every process's main thread in one dump file: py-spy text or --json, faulthandler, or a probing backtrace
    table."""
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("[", "{") and '"frames"' in text:
        return parse_pyspy_json(rel, text)
    if _PROBING_HEAD.search(text[:65536]):
        return parse_probing(rel, text)
    return _parse_text(rel, text)


def _parse_text(rel: str, text: str) -> list[Stack]:
    hint = attribute_path(rel)
    out: list[Stack] = []
    cur: Stack | None = None
    main = collecting = False
    pid = None
    for n, raw in enumerate(text.splitlines(), 1):
        a = attribute_line(raw)
        line = strip_prefixes(raw)
        rank = a.rank if a.rank is not None else hint.rank
        if (m := _PYSPY_PROC.match(line) or _GDB_PROC.match(line)):
            pid = next(g for g in m.groups() if g)
            continue
        g = _GDB_THREAD.match(line) or _LLDB_THREAD.match(line) or _PYBT_HEAD.match(line)
        m = _PYSPY_THREAD.match(line) if not g else None
        fh = FH_THREAD.match(line) if not (m or g) else None
        if m or fh or g:
            if g is not None:  # gdb/lldb: thread 1 is the main thread (its LWP is the pid); py-bt shows the main one
                lwp = g.group(2) if g.re is _GDB_THREAD else None
                is_main = g.re is _PYBT_HEAD or g.group(1) == "1" or (lwp is not None and lwp == pid)
                if is_main and lwp is not None:
                    pid = lwp  # a main thread's LWP is its process's pid: another process's record starts
                    if cur is not None and cur.pid is None and not main:
                        cur.pid = pid  # the threads gdb printed before it were this process's
            else:
                is_main = (m is not None and (m.group(3) == "MainThread")) or (fh is not None and fh.group(1) == "Current thread")
            # a new process record starts with its first thread when the previous one already had its main thread
            if cur is None or (is_main and main) or (pid and cur.pid != pid) or rank != cur.rank:
                cur = Stack(rel, rank, a.node or hint.node, pid)
                out.append(cur)
                main = False
            if is_main or not cur.frames:
                cur.frames, main = [], is_main
                collecting = True
            else:
                collecting = False
            continue
        if cur is None and line.startswith("#0 ") and _GDB_FRAME.match(line):  # a core's `bt`: frames, no thread header
            cur = Stack(rel, rank, a.node or hint.node, pid)
            out.append(cur)
            main = collecting = True
        if cur is None or not collecting:
            continue
        if (f := _PYSPY_FRAME.match(line)):
            func, where = f.group(1).strip(), f"{f.group(2)}:{f.group(3)}"
        elif (f := _FH_FRAME.match(line)):
            func, where = f.group(3), f"{f.group(1)}:{f.group(2)}"
        elif (f := _GDB_FRAME.match(line)):
            w = _GDB_WHERE.search(line, f.end())
            func, where = f.group(1).split()[-1], (w.group(1) or w.group(2)) if w else "?"
        elif (f := _LLDB_FRAME.match(line)):
            func, where = f.group(2), f.group(1)
        else:
            continue
        ev = Evidence(file=rel, line=n, text=raw.rstrip("\r"), rank=rank, node=a.node or hint.node, kind=PYSPY)
        cur.frames.append((func, where, ev))
    return [s for s in out if s.frames]


_JSON_NAME = re.compile(r'^\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def parse_pyspy_json(rel: str, text: str) -> list[Stack]:
    """py-spy dump --json: a list of threads (or one object per line, several dumps appended). Each process's main
    thread (thread_name MainThread, or os_thread_id == pid) becomes a Stack; each frame cites the line of its
    `"name":` key (pretty-printed output), or the dump's only line when it is compact. Bad JSON → no stacks."""
    hint = attribute_path(rel)
    lines = text.splitlines()
    name_lines = [n for n, ln in enumerate(lines, 1) if _JSON_NAME.match(ln)]
    threads: list = []
    try:
        doc = json.loads(text)
        threads = doc if isinstance(doc, list) else [doc]
    except ValueError:
        for ln in lines:  # one JSON document per line: dumps of several processes appended to one file
            try:
                doc = json.loads(ln)
            except ValueError:
                continue
            threads += doc if isinstance(doc, list) else [doc]
    out: list[Stack] = []
    cursor = 0  # frames appear in the text in document order: the k-th frame overall is at the k-th "name": line
    for t in threads[:MAX_JSON_THREADS]:
        frames = t.get("frames") if isinstance(t, dict) else None
        if not isinstance(frames, list):
            continue
        first, cursor = cursor, cursor + len(frames)
        pid = t.get("pid")
        main = t.get("thread_name") == "MainThread" or (pid is not None and t.get("os_thread_id") == pid)
        if not main:
            continue
        st = Stack(rel, hint.rank, hint.node, str(pid) if pid is not None else None)
        for k, fr in enumerate(frames):
            if not isinstance(fr, dict):
                continue
            func = str(fr.get("name") or "?")
            where = f"{fr.get('short_filename') or fr.get('filename') or '?'}:{fr.get('line', '?')}"
            n = name_lines[first + k] if first + k < len(name_lines) and len(name_lines) > 1 else 1
            raw = lines[n - 1] if 0 < n <= len(lines) else ""
            st.frames.append((func, where, Evidence(file=rel, line=n, text=raw.rstrip("\r"), rank=hint.rank,
                                                    node=hint.node, kind=PYSPY)))
        if st.frames:
            out.append(st)
    return out


_PROBING_HEAD = re.compile(r"^[|+ ]*func\s*[|,]\s*file\s*[|,]\s*lineno\b.*$", re.M)
_BORDER = re.compile(r"^\s*\+[-+]+\+\s*$")


def parse_probing(rel: str, text: str) -> list[Stack]:
    """probing's python.backtrace table(s): one Stack per table, frames ordered by depth (0 = innermost)."""
    hint = attribute_path(rel)
    out: list[Stack] = []
    cols: list[str] | None = None
    rows: list[tuple[int, str, str, str, Evidence]] = []

    def close():
        if rows:
            st = Stack(rel, hint.rank, hint.node, None)
            st.frames = [(f, f"{w}:{ln}", ev) for _, f, w, ln, ev in sorted(rows, key=lambda r: r[0])]
            out.append(st)
        rows.clear()

    for n, raw in enumerate(text.splitlines(), 1):
        line = strip_prefixes(raw)
        if _BORDER.match(line) or not line.strip():
            continue
        sep = "|" if "|" in line else ","
        cells = [c.strip() for c in line.strip().strip("|").split(sep)]
        if _PROBING_HEAD.match(line):
            close()
            cols = [c.lower() for c in cells]
            continue
        if cols is None or len(cells) != len(cols):
            if cols is not None and rows:
                close()
                cols = None
            continue
        row = dict(zip(cols, cells))
        if row.get("frame_type", "Python").lower() == "native" or not row.get("func"):
            continue
        depth = int(row["depth"]) if row.get("depth", "").isdigit() else len(rows)
        rows.append((min(depth, 1 << 20), row["func"], row.get("file", "?"), row.get("lineno", "?"),
                     Evidence(file=rel, line=n, text=raw.rstrip("\r"), rank=hint.rank, node=hint.node,
                              kind=PYSPY)))
    close()
    return out


def launcher_pids(inputs) -> dict[str, list[tuple[int, str | None]]]:
    """pid → [(rank, host)] from the job's own lines (duck-typed RuleInputs: `hits`, `fields_of`). NCCL init lines
    of the largest communicator (its ranks are the global ranks) and torchrun's failure entries (`rank : R` above
    `exitcode : E (pid: P)`). A pid is only unique per host, so the host is kept and matched when the dump has one."""
    out: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
    inits = [(e, inputs.fields_of(e, "nccl.comm_init")) for e in inputs.hits("nccl.comm_init")]
    world = max((fl.get("nranks", 0) for _, fl in inits), default=0)
    for e, fl in inits:
        m = HOST_PID.search(e.text)  # NCCL's init line names the process's host and pid
        if m and fl.get("nranks") == world and isinstance(fl.get("comm_rank"), int):
            pair = (fl["comm_rank"], m.group("host"))
            if pair not in out[m.group("pid")]:
                out[m.group("pid")].append(pair)
    # each entry's lines by (file, line): one lookup per exit code, not a scan of every entry (10,000 ranks' entries)
    heads = {(h.file, h.line): h for h in inputs.hits("torchrun.failure_rank")}
    host_at = {(h.file, h.line): h for h in inputs.hits("torchrun.failure_host")}
    for e in inputs.hits("torchrun.exitcode"):
        pid = inputs.fields_of(e, "torchrun.exitcode").get("pid")
        head = next((h for k in (1, 2, 3, 4) if (h := heads.get((e.file, e.line - k)))), None)
        if pid is None or head is None:
            continue
        rank = inputs.fields_of(head, "torchrun.failure_rank").get("failed_rank")
        hosts = [h for k in (1, 2) if (h := host_at.get((e.file, head.line - k)))]
        host = inputs.fields_of(hosts[0], "torchrun.failure_host").get("host") if hosts else e.node
        if isinstance(rank, int) and (rank, host) not in out[str(pid)]:
            out[str(pid)].append((rank, host))
    return dict(out)


def attach_ranks(stacks: list[Stack], pids: dict[str, list[tuple[int, str | None]]]) -> int:
    """Give each unranked stack the rank its pid had in the job's lines: the pair on the dump's host when the dump
    names one, else the only pair for that pid (two hosts reusing a pid → left unranked: never a guess). Returns how
    many stacks got a rank."""
    got = 0
    for s in stacks:
        if s.rank is not None or s.pid is None or s.pid not in pids:
            continue
        pairs = pids[s.pid]
        # how people save one node's dumps: `gpu-node-17/4127.txt`, `gpu-node-17.4127.pyspy.txt` (known hosts only)
        node = s.node or node_of(s.file, {}, {h for _, h in pairs if h})[0]
        same = [p for p in pairs if node and p[1] == node] or (pairs if len(pairs) == 1 else [])
        if len(same) == 1:
            s.rank, s.node = same[0][0], s.node or same[0][1]
            for i, (f, w, ev) in enumerate(s.frames):
                s.frames[i] = (f, w, ev.model_copy(update={"rank": s.rank, "node": s.node}))
            got += 1
    return got


@dataclass
class StackGroup:
    signature: tuple[str, ...]
    stacks: list[Stack]

    @property
    def ranks(self) -> list[int]:
        return sorted({s.rank for s in self.stacks if s.rank is not None})

    def describe(self) -> str:
        return " ← ".join(self.signature) or "?"


def group(stacks: list[Stack]) -> list[StackGroup]:
    """Stacks with the same innermost frames together, largest group first."""
    by: dict[tuple[str, ...], list[Stack]] = defaultdict(list)
    for s in stacks:
        by[s.signature()].append(s)
    return sorted((StackGroup(k, v) for k, v in by.items()), key=lambda g: (-len(g.stacks), g.signature))


def minority(stacks: list[Stack]) -> tuple[StackGroup, StackGroup, str, str, float] | None:
    """(the odd group, the majority, category, what it was doing, strength) when most processes sit in a collective
    and a few (at most 1/8, or one of up to 8) sit elsewhere: those never reached it. None otherwise."""
    groups = group(stacks)
    if len(groups) < 2:
        return None
    major = groups[0]
    total = len(stacks)
    if not all(s.in_collective() for s in major.stacks):
        return None
    odd = [g for g in groups[1:] if not any(s.in_collective() for s in g.stacks)]
    if not odd:
        return None
    n_odd = sum(len(g.stacks) for g in odd)
    if n_odd > max(1, total // 8):
        return None
    g = odd[0]
    text = " ".join(f"{f} {w}" for s in g.stacks for f, w, _ in s.frames[:12])
    for rx, cat, what, strength in WHERE:
        if rx.search(text):
            return g, major, cat, what, strength
    return g, major, "data_loading_stall", f"in {g.signature[0] if g.signature else '?'}", 0.5


def telling_frame(s: Stack) -> Evidence:
    """The frame that says what the process was doing (the DataLoader's `_try_get_data` under a `select` in the
    multiprocessing queue): the innermost frame whose function or file a WHERE entry recognises, else the innermost."""
    for f, w, ev in s.frames[:12]:
        if any(rx.search(f"{f} {w}") for rx, *_ in WHERE):
            return ev
    return s.frames[0][2]


def summary_lines(stacks: list[Stack], cap: int = 6) -> list[str]:
    """STAT-style: one line per group, largest first."""
    out = []
    for g in group(stacks)[:cap]:
        ranks = g.ranks
        who = (f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(g.stacks)} processes" if not ranks else
               f"{len(ranks)} ranks")
        out.append(f"{who} in {g.describe()}")
    return out


def to_json(stacks: list[Stack]) -> dict:
    """The dumps as the agent reads them (it reads every report as JSON, never its objects): the groups, largest
    first, each with its ranks, its innermost frames and the dump line of its telling frame; and the minority
    verdict `minority` draws (the few processes outside the collective the rest wait in), None when there is none."""
    from trainlog_debugger.tools.jsonable import to_jsonable
    odd = minority(stacks)
    groups = [{"where": g.describe(), "processes": len(g.stacks), "ranks": g.ranks,
               "in_collective": all(s.in_collective() for s in g.stacks),
               "frames": [f"{f} ({w})" for f, w, _ in g.stacks[0].frames[:8]],
               "line": to_jsonable(telling_frame(g.stacks[0])) if g.stacks[0].frames else None,
               "files": sorted({s.file for s in g.stacks})} for g in group(stacks)]
    return {"processes": len(stacks), "ranked": sum(s.rank is not None for s in stacks), "groups": groups,
            "minority": None if odd is None else {"where": odd[0].describe(), "ranks": odd[0].ranks,
                                                  "majority": odd[1].describe(), "category": odd[2],
                                                  "doing": odd[3], "strength": odd[4]}}
