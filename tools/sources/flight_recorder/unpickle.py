"""Restricted unpickling of flight-recorder dumps (for tools.sources.flight_recorder.analyze.load_dump): only plain data ever comes out.

A dump is a pickle, and unpickling runs whatever the stream asks for, so it is read with a RESTRICTED unpickler:
`find_class` and `persistent_load` refuse everything, which leaves only the opcodes that build plain containers,
numbers, strings, bytes, bools and None (a REDUCE/BUILD/NEWOBJ needs a callable that only `find_class` could
supply). Nothing the stream names is ever imported. The result is then walked once more and must contain only those
plain types, at most MAX_DEPTH deep (the second lock: an EXT opcode served from copyreg's extension cache would
bypass find_class; and the depth bound protects everything downstream that recurses). A refusal raises `DumpRefused`
with ONE line ("refused: the pickle asks for posix.system; flight-recorder dumps only contain plain data":
`os.system` pickles as `posix.system` on Linux), listed as skipped, never a traceback.

Budgets (a dump is a stranger's file: a "pickle bomb" needs no global at all). Bytes: the file is capped before
loading (analyze.MAX_DUMP_BYTES). Memory: one opcode byte can build a 64-byte object (`]` EMPTY_LIST + APPEND), so
the byte cap alone does not bound memory; the load runs under `memory_budget`, an address-space limit of
LOAD_MEMORY above what the process already uses (RLIMIT_AS, lifted again after the load), and the C unpickler's
MemoryError becomes "over budget". Objects and depth: `check_plain` walks at most MAX_OBJECTS references and
MAX_DEPTH levels, so memo-referencing bombs (a list holding the previous list twice, 64 times: 2^64 references
in a few hundred bytes) stop at the budget instead of being expanded.
"""

from __future__ import annotations

import gc
import operator
import pickle
import re
from contextlib import contextmanager
from functools import partial
from itertools import chain, compress, islice
from typing import Any

MAX_DEPTH = 64                  # dumps nest 5 levels deep; anything deeper is not one
MAX_OBJECTS = 6_000_000         # references walked: a 20,000-entry dump with frames holds ~2-3 million
MAX_ENTRIES = 500_000           # torch's ring buffer holds TORCH_NCCL_TRACE_BUFFER_SIZE entries: 2,000-20,000
# An int this large is refused with the dump: Python cannot even print one of 4,300 digits (repr, json raise). Ints of
# 21-300 digits are loaded, and entries.as_int reads them as no number (its bound is 20 digits, a uint64).
_HUGE = 1 << 1024
LOAD_MEMORY = 512 << 20         # address space one load may add (the whole run stays under 1 GB)


class DumpRefused(Exception):
    """A dump we will not (or cannot) read. `str(exc)` is one line, fit for a `skipped` reason."""


def one_line(s: str, n: int = 200) -> str:
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", s).strip()
    return s if len(s) <= n else s[: n - 1] + "…"


class PlainUnpickler(pickle.Unpickler):
    """Admits only what plain opcodes build. Every global (GLOBAL, STACK_GLOBAL, INST, EXT*) goes through
    find_class, every persistent id through persistent_load: both refuse, so no callable ever reaches the stack."""

    def find_class(self, module: str, name: str):  # noqa: D102
        raise DumpRefused(f"refused: the pickle asks for {one_line(f'{module}.{name}', 120)}; "
                          "flight-recorder dumps only contain plain data")

    def persistent_load(self, pid: Any):  # noqa: D102
        raise DumpRefused("refused: the pickle asks for a persistent object; flight-recorder dumps only contain "
                          "plain data")


_LEAVES = frozenset({str, bytes, bytearray, int, float, bool, type(None)})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_CONTAINERS = _SEQUENCES | {dict}


def quick_refusal(data: bytes) -> str | None:
    """A JSON dump that cannot be within budget, told before parsing it: every object or array costs a `{` or `[`
    byte (more bytes inside strings only over-count), so more of them than MAX_OBJECTS is over budget for sure."""
    n = data.count(b"{") + data.count(b"[")
    if n > MAX_OBJECTS:
        return (f"over budget: {n:,} JSON objects and arrays, more than the {MAX_OBJECTS:,} a flight-recorder "
                f"dump of at most {MAX_ENTRIES:,} entries has")
    return None


def check_entries(obj: dict) -> None:
    """The entry count a dump may have (MAX_ENTRIES); more is refused, not analysed for minutes."""
    entries = obj.get("entries")
    if isinstance(entries, (list, tuple)) and len(entries) > MAX_ENTRIES:
        raise DumpRefused(f"over budget: {len(entries):,} entries, more than the {MAX_ENTRIES:,} a flight-recorder "
                          "ring buffer holds")


def check_plain(obj: Any) -> None:
    """Level by level (no recursion limit to trip; the per-node work runs in C): only plain types, at most
    MAX_DEPTH deep. The restricted unpickler already makes anything else impossible; this is the second lock, and
    the depth bound protects everything downstream that recurses (json, repr)."""
    level, depth, budget = [obj], 0, MAX_OBJECTS
    is_dict = partial(operator.is_, dict)
    while level:
        depth += 1
        types = list(map(type, level))
        kinds = set(types)
        if not kinds <= _LEAVES | _CONTAINERS:
            bad = next(iter(kinds - _LEAVES - _CONTAINERS))
            raise DumpRefused(f"refused: the dump holds a {bad.__name__}; flight-recorder dumps only contain "
                              "plain data")
        if int in kinds and any(type(x) is int and not -_HUGE < x < _HUGE for x in level):
            raise DumpRefused("refused: an integer of more than 300 digits where a dump has ids, sizes and times; "
                              "not a flight-recorder dump")
        if kinds <= _LEAVES:
            return
        if depth > MAX_DEPTH:
            raise DumpRefused(f"refused: nested more than {MAX_DEPTH} levels deep; not a flight-recorder dump")
        budget -= len(level)
        dicts = list(compress(level, map(is_dict, types)))
        seqs = compress(level, map(_SEQUENCES.__contains__, types))
        level = list(islice(chain(chain.from_iterable(dicts), chain.from_iterable(map(dict.values, dicts)),
                                  chain.from_iterable(seqs)), max(budget, 0) + 1))
        if len(level) > budget:
            raise DumpRefused(f"over budget: more than {MAX_OBJECTS:,} objects (shared references counted each "
                              "time); not a flight-recorder dump")


@contextmanager
def no_gc():
    """Unpickling builds millions of small containers: the cyclic GC would double the time (torch's own loader
    disables it too)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _address_space() -> int | None:
    """This process's virtual memory size in bytes (Linux /proc), None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as f:
            import os
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextmanager
def memory_budget(extra: int | None = None):
    """Allocation beyond `extra` bytes more than now fails with MemoryError instead of growing until the kernel
    kills the process. RLIMIT_AS is process-wide, so it is held only around one load and restored after; where
    there is no `resource` module or no /proc the load runs unbudgeted (bounded by the byte cap only)."""
    extra = LOAD_MEMORY if extra is None else extra
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    used = _address_space()
    if used is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = used + extra
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft != resource.RLIM_INFINITY and soft <= want:
        yield  # already limited at least as tightly
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
