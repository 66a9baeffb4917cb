"""`scan_bundle`: every text source of a bundle through the file pass, in forked workers, then merged.

Files are batched to tens of MB per task, as PERF.md measured (tools.bundle.parallel); the engine is built once
before the workers fork so each inherits it; the parent only merges small per-file summaries (tools.scan.summary).
On a cluster (tools.bundle.distributed) nothing is inherited: each task carries the recipe of the engine (its name
and patterns, sent once per scan), and a worker process builds the engine once and keeps it for later batches.

Another reader may share the pass (ripgrep's `Sink`: the searcher does not know what consumes it): the caller
passes `readers`, each a SharedReader whose function gets the bytes of every file the scan held whole, in the
worker, and whose results come back to the caller by index in bundle.sources. The step reader is one (`ask` reads
step times in the scan's own pass: tools.pipeline); the scanner knows none of them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, cast

from trainlog_debugger.tools.bundle.source import READ_ERRORS, natural_key, read_error_reason
from trainlog_debugger.tools.bundle.parallel import Remote, fewer_collections, map_sources
from trainlog_debugger.tools.scan.engine import HyperscanEngine, ReEngine, make_engine
from trainlog_debugger.tools.scan.labels import label_db
from trainlog_debugger.tools.scan.filepass import FileScanner, forget_lines
from trainlog_debugger.tools.scan.result import FileScan, ScanResult
from trainlog_debugger.tools.scan.summary import summarize
from trainlog_debugger.tools.sources import declared, patterns

# A shared reader's function: (index in bundle.sources, the source, its FileScan, its bytes) → what it read, or None.
# It runs in the worker (a module-level function: a cluster task pickles it by name).
ReadFn = Callable[[int, Any, FileScan, bytes], Any]


@dataclass
class SharedReader:
    """A reader that shares the scan's pass over each file the scan held whole (one buffer, read without error,
    its line ends as they are on disk): `read` runs in the worker on those bytes, and what it returns (when not
    None) is put into `got` by index in bundle.sources, in the caller's process."""

    read: ReadFn
    got: dict[int, Any] = field(default_factory=dict)


def text_skip_kinds() -> set[str]:
    """Kinds that are not lines: those whose citations the sources re-read with a verifier of their own
    (`VERIFIERS`, the flight recorder's binary dumps), which have their own readers too."""
    return {kind for _src, table in declared("VERIFIERS") for kind in cast("dict[str, str]", table)}


# Engines of the scans running in this process, by a token per call: a forked worker finds its scan's engine here
# (inherited, not pickled: only the token travels with the task), and two scans in two threads of one process (the
# Slack bot) each find their own. Each thread scans with its own Hyperscan scratch (engine.thread_scratch).
_ENGINES: dict[int, tuple[object, tuple[ReadFn, ...]]] = {}
_TOKENS = itertools.count()


def _scan_sources(token: int, batch: list) -> list:
    engine, reads = _ENGINES[token]
    return _scan_with(engine, batch, reads)


@dataclass(frozen=True)
class _Recipe:
    """What a cluster worker needs to build the scan's engine: a catalog engine's name and patterns (a compiled
    Hyperscan database does not pickle; the worker loads it from its disk cache or compiles it), or an engine object
    that pickles as it is (grep's one-regex engine)."""

    engine: object
    patterns: tuple = ()

    @staticmethod
    def of(eng) -> "_Recipe":
        return _Recipe(eng.name, tuple(eng.patterns)) if type(eng) in (HyperscanEngine, ReEngine) else _Recipe(eng)

    @cached_property
    def key(self) -> str:
        import hashlib
        import pickle
        return hashlib.sha256(pickle.dumps((self.engine, self.patterns))).hexdigest()

    def build(self):
        return make_engine(self.patterns, self.engine) if isinstance(self.engine, str) else self.engine


_BUILT: dict[str, object] = {}   # engines built in this cluster worker process, by recipe key
BUILT_KEPT = 4                   # the catalog's, a grep's or two


def _remote_scan(batch: list, recipe: _Recipe, reads: tuple[ReadFn, ...] = ()) -> list:
    """`_scan_sources` on a cluster worker, with the engine built there (once per worker process and recipe)."""
    eng = _BUILT.get(recipe.key)
    if eng is None:
        eng = recipe.build()
        if len(_BUILT) >= BUILT_KEPT:
            del _BUILT[next(iter(_BUILT))]
        _BUILT[recipe.key] = eng
    return _scan_with(eng, batch, reads)


_SCANNER = threading.local()


