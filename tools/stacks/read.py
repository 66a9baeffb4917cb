"""Reading the stack dumps of a bundle (the I/O half of tools/stacks: report.py parses and groups, purely)."""

from __future__ import annotations

from trainlog_debugger.tools.stacks.report import Stack, parse

MAX_DUMP_BYTES = 64 << 20  # one dump file; a py-spy dump of 1,000 threads is a few MB


def read_stacks(bundle, also: set[str] = frozenset()) -> tuple[list[Stack], list[str]]:
    """Every stack-dump source of the bundle, parsed: files detected as py-spy dumps, and `also` (files whose lines
    the scan saw as stack frames: faulthandler output inside a log). A file past MAX_DUMP_BYTES is read up to it and
    said so."""
    from trainlog_debugger.tools.bundle.open import READ_ERRORS
    out: list[Stack] = []
    notes: list[str] = []
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
        out += parse(src.rel, raw[:MAX_DUMP_BYTES].decode("utf-8", "replace"))
    return out, notes
