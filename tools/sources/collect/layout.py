"""The bundle `debugger collect` writes: a contract between the collector (agent/collect) and the readers
(tools/sources/pyspy, tools/sources/hw, manifests.py), defined here once and imported by both sides:

    OUT/<host>/collect.json                          the manifest (below)
    OUT/<host>/stacks/rank-<R>.pid-<P>.pyspy.txt     py-spy dump, text   (pid-<P>.pyspy.txt: rank unknown)
    OUT/<host>/stacks/rank-<R>.pid-<P>.pyspy.json    py-spy dump --json
    OUT/<host>/nvidia-smi-q.txt  nvidia-smi-topo-m.txt  ibstat.txt  ibv_devinfo.txt  perfquery.txt  dmesg.txt
    OUT/<host>/dcgmi-diag.txt                        (only with --dcgm)

collect.json: {format: "trainlog-debugger/collect", version: 1, host, time (UTC ISO 8601), found_by, tools
{trainlog-debugger, python, py-spy}, processes: [{pid, ppid, rank, local_rank, world_size, group_rank, master_addr,
found_by, cmdline (one string, secrets redacted by tools/redact.py), dumps: [paths relative to OUT/<host>], error,
fix}], snapshots: [{name, command, file, rc, seconds, skipped, error}]}. Every path in it is relative to OUT/<host>.

Why one directory per host under one OUT: the same command runs on every node at once (srun, an ssh loop) into a
shared directory, so each node owns exactly its own subdirectory and never touches another's. The readers rely on
it too: a manifest names the node of every file below its folder (none of py-spy, nvidia-smi -q or ibstat prints a
host name), and its processes say which rank each dumped pid was.
"""

from __future__ import annotations

FORMAT = "trainlog-debugger/collect"
VERSION = 1
MANIFEST = "collect.json"
STACKS = "stacks"
NVSMI_Q, NVSMI_TOPO, IBSTAT, IBV_DEVINFO, PERFQUERY, DMESG, DCGMI_DIAG = (
    "nvidia-smi-q.txt", "nvidia-smi-topo-m.txt", "ibstat.txt", "ibv_devinfo.txt", "perfquery.txt", "dmesg.txt",
    "dcgmi-diag.txt")
SNAPSHOT_FILES = frozenset({NVSMI_Q, NVSMI_TOPO, IBSTAT, IBV_DEVINFO, PERFQUERY, DMESG, DCGMI_DIAG})
#: what a host's directory may hold: a directory of only these is a collect directory (maybe still being written
#: by its node, so collect.json need not be there yet)
HOST_DIR_NAMES = SNAPSHOT_FILES | {MANIFEST, MANIFEST + ".tmp", STACKS}


def stack_stem(pid: int, rank: int | None) -> str:
    """`rank-<R>.pid-<P>`, or `pid-<P>` when the process's environment stated no rank."""
    return f"rank-{rank}.pid-{pid}" if rank is not None else f"pid-{pid}"


def stack_file(stem: str, fmt: str) -> str:
    """A dump's path below OUT/<host>: `stacks/<stem>.pyspy.txt` (fmt "txt") or `.pyspy.json`."""
    return f"{STACKS}/{stem}.pyspy.{fmt}"
