"""Stack dumps of a hung job, read the way STAT reads them: every process's main-thread stack, grouped by where it
is, so that "1,023 ranks in all_reduce ← backward; rank 17 in _try_get_data ← __next__" is one line.

Why a structured read and not line patterns: a dump is one record per process (threads, then frames innermost
first), and the question is which processes are somewhere the others are not. Formats (innermost frame first):

    py-spy dump   Process 4127: python train.py
                  Thread 4127 (idle): "MainThread"
                      _try_get_data (torch/utils/data/dataloader.py:1011)
    faulthandler  Current thread 0x00007f3b3e5d4740 (most recent call first):
                    File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1011 in _try_get_data

The rank of a dump is the rank its file or its lines name (`rank_17.pyspy.txt`, `[rank17]:` prefixes); a file that
holds several processes with no rank for them counts each process once, unranked. Pure functions over text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from trainlog_debugger.tools.lines.attribution import attribute_line, attribute_path, strip_prefixes
from trainlog_debugger.tools.model import Evidence

_PYSPY_PROC = re.compile(r"^Process (\d+): ")
_PYSPY_THREAD = re.compile(r"^Thread (0x[0-9a-fA-F]+|\d+) \(([^)]*)\)(?:: \"([^\"]*)\")?")
_PYSPY_FRAME = re.compile(r"^\s+(\S[^(]*?) \((\S+?):(\d+)\)\s*$")
_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
_FH_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)')
DEPTH = 3  # frames (innermost first) that name where a process is
COLLECTIVE = re.compile(r"^(?:all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|barrier|all_to_all\w*|"
                        r"_?wait|recv|send|monitored_barrier)$")
WHERE = (  # what a minority stack's frames say it was doing: (regex on function/file, category, what, strength)
    (re.compile(r"_try_get_data|_get_data|_next_data|dataloader|__getitem__|fetch|read_batch"), "data_loading_stall",
     "reading data", 0.8),
    (re.compile(r"save_checkpoint|torch/serialization|_save|write_file|checkpoint"), "storage_io",
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
        return any(COLLECTIVE.match(f) and "distributed" in where for f, where, _ in self.frames[:8])


def parse(rel: str, text: str) -> list[Stack]:
    """Every process's main thread in one dump file (py-spy text or faulthandler)."""
    hint = attribute_path(rel)
    out: list[Stack] = []
    cur: Stack | None = None
    main = collecting = False
    pid = None
    for n, raw in enumerate(text.splitlines(), 1):
        a = attribute_line(raw)
        line = strip_prefixes(raw)
        rank = a.rank if a.rank is not None else hint.rank
        if (m := _PYSPY_PROC.match(line)):
            pid = m.group(1)
            continue
        m = _PYSPY_THREAD.match(line)
        fh = _FH_THREAD.match(line) if not m else None
        if m or fh:
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
        if cur is None or not collecting:
            continue
        if (f := _PYSPY_FRAME.match(line)):
            func, path, ln = f.group(1).strip(), f.group(2), f.group(3)
        elif (f := _FH_FRAME.match(line)):
            path, ln, func = f.group(1), f.group(2), f.group(3)
        else:
            continue
        ev = Evidence(file=rel, line=n, text=raw.rstrip("\r"), rank=rank, node=a.node or hint.node, kind="pyspy")
        cur.frames.append((func, f"{path}:{ln}", ev))
    return [s for s in out if s.frames]


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


def summary_lines(stacks: list[Stack], cap: int = 6) -> list[str]:
    """STAT-style: one line per group, largest first."""
    out = []
    for g in group(stacks)[:cap]:
        ranks = g.ranks
        who = (f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(g.stacks)} processes" if not ranks else
               f"{len(ranks)} ranks")
        out.append(f"{who} in {g.describe()}")
    return out
