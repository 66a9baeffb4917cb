"""Restricted unpickling of flight-recorder dumps (for tools.sources.flight_recorder.analyze.load_dump): only plain data ever comes out.

A dump is a pickle, and unpickling runs whatever the stream asks for, so it is read with a RESTRICTED unpickler:
`find_class` and `persistent_load` refuse everything, which leaves only the opcodes that build plain containers,
numbers, strings, bytes, bools and None (a REDUCE/BUILD/NEWOBJ needs a callable that only `find_class` could
supply). Nothing the stream names is ever imported. The result is then walked once more and must contain only those
plain types, at most MAX_DEPTH deep (the second lock: an EXT opcode served from copyreg's extension cache would
bypass find_class; and the depth bound protects everything downstream that recurses). A refusal raises `DumpRefused`
with ONE line ("refused: the pickle asks for posix.system; flight-recorder dumps only contain plain data":
`os.system` pickles as `posix.system` on Linux), listed as skipped, never a traceback.
"""

from __future__ import annotations

import gc
import operator
import pickle
import re
from contextlib import contextmanager
from functools import partial
from itertools import chain, compress
from typing import Any

MAX_DEPTH = 64                  # dumps nest 5 levels deep; anything deeper is not one


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


def check_plain(obj: Any) -> None:
    """Level by level (no recursion limit to trip; the per-node work runs in C): only plain types, at most
    MAX_DEPTH deep. The restricted unpickler already makes anything else impossible; this is the second lock, and
    the depth bound protects everything downstream that recurses (json, repr)."""
    level, depth = [obj], 0
    is_dict = partial(operator.is_, dict)
    while level:
        depth += 1
        types = list(map(type, level))
        kinds = set(types)
        if not kinds <= _LEAVES | _CONTAINERS:
            bad = next(iter(kinds - _LEAVES - _CONTAINERS))
            raise DumpRefused(f"refused: the dump holds a {bad.__name__}; flight-recorder dumps only contain "
                              "plain data")
        if kinds <= _LEAVES:
            return
        if depth > MAX_DEPTH:
            raise DumpRefused(f"refused: nested more than {MAX_DEPTH} levels deep; not a flight-recorder dump")
        dicts = list(compress(level, map(is_dict, types)))
        seqs = compress(level, map(_SEQUENCES.__contains__, types))
        level = list(chain(chain.from_iterable(dicts), chain.from_iterable(map(dict.values, dicts)),
                           chain.from_iterable(seqs)))


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
