"""Global ranks for lines that only carry a LOCAL rank, from what the launcher itself states.

torchrun writes worker output as `[default3]:...` on its console and as `<run>/attempt_0/3/stderr.log` with
`--log-dir`: both name the local rank only. Its ChildFailedError report states, per failed worker:

      host      : gpu-node-17
      rank      : 5 (local_rank: 1)
      exitcode  : -9 (pid: 14548)  (SIGKILL)
      error_file: /tmp/torchelastic_x/73105_gou78ht2/attempt_0/1/error.json

so local rank 1 of that agent is global rank 5. Mappings used, each stated or deduced, never guessed:
1. a record's error_file path names the run dir and local rank of a log-dir file;
2. one agent in the bundle (one run dir, or none) and every record on one host: the records apply to it;
3. one agent whose local ranks are exactly 0..W-1 for a stated world size W: that agent ran the whole job, so
   local rank = global rank (torchrun numbers node 0's workers 0..nproc-1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainlog_debugger.tools.scan.result import FileScan
from trainlog_debugger.tools.sources.torchrun.format import log_dir_file

RECORD_PATTERNS = ("torchrun.failure_host", "torchrun.failure_rank", "torchrun.exitcode", "torchrun.signal_received",
                   "torchrun.error_file")


@dataclass
class Record:
    """One entry of a ChildFailedError report."""

    rank: int
    local_rank: int
    host: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    error_file: str | None = None
    file: str = ""
    lines: list[int] = field(default_factory=list)


def records(files: list[FileScan]) -> list[Record]:
    out: list[Record] = []
    for f in files:
        cur: Record | None = None
        host = None
        for h in f.hits:
            if h.pattern not in RECORD_PATTERNS:
                continue
            if h.pattern == "torchrun.failure_host":
                host, cur = h, None
            elif h.pattern == "torchrun.failure_rank" and isinstance(h.fields.get("failed_rank"), int):
                cur = Record(h.fields["failed_rank"], h.fields.get("failed_local_rank", -1), file=f.rel, lines=[h.line])
                if host is not None and 0 < h.line - host.line <= 3:
                    cur.host, cur.lines = host.fields.get("host"), [host.line, h.line]
                out.append(cur)
            elif cur is not None and h.line - cur.lines[-1] <= 8:
                cur.lines.append(h.line)
                if h.pattern == "torchrun.exitcode":
                    cur.exitcode = h.fields.get("exitcode")
                    cur.signal = cur.signal or h.fields.get("signal")
                elif h.pattern == "torchrun.signal_received":
                    cur.signal = h.fields.get("signal")
                elif h.pattern == "torchrun.error_file":
                    cur.error_file = h.fields.get("error_file")
    return out


def _agent(rel: str) -> tuple[str, int] | None:
    """(run dir, local rank) of a torchrun --log-dir file, e.g. 'logs/7310_ab/attempt_0/3/stderr.log'."""
    f = log_dir_file(rel)
    return (f.run, f.local_rank) if f is not None and f.run is not None else None


def resolve(files: list[FileScan], world: int | None) -> list[str]:
    """Give hits with a local rank but no global rank the global rank the launcher states; returns notes."""
    recs = records(files)
    runs = {a[0] for f in files if (a := _agent(f.rel))}
    consoles = [f for f in files if not _agent(f.rel) and any(h.local_rank is not None for h in f.hits)]
    maps: dict[str, dict[int, int]] = {}  # scope (run dir, or console file) → local → global
    notes: list[str] = []
    for r in recs:  # 1. error_file paths
        e = log_dir_file(r.error_file or "")
        if e is not None and e.file == "error.json" and e.run_name is not None:
            for run in runs:
                if run.endswith(e.run_name):
                    maps.setdefault(run, {})[e.local_rank] = r.rank
    single = len(runs) <= 1 and len({r.host for r in recs}) <= 1
    scopes = list(runs) + [f.rel for f in consoles]
    if single:  # 2. one agent: every record applies to its run dir and its console
        for scope in scopes:
            for r in recs:
                if r.local_rank >= 0:
                    maps.setdefault(scope, {}).setdefault(r.local_rank, r.rank)
        locals_seen = {a[1] for f in files if (a := _agent(f.rel))} | {
            h.local_rank for f in consoles for h in f.hits if h.local_rank is not None}
        if world and locals_seen and locals_seen == set(range(world)):  # 3. the agent ran the whole job
            for scope in scopes:
                for lr in locals_seen:
                    maps.setdefault(scope, {}).setdefault(lr, lr)
            notes.append(f"one torchrun agent ran local ranks 0-{world - 1} of a world of {world}: local rank = "
                         f"global rank")
    if not maps and not recs:
        return notes
    by_file_rec: dict[tuple[str, int], int] = {}  # a record's own lines (exitcode, signal, error_file) belong to its rank, whatever the layout
    for r in recs:
        for ln in r.lines:
            by_file_rec[(r.file, ln)] = r.rank
    for f in files:
        a = _agent(f.rel)
        scope = a[0] if a else f.rel
        m = maps.get(scope, {})
        for h in f.hits:
            rank: int | None = by_file_rec.get((f.rel, h.line))
            own = rank is None
            if rank is None and h.rank is None:
                local = a[1] if a else h.local_rank
                rank = m.get(local) if local is not None else None
            if rank is not None and h.rank is None:
                f.reattribute(h, rank, own_line=own)
        if a and a[1] in m:
            own_rank = m[a[1]]
            f.ranks.add(own_rank)
            if None in f.last_lines:
                f.last_lines[own_rank] = f.last_lines.pop(None)
        for lr, mapped in m.items():
            if not a and lr in f.last_local:
                f.last_lines[mapped] = f.last_local.pop(lr)
                f.ranks.add(mapped)
            if not a:
                f.local_to_rank.setdefault(lr, mapped)
    return notes
