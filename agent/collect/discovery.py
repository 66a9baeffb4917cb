"""Find the training processes of a live job on this node, from /proc alone (no psutil, nothing attached).

Why three ways, best first:
1. The children of a torchrun agent. torchrun (`torchrun ...`, `python -m torch.distributed.run ...`, the older
   `python -m torch.distributed.launch ...`) starts every worker as its own direct child, so the agent's children
   ARE the ranks; their own children (DataLoader workers, compile workers) are not ranks and are not dumped, nor
   is a child whose readable environment names no rank (torchrun sets RANK and LOCAL_RANK in every worker's).
2. Else every process whose environment holds RANK or LOCAL_RANK (srun / mpirun / deepspeed launch set them), minus
   the processes whose parent also qualifies: a DataLoader worker inherits its rank's environment and would
   otherwise be dumped as a second "rank N".
3. `--pid PID` (repeatable): exactly those, whatever they are.

The rank of each process comes from RANK / LOCAL_RANK / WORLD_SIZE / GROUP_RANK / MASTER_ADDR in
/proc/<pid>/environ. That file is readable only by the process's owner (and root): when it is not, the rank stays
unknown and the dump is named by pid. Formats (proc(5)): `cmdline` and `environ` are NUL-separated; `stat` is
`pid (comm) state ppid ...`, where comm may itself hold spaces and parentheses, so the fields are read after the
LAST `)`. Every read is bounded (MAX_CMDLINE, MAX_ENVIRON), and every number read is range-checked.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
MAX_CMDLINE = 64 << 10  # Linux caps argv at a few MB, but the first 64 KiB name the program
MAX_ENVIRON = 1 << 20
MAX_PROCS = 4096  # processes collected on one node: far past any node's rank count
ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR")
_INT_KEYS = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size", "GROUP_RANK": "group_rank"}
MAX_RANK = 1 << 24  # a RANK/WORLD_SIZE above this is not a rank (16 M processes)
_MODULES = re.compile(r"^torch\.distributed\.(?:run|launch)$")


@dataclass
class Proc:
    """One process as /proc shows it. `env` holds only ENV_KEYS, and only when environ was readable."""

    pid: int
    ppid: int | None
    cmdline: list[str]
    env: dict[str, str] | None = None
    env_error: str | None = None
    via: str = ""  # how it was found: torchrun_child / rank_env / pid
    ints: dict[str, int | None] = field(default_factory=dict)

    def get(self, key: str) -> int | None:
        """RANK/LOCAL_RANK/WORLD_SIZE/GROUP_RANK as an int within [0, MAX_RANK], else None."""
        v = (self.env or {}).get(key, "").strip()
        if not v.isdigit() or len(v) > 9 or int(v) > MAX_RANK:
            return None
        return int(v)

    @property
    def rank(self) -> int | None:
        return self.get("RANK")


def _read(path: Path, limit: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(limit)


def read_proc(pid: int, proc: Path = PROC) -> Proc | None:
    """The process `pid`, or None when it is gone (or not a process we may see at all)."""
    base = proc / str(pid)
    try:
        stat = _read(base / "stat", 4096).decode("utf-8", "replace")
        raw = _read(base / "cmdline", MAX_CMDLINE)
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    ppid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    cmd = [a.decode("utf-8", "replace") for a in raw.split(b"\0")]
    if cmd and cmd[-1] == "":
        cmd.pop()
    p = Proc(pid, ppid, cmd)
    try:
        env = _read(base / "environ", MAX_ENVIRON)
        p.env = {}
        for item in env.split(b"\0"):
            k, sep, v = item.partition(b"=")
            key = k.decode("ascii", "replace")
            if sep and key in ENV_KEYS:
                p.env[key] = v.decode("utf-8", "replace")[:256]
    except OSError as e:
        p.env_error = f"{base / 'environ'}: {e.strerror or e}"
    return p


def all_pids(proc: Path = PROC) -> list[int]:
    try:
        return sorted(int(d) for d in os.listdir(proc) if d.isdigit())
    except OSError:
        return []


def is_torchrun_agent(cmdline: list[str]) -> bool:
    """A torchrun agent's argv: `torchrun ...` (the console script, run by its path or through python), or
    `python -m torch.distributed.run|launch ...`. Only the program and what precedes the script count: a worker's
    own arguments that merely mention torchrun do not make it an agent."""
    if not cmdline:
        return False
    head = cmdline[:4]
    if os.path.basename(head[0]) == "torchrun":
        return True
    if re.match(r"^python[\d.]*$", os.path.basename(head[0])):
        for i, a in enumerate(head[1:], 1):
            if a == "-m" and i + 1 < len(cmdline) and _MODULES.match(cmdline[i + 1]):
                return True
            if os.path.basename(a) == "torchrun":
                return True
            if not a.startswith("-"):
                return False
    return False


def _ancestors(pid: int, procs: dict[int, Proc], proc: Path) -> set[int]:
    """`pid` and every ancestor of it: the collector (and the srun / ssh that started it) is never a target."""
    out, cur = set(), pid
    for _ in range(256):  # bounded: a pid cycle in a fake /proc must not loop forever
        if cur in out or cur <= 0:
            break
        out.add(cur)
        p = procs.get(cur) or read_proc(cur, proc)
        if p is None or p.ppid is None:
            break
        cur = p.ppid
    return out


def discover(pids: list[int] | None = None, proc: Path = PROC, me: int | None = None) -> tuple[list[Proc], str]:
    """The training processes and how they were found (a phrase for the user). `pids`: exactly those (missing
    ones are simply absent from the answer; the caller says so)."""
    me = os.getpid() if me is None else me
    if pids:
        found = []
        for pid in dict.fromkeys(pids):
            if (p := read_proc(pid, proc)) is not None:
                p.via = "pid"
                found.append(p)
        return found, "the processes named by --pid"
    procs = {pid: p for pid in all_pids(proc) if (p := read_proc(pid, proc)) is not None}
    mine = _ancestors(me, procs, proc)
    agents = {pid for pid, p in procs.items() if pid not in mine and is_torchrun_agent(p.cmdline)}
    # a child whose environment is readable and names no rank is the agent's helper (multiprocessing's resource
    # tracker), not a worker: torchrun sets RANK and LOCAL_RANK in every worker's environment
    children = [p for pid, p in sorted(procs.items()) if p.ppid in agents and pid not in mine and pid not in agents
                and (p.env is None or "RANK" in p.env or "LOCAL_RANK" in p.env)]
    for p in children:
        p.via = "torchrun_child"
    if children:
        return children[:MAX_PROCS], f"the workers of {len(agents)} torchrun agent(s)"
    ranked = {pid for pid, p in procs.items()
              if pid not in mine and p.env and ("RANK" in p.env or "LOCAL_RANK" in p.env)}
    top = [procs[pid] for pid in sorted(ranked) if procs[pid].ppid not in ranked]
    for p in top:
        p.via = "rank_env"
    return top[:MAX_PROCS], "the processes with RANK/LOCAL_RANK in their environment"
