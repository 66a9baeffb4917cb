"""Reading a bundle's hardware snapshots (the I/O half of tools/sources/hw: the parsers, the attribution and the
comparison are pure)."""

from __future__ import annotations

from trainlog_debugger.tools.sources.collect.attribute import node_of
from trainlog_debugger.tools.sources.hw.parse import parse_any
from trainlog_debugger.tools.sources.hw.record import Record
from trainlog_debugger.tools.sources.collect.manifests import read_manifests

MAX_SNAPSHOT_BYTES = 16 << 20  # nvidia-smi -q of 8 GPUs is ~60 KB; perfquery of a switch a few hundred KB


def known_nodes(scan) -> set[str]:
    """Node names the worker logs state (the scan's rank→node attribution and each file's nodes)."""
    out = {ev.node for ev in scan.rank_nodes.values() if ev.node}
    for f in scan.files:
        out |= {n for n in f.nodes if n}
    return out


def read_hardware(bundle, scan, kinds: frozenset[str]) -> tuple[list[Record], list[str]]:
    """Every snapshot of the bundle (sources whose kind is in `kinds`), parsed, each record with its node. Notes say
    what could not be read, what was cut and which snapshots name no node."""
    from trainlog_debugger.tools.bundle.source import read_capped
    notes: list[str] = []
    manifests = {folder: m.host for folder, m in read_manifests(bundle, notes).items() if m.host}
    records: list[Record] = []
    for src in bundle.sources:
        if src.kind not in kinds:
            continue
        text = read_capped(src, MAX_SNAPSHOT_BYTES, "snapshot", notes)
        if text is not None:
            records += parse_any(src.rel, text)
    known = known_nodes(scan) | set(manifests.values()) | {h for r in records for h in r.hosts}
    unattributed = set()
    for r in records:
        r.node, r.node_basis = node_of(r.file, manifests, known, r.hosts)
        if r.node is None:
            unattributed.add(r.file)
    if unattributed:
        notes.append(f"{len(unattributed)} hardware snapshot(s) name no node (no collect.json host, no known node "
                     f"name in the path or the content), compared as unattributed: {', '.join(sorted(unattributed)[:5])}")
    return records, notes
