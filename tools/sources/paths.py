"""What a log file's path says about who wrote it: rank, local rank, node, restart, job. The loop over every source's
`PATH_HINTS` (tools/sources/declare.py PathRule), plus the labels no single producer owns.

Why from the registry: a path is framed by whatever launched the job (torchrun's `attempt_0/3/stderr.log`,
AIStore's `aistarget.ais-target-3.INFO...`, `slurm-4242.out`, Vertex AI's `workerpool0-1`), and each source knows its
own layout; a new launcher declares its rule in its format module and this loop finds it. Only clearly labelled
names count ('rank_3.log', 'attempt_0/3/stderr.log', 'error-4891784-3.out', 'node_H100-1.log',
'aistarget.ais-target-3.INFO.0821-191752.4171', '.../workerpool0-1...'); 'worker_3.log' or 'out_7.log' give an
empty hint: never guess.

Each path part (archive members split at `!`) goes through every "part" rule in place order, then the whole path
through every "path" rule; a later hint's field overrides an earlier one's, and the styles join with '+' in the
order they first applied (`slurm_job+rank_name`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from trainlog_debugger.tools.sources import declared
from trainlog_debugger.tools.sources.declare import PathRule


@dataclass(frozen=True, slots=True)
class PathHint:
    rank: int | None = None
    local_rank: int | None = None
    node: str | None = None
    node_index: int | None = None  # SLURM %n-style per-node file index, e.g. error-<job>-<n>.out
    attempt: int | None = None  # torchrun --log-dir attempt_N
    job_id: str | None = None
    style: str | None = None  # '+'-joined when several hints combine, e.g. 'slurm_job+rank_name'


# the labels anyone may write into a file name: `rank_3.log`, `local_rank-1.out`, `task7.log`, `node_H100-1.log`
_RANK = re.compile(
    r"(?i)(?:^|[_\-.])(?P<kind>local[_\-]?rank|node[_\-]?rank|global[_\-]?rank|rank|task)[_\-]?(?P<n>\d{1,7})(?=[_\-.]|$)"
)
# 'node_H100-1.log', 'host-gpu7.out'; a trailing word that names what the file holds (`node_48_pyspy.log`,
# `host-a_dmesg.txt`) is not part of the node's name, nor is a rank label after it (`node-b14.rank10.err`: the node
# is b14 and the rank 10, which _RANK reads; one node per rank file made a 16-rank job "16 nodes").
_NODE = re.compile(r"(?i)(?:node|host)[_\-](?!rank)(?P<n>[A-Za-z0-9][\w.\-]*?)"
                   r"(?:[_\-.](?:local[_\-]?|global[_\-]?)?(?:rank|task)[_\-]?\d{1,7})?"
                   r"(?:[_\-](?:py-?spy|stacks?|traces?|dmesg|kern|syslog|nvidia[_\-]?smi|smi|stdout|stderr|logs?))?"
                   r"\.(?:log|txt|out|err)")
_RANK_KEY = {"local_rank": "local_rank", "localrank": "local_rank", "node_rank": "node_index",
             "noderank": "node_index"}


def _rank(part: str) -> tuple[str, dict[str, object]] | None:
    m = _RANK.search(part)
    if not m:
        return None
    kind = m.group("kind").lower().replace("-", "_")
    return ("task_name" if kind == "task" else "rank_name"), {_RANK_KEY.get(kind, "rank"): int(m.group("n"))}


def _node(part: str) -> tuple[str, dict[str, object]] | None:
    m = _NODE.fullmatch(part)
    if m and any(c.isalpha() for c in m.group("n")):  # 'node_3.log': index or name? don't guess
        return "node_name", {"node": m.group("n")}
    return None


GENERIC = (PathRule("part", 30, _rank, "logs/rank_3.log"), PathRule("part", 40, _node, "logs/node_H100-1.log"))


@lru_cache(maxsize=1)
def rules() -> tuple[tuple[PathRule, ...], tuple[PathRule, ...]]:
    """(part rules, path rules), each in place order: the sources' PATH_HINTS and the generic labels."""
    out = list(GENERIC)
    for src, hints in declared("PATH_HINTS"):
        assert isinstance(hints, tuple | list), src
        out.extend(hints)
    out.sort(key=lambda r: r.place)
    return tuple(r for r in out if r.scope == "part"), tuple(r for r in out if r.scope == "path")


def attribute_path(relpath: str) -> PathHint:
    """Rank/node hints from a log file's path (archive members as 'a.tar.gz!dir/file')."""
    path = relpath.replace("\\", "/")
    f: dict[str, object] = {}
    styles: list[str] = []

    def put(hit: tuple[str, dict[str, object]] | None) -> None:
        if hit is not None:
            f.update(hit[1])
            if hit[0] not in styles:
                styles.append(hit[0])

    parts, whole = rules()
    for comp in re.split(r"[/!]", path):
        if comp:
            for r in parts:
                put(r.test(comp))
    for r in whole:
        put(r.test(path))
    if not styles:
        return PathHint()
    return PathHint(style="+".join(styles), **f)  # type: ignore[arg-type]
