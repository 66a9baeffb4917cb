"""Reading the stack dumps of a bundle (the I/O half of tools/sources/pyspy: report.py parses and groups, purely)."""

from __future__ import annotations

import posixpath
from collections.abc import Set as AbstractSet

from trainlog_debugger.tools.sources.collect.manifests import manifest_for, read_manifests
from trainlog_debugger.tools.sources.pyspy.report import Stack, attach_ranks, parse
from trainlog_debugger.tools.sources.pyspy.format import PYSPY

MAX_DUMP_BYTES = 64 << 20  # one dump file; a py-spy dump of 1,000 threads is a few MB


def read_stacks(bundle, also: AbstractSet[str] = frozenset()) -> tuple[list[Stack], list[str]]:
    """Every stack-dump source of the bundle, parsed: files detected as py-spy dumps, and `also` (files whose lines
    the scan saw as stack frames: faulthandler output inside a log). A file past MAX_DUMP_BYTES is read up to it and
    said so. Dumps under a `debugger collect` node directory take that node's host, and the rank its manifest
    read from the process's environment when the file name does not say it."""
    from trainlog_debugger.tools.bundle.source import read_capped
    out: list[Stack] = []
    notes: list[str] = []
    manifests = read_manifests(bundle, notes)
    for src in bundle.sources:
        if src.kind != PYSPY and src.rel not in also:
            continue
        text = read_capped(src, MAX_DUMP_BYTES, "dump", notes)
        if text is None:
            continue
        got = parse(src.rel, text)
        man = manifest_for(src.rel, manifests)
        if man is not None:
            for s in got:
                s.node = s.node or man.host
            attach_ranks(got, {p: [(r, man.host)] for p, r in man.pids.items()})
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


