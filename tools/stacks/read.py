"""Reading the stack dumps of a bundle (the I/O half of tools/stacks: report.py parses and groups, purely)."""

from __future__ import annotations

import json
import posixpath

from trainlog_debugger.tools.stacks.report import Stack, attach_ranks, parse

MAX_DUMP_BYTES = 64 << 20  # one dump file; a py-spy dump of 1,000 threads is a few MB
MAX_MANIFEST_BYTES = 4 << 20  # a collect.json lists a node's processes and snapshots: kilobytes
MANIFEST = "collect.json"


def read_stacks(bundle, also: set[str] = frozenset()) -> tuple[list[Stack], list[str]]:
    """Every stack-dump source of the bundle, parsed: files detected as py-spy dumps, and `also` (files whose lines
    the scan saw as stack frames: faulthandler output inside a log). A file past MAX_DUMP_BYTES is read up to it and
    said so. Dumps under a `debugger collect` node directory take that node's host, and the rank its manifest
    read from the process's environment when the file name does not say it."""
    from trainlog_debugger.tools.bundle.open import READ_ERRORS
    out: list[Stack] = []
    notes: list[str] = []
    manifests = read_manifests(bundle, notes)
    for src in bundle.sources:
        if src.kind != "pyspy" and src.rel not in also:
            continue
        try:
            with src.open() as fh:
                raw = fh.read(MAX_DUMP_BYTES + 1)
        except READ_ERRORS as e:
            notes.append(f"{src.rel}: not read ({e})")
            continue
        if len(raw) > MAX_DUMP_BYTES:
            notes.append(f"{src.rel}: only the first {MAX_DUMP_BYTES:,} bytes of the dump were read")
        got = parse(src.rel, raw[:MAX_DUMP_BYTES].decode("utf-8", "replace"))
        man = manifest_for(src.rel, manifests)
        if man is not None:
            host, pids = man
            for s in got:
                s.node = s.node or host
            attach_ranks(got, {p: [(r, host)] for p, r in pids.items()})
        out += got
    return dedupe(out), notes


def dedupe(stacks: list[Stack]) -> list[Stack]:
    """One stack per process: `debugger collect` (and people) save a py-spy dump twice, as text and as --json, so
    the same (directory, pid) can come twice. The text dump is kept (its frame lines read best when cited); stacks
    with no pid are all kept."""
    seen: dict[tuple[str, str], int] = {}
    out: list[Stack] = []
    for s in sorted(stacks, key=lambda s: s.file.endswith(".json")):  # text first
        if s.pid is None:
            out.append(s)
            continue
        key = (posixpath.dirname(s.file.replace("!", "/")), s.pid)
        if key not in seen:
            seen[key] = len(out)
            out.append(s)
    return out


def read_manifests(bundle, notes: list[str]) -> dict[str, tuple[str | None, dict[str, int]]]:
    """{directory of a collect.json: (host, {pid: rank})}. A manifest that is not JSON, or too big, is noted and
    ignored: the dumps are still read, by their file names."""
    from trainlog_debugger.tools.bundle.open import READ_ERRORS
    out: dict[str, tuple[str | None, dict[str, int]]] = {}
    for src in bundle.sources:
        if posixpath.basename(src.rel.replace("!", "/")) != MANIFEST:
            continue
        try:
            with src.open() as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
            if len(raw) > MAX_MANIFEST_BYTES:
                raise ValueError(f"larger than {MAX_MANIFEST_BYTES:,} bytes")
            doc = json.loads(raw.decode("utf-8", "replace"))
        except (*READ_ERRORS, ValueError) as e:
            notes.append(f"{src.rel}: manifest ignored ({e})")
            continue
        if not isinstance(doc, dict):
            continue
        host = doc.get("host") if isinstance(doc.get("host"), str) else None
        pids: dict[str, int] = {}
        for p in doc.get("processes") or []:
            if isinstance(p, dict) and isinstance(p.get("rank"), int) and 0 <= p["rank"] < 1 << 20 and p.get("pid"):
                pids[str(p["pid"])] = p["rank"]
        out[posixpath.dirname(src.rel.replace("!", "/"))] = (host, pids)
    return out


def manifest_for(rel: str, manifests: dict) -> tuple[str | None, dict[str, int]] | None:
    """The manifest of the nearest enclosing directory of `rel`, if any."""
    d = posixpath.dirname(rel.replace("!", "/"))
    while True:
        if d in manifests:
            return manifests[d]
        if not d:
            return None
        d = posixpath.dirname(d)
