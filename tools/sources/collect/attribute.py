"""Which node a snapshot describes (pure). In order of trust:

1. the `host` of a `collect.json` manifest in the snapshot's folder or the nearest parent folder (written by
   `debugger collect` on the node itself);
2. a folder name, or a part of the file name, equal to a node name the bundle already knows (the worker logs'
   nodes, manifests' hosts): `node-17/ibstat.txt`, `ibstat.node-17.txt`; the longest such name wins, and a name
   must stand alone (`node-1` is not found in `node-17`);
3. the file's own content: the one host every nccl-tests rank line names;
4. otherwise none: the snapshot is reported unattributed, never assigned by guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_HOST = 253  # a DNS name


def clean_host(v: object) -> str | None:
    """A manifest's or a line's host name, if it looks like one (bounded, no spaces or control characters)."""
    if not isinstance(v, str):
        return None
    v = v.strip()
    return v if 0 < len(v) <= MAX_HOST and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v) else None


def folder_of(rel: str) -> str:
    """The folder of a bundle path, archive members included (`a.tgz!n1/x.txt` → `a.tgz/n1`)."""
    p = rel.replace("\\", "/").replace("!", "/")
    return p.rsplit("/", 1)[0] if "/" in p else ""


def node_of(rel: str, manifests: dict[str, str], known: Iterable[str], hosts: tuple[str, ...] = ()
            ) -> tuple[str | None, str]:
    """(node, how it was found) for the snapshot at bundle path `rel`. `manifests`: folder → host of the
    collect.json there; `known`: node names the bundle knows; `hosts`: host names the file's content states."""
    folder = folder_of(rel)
    while True:
        if folder in manifests:
            where = f"{folder}/collect.json" if folder else "collect.json"
            return manifests[folder], f"host in {where}"
        if not folder:
            break
        folder = folder.rsplit("/", 1)[0] if "/" in folder else ""
    path = rel.replace("\\", "/").replace("!", "/")
    parts = path.split("/")
    names = sorted({k for k in known if k}, key=len, reverse=True)
    for k in names:
        if k in parts[:-1]:
            return k, f"folder name {k}"
    for k in names:
        if re.search(r"(?<![A-Za-z0-9])" + re.escape(k) + r"(?![A-Za-z0-9])", parts[-1]):
            return k, f"file name {parts[-1]}"
    if len(set(hosts)) == 1:
        return hosts[0], "host named in the file's own lines"
    return None, "unattributed: no collect.json host, no known node name in its path, no single host in its lines"
