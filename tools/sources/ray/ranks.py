"""The scan step of the Ray source (declared in format.py): which training rank an actor's `(Cls pid=P, ip=I)` lines
belong to (FORMATS.md §0).

Ray prefixes every line an actor prints with the actor's class, pid and node IP, never with a rank:

    (RayTrainWorker pid=40226, ip=10.0.0.3) Setting up process group for: env:// [rank=6, world_size=8]
    (RayTrainWorker pid=40226, ip=10.0.0.3) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...
    (WorkerDict pid=11872, ip=10.0.0.2) [rank0]:[E1105 10:24:55.310482211 ProcessGroupNCCL.cpp:616] [Rank 0] ...

so a crash printed by one worker names a node and a pid, and the rank that failed is what an engineer reads off
the lines that state that process's rank: Ray Train's table of its workers (python/ray/train/_internal/
backend_executor.py, `- (node_id=.., ip=10.0.0.3, pid=40226) world_rank=6, local_rank=2, node_rank=1`), its set-up
line (python/ray/train/torch/config.py, `Setting up process group for: {url} [rank={world_rank}, world_size=..]`,
printed by rank 0 only) or a c10d `[rankN]:` prefix the process printed under its Ray prefix. This step states that
map (node IP, pid) → rank and gives the rank to that process's other lines, and to the driver's report of a task
that failed in it
(`ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.generate() (pid=11875, ip=10.0.0.2, ...)`).

Stated, never guessed: a pid whose lines state two ranks (a restarted worker reusing a pid) maps to none, and a
line whose prefix has no IP takes a rank only when that pid names one rank on every node. Pids are consecutive on a
node but nothing says pid order is rank order, so an unmapped pid stays unmapped.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.attribution import attribute_line
from trainlog_debugger.tools.scan.result import FileScan

# Ray's log prefix, at the start of the line: `(RayTrainWorker pid=40226, ip=10.0.0.3) `, `(pid=123) `,
# `(WorkerDict pid=11872, ip=10.0.0.2) ` (python/ray/_private/worker.py print_worker_logs)
_PREFIX = re.compile(r"\s*\((?:[A-Za-z_][\w.]*(?:\[rank=\d{1,7}\])? )?pid=(?P<pid>\d{1,10})(?:, ip=(?P<ip>[\w.:\-]+))?\)")
# the driver's report of a remote task's failure (python/ray/exceptions.py RayTaskError): `ray::Cls.method()
# (pid=11875, ip=10.0.0.2, actor_id=...`
# and the memory monitor's account of the worker it killed (src/ray/raylet/node_manager.cc, the OOM kill message):
# `Memory on the node (IP: 10.0.0.3, ID: a4c1..) where the task (task ID: .., name=.., pid=51233, memory used=..)`
_TASK = re.compile(r"\bray::[\w.<>:]+\(\) \(pid=(?P<pid>\d{1,10}), ip=(?P<ip>[\w.:\-]+)"
                   r"|Memory on the node \(IP: (?P<mip>[\w.:\-]+), ID: \w+\) where the \w+ \([^)]*?\bpid=(?P<mpid>\d{1,10})")


# Ray's own per-process log files (the session's logs/ folder: `worker-<worker id>-<job id>-<pid>.out` and `.err`,
# python/ray/_private/services.py, the worker's stdout/stderr redirection): every line of one is that worker's,
# printed without Ray's `(Cls pid=P, ip=I)` prefix (the prefix is added only when the driver echoes them). The worker
# id is unique across the cluster (a pid is not: two nodes' workers may share one); its .out and .err share it.
_WORKER_FILE = re.compile(r"(?:^|/)worker-([0-9a-f]{16,64})-[0-9a-f]{8}-\d{1,10}\.(?:out|err)$")


def _worker_of(f: FileScan) -> str | None:
    """The Ray worker id a worker log file's name states (all its lines are that worker's), else None."""
    m = _WORKER_FILE.search(f.rel)
    return m.group(1) if m else None


def _worker_ranks(files: list[FileScan], comm: int | None) -> dict[str, int | None]:
    """worker id → the rank its own log files state (NCCL's init line of the world communicator, else the rank the
    scan gave a line: its c10d `[rankN]:` prefix); None where they state two."""
    out: dict[str, int | None] = {}
    for f in files:
        if (wid := _worker_of(f)) is None:
            continue
        for h in f.hits:
            rank = (h.fields.get("comm_rank") if h.pattern == "nccl.comm_init" and comm is not None
                    and h.fields.get("nranks") == comm else h.rank)
            if isinstance(rank, int):
                out[wid] = rank if out.get(wid, rank) == rank else None
    return out


# a remote traceback's lines follow its header at most this far apart (frames and their source lines)
_REPORT_LINES = 40
# the line that ends a Python traceback: `torch.OutOfMemoryError: ...`, `RuntimeError: ...`
_EXCEPTION = re.compile(r"\s*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b")


def _world_comm(files: list[FileScan], world: int | None) -> int | None:
    """The size of the job's world communicator as NCCL's init lines state it: the world size where known, else
    the largest `nranks` an init line states (a sub-communicator, tensor- or pipeline-parallel, is smaller)."""
    if world:
        return world
    sizes = [n for f in files for h in f.hits if h.pattern == "nccl.comm_init"
             and isinstance(n := h.fields.get("nranks"), int)]
    return max(sizes, default=None)


def _stated(files: list[FileScan], world: int | None = None) -> dict[tuple[str | None, str], int | None]:
    """(ip, pid) → the rank stated for that process; None where two ranks are stated for it."""
    out: dict[tuple[str | None, str], int | None] = {}
    comm = _world_comm(files, world)
    for f in files:
        for h in f.hits:
            ip: str | None
            if h.pattern == "ray.train_worker_table":  # the trainer's line about another process
                ip, pid, rank = h.fields.get("ip"), h.fields.get("pid"), h.fields.get("world_rank")
            elif (m := _PREFIX.match(h.text)) is not None:
                ip, pid = m.group("ip"), m.group("pid")
                # the set-up line's own field; NCCL's init line of the world communicator (`ncclCommInitRank comm ..
                # rank 5 nranks 8 cudaDev 5 ..`: in it the rank is the global rank); else the line's own `[rankN]:`
                # (never its file's rank)
                rank = (h.fields.get("world_rank") if h.pattern == "ray.train_worker_rank"
                        else h.fields.get("comm_rank") if h.pattern == "nccl.comm_init" and comm is not None
                        and h.fields.get("nranks") == comm
                        else attribute_line(h.text).rank)
            else:
                continue
            if isinstance(rank, int) and isinstance(pid, str):
                key = (ip, pid)
                out[key] = rank if out.get(key, rank) == rank else None
    return out


def _lookup(stated: dict[tuple[str | None, str], int | None], by_pid: dict[str, list[tuple[str | None, int | None]]],
            ip: str | None, pid: str) -> int | None:
    """The rank stated for (ip, pid); a line or a statement without the IP matches that pid on every node only
    when all the statements for it agree. `by_pid` indexes `stated` by pid (one lookup per hit, not a scan)."""
    if ip is not None and (ip, pid) in stated:
        return stated[(ip, pid)]
    ranks = {r for i, r in by_pid.get(pid, ()) if ip is None or i is None}
    return next(iter(ranks)) if len(ranks) == 1 else None


def actor_ranks(files: list[FileScan], world: int | None) -> list[str]:
    """Give a Ray worker's lines that state no rank the rank its other lines state (module docstring)."""
    stated = _stated(files, world)
    workers = _worker_ranks(files, _world_comm(files, world))
    if not any(r is not None for r in stated.values()) and not any(r is not None for r in workers.values()):
        return []
    by_pid: dict[str, list[tuple[str | None, int | None]]] = {}
    for (i, p), r in stated.items():
        by_pid.setdefault(p, []).append((i, r))
    moved = 0
    for f in files:
        report: tuple[int, int] | None = None  # (rank, line) of the driver's last report of a failed task
        wid = _worker_of(f)
        for h in sorted(f.hits, key=lambda x: x.line):
            if h.rank is not None:
                continue
            m = _PREFIX.match(h.text)
            own = m is not None
            m = m or _TASK.search(h.text)
            if m is None and wid is not None:  # a line of a Ray worker's own log file: that worker's
                if (rank := workers.get(wid)) is not None:
                    f.reattribute(h, rank)
                    moved += 1
                continue
            if m is None:
                # the remote traceback the driver prints under its report of the task, with no prefix of its own
                # (`Unhandled error ...: ray::WorkerDict.update_actor() (pid=.., ip=..)`, its frames, then
                # `torch.OutOfMemoryError: ...`): the task's rank, up to the exception that ends it
                if report is not None and h.line - report[1] <= _REPORT_LINES:
                    f.reattribute(h, report[0], own_line=False)
                    moved += 1
                    report = None if _EXCEPTION.match(h.text) else (report[0], h.line)
                continue
            ip, pid = (m.group("ip"), m.group("pid")) if own or m.group("pid") else (m.group("mip"), m.group("mpid"))
            rank = _lookup(stated, by_pid, ip, pid)
            report = (rank, h.line) if rank is not None and not own else None
            if rank is not None:
                f.reattribute(h, rank, own_line=own)
                moved += 1
    n = sum(r is not None for r in stated.values())
    return [f"{moved} lines of Ray workers given the rank their process states ({n} worker pids with a stated "
            f"rank)"] if moved else []