def _scanner(engine: Any) -> FileScanner:
    """This thread's FileScanner for `engine`, made once per scan. Why: a scan read in-process (a bundle under
    PARALLEL_MIN_BYTES, or workers=1) is one batch per file, and each FileScanner gathers the sources' hooks
    (`declared`, four times): ~0.15 ms a file, 0.6 s of an in-process scan of 4,096 files. Per thread: a scanner
    holds the file being scanned (two scans in two threads each have their own)."""
    got = getattr(_SCANNER, "last", None)
    if got is None or got[0] is not engine:
        got = _SCANNER.last = (engine, FileScanner(engine))
    return got[1]


def _scan_with(engine: Any, batch: list, reads: tuple[ReadFn, ...] = ()) -> list:
    """FileScans of a batch of sources; of `(index, source)` pairs (a scan that shares its pass with other
    readers), `(FileScan, index, [what each reader read, or None])`."""
    scanner = _scanner(engine)
    out: list = []
    for item in batch:
        idx, src = item if isinstance(item, tuple) else (None, item)
        try:
            with src.open() as stream:
                fs = scanner.scan(src.rel, src.kind, src.size, stream, sized=not src.gzip)
        except READ_ERRORS as e:  # the scanner handles mid-stream errors; this is open() itself failing
            fs = FileScan(rel=src.rel, kind=src.kind, size=src.size, error=read_error_reason(e))
            scanner.whole = None
        if idx is None:
            out.append(fs)
        else:
            whole = _as_on_disk(fs, scanner.whole)
            out.append((fs, idx, [None if whole is None else read(idx, src, fs, whole) for read in reads]))
        scanner.whole = None
    return out


def _as_on_disk(fs: FileScan, whole: bytes | None) -> bytes | None:
    """The file's bytes for the shared readers: only when one buffer held the whole file, read without error, and
    the bytes are the file's own (CR-only line ends are rewritten for the scan). Other files the readers read
    themselves, if they need them."""
    if whole is None or fs.error or any("carriage return only" in n for n in fs.notes):
        return None
    return whole


def scan_bundle(bundle: Any, *, workers: int | None = None, engine: Any = None, pats: Any = None,
                progress: Callable[[int, int], None] | None = None, cluster: Any = None,
                readers: Sequence[SharedReader] = ()) -> ScanResult:
    """`engine` is an engine name (None = fastest available) or a ready engine object over `pats`
    (grep passes its own one-pattern engine); `pats` defaults to the whole catalog. `cluster`: a Dask scheduler
    address or Client (default: DEBUGGER_CLUSTER, if set) to read the bundle's shared files on. `readers`: other
    readers that share this pass (SharedReader): each one's `got` gets, by index in bundle.sources, what it read of
    the files the scan held whole."""
    t0 = time.perf_counter()
    pats = list(pats) if pats is not None else list(patterns())
    eng = engine if hasattr(engine, "candidates") else make_engine(pats, engine)
    label_db()  # load the label database once, before the workers fork, not once per worker
    skip = text_skip_kinds()
    reads = tuple(r.read for r in readers)
    sources: list = [s for s in bundle.sources if s.kind not in skip]
    if readers:
        sources = [(i, s) for i, s in enumerate(bundle.sources) if s.kind not in skip]
    results: list[FileScan] = []
    cluster_notes: list[str] = []
    token = next(_TOKENS)
    _ENGINES[token] = (eng, reads)
    try:
        with fewer_collections():
            for batch in map_sources(partial(_scan_sources, token), sources, workers=workers, progress=progress,
                                     per_worker=16, remote=Remote(_remote_scan, (_Recipe.of(eng), reads)),
                                     cluster=cluster, private=getattr(bundle, "tmpdir", None), notes=cluster_notes):
                for got in batch:
                    if isinstance(got, tuple):
                        got, idx, read = got
                        for r, value in zip(readers, read):
                            if value is not None:
                                r.got[idx] = value
                    results.append(got)
            results.sort(key=lambda f: natural_key(f.rel))
            res = summarize(bundle.root, eng.name, results, list(getattr(bundle, "notes", [])) + cluster_notes,
                            [{"file": s.rel, "reason": s.reason} for s in getattr(bundle, "skipped", [])],
                            {p.id: p for p in pats})
    finally:
        del _ENGINES[token]
        _SCANNER.last = None  # the scan's engine and its last file are not kept past the scan
        forget_lines()  # what this process remembered of the bundle's lines (the file pass's memo)
    res.seconds = time.perf_counter() - t0
    return res
