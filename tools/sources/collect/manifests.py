"""`debugger collect`'s manifests (`OUT/<host>/collect.json`), read once for every reader that needs them: the
stack-dump reader (which rank each pid was) and the hardware-snapshot reader (which node a snapshot describes).

Why one place: a manifest is the only statement of which node a folder of dumps and snapshots came from (none of
py-spy, nvidia-smi -q or ibstat prints a host name), so both readers must agree on it. Read with a size cap; a
manifest that is not JSON, or too big, is noted and ignored (the files are still read, by their names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainlog_debugger.tools.sources.collect.attribute import clean_host, folder_of
from trainlog_debugger.tools.sources.collect.layout import MANIFEST

MAX_MANIFEST_BYTES = 4 << 20  # a node's processes and snapshots: kilobytes
MAX_RANK = 1 << 20


@dataclass
class Manifest:
    host: str | None
    pids: dict[str, int] = field(default_factory=dict)  # pid → the RANK its environment stated


def parse_manifest(doc: object) -> Manifest | None:
    """The parts of a collect.json the readers use, each checked for type and bound (pure)."""
    if not isinstance(doc, dict):
        return None
    pids: dict[str, int] = {}
    for p in doc.get("processes") or []:
        if not isinstance(p, dict):
            continue
        rank, pid = p.get("rank"), p.get("pid")
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < MAX_RANK and isinstance(pid, int | str):
            pids[str(pid)[:20]] = rank
    return Manifest(clean_host(doc.get("host")), pids)


def read_manifests(bundle, notes: list[str]) -> dict[str, Manifest]:
    """{folder of a collect.json: Manifest} over the bundle's sources."""
    import json

    from trainlog_debugger.tools.bundle.source import READ_ERRORS
    out: dict[str, Manifest] = {}
    for src in bundle.sources:
        if src.rel.replace("\\", "/").replace("!", "/").rsplit("/", 1)[-1] != MANIFEST:
            continue
        try:
            with src.open() as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
            if len(raw) > MAX_MANIFEST_BYTES:
                raise ValueError(f"larger than {MAX_MANIFEST_BYTES:,} bytes")
            m = parse_manifest(json.loads(raw.decode("utf-8", "replace")))
        except READ_ERRORS + (ValueError, RecursionError) as e:
            notes.append(f"{src.rel}: manifest ignored ({type(e).__name__}: {str(e)[:80]})")
            continue
        if m is not None:
            out[folder_of(src.rel)] = m
    return out


def manifest_for(rel: str, manifests: dict[str, Manifest]) -> Manifest | None:
    """The manifest of `rel`'s folder or its nearest parent folder."""
    folder = folder_of(rel)
    while True:
        if folder in manifests:
            return manifests[folder]
        if not folder:
            return None
        folder = folder.rsplit("/", 1)[0] if "/" in folder else ""
