"""`scan_bundle`: every text source of a bundle through the file pass, in forked workers, then merged.

Files are batched to tens of MB per task, as PERF.md measured (tools.bundle.parallel); the engine is built once
before the workers fork so each inherits it; the parent only merges small per-file summaries (tools.scan.summary).
On a cluster (tools.bundle.distributed) nothing is inherited: each task carries the recipe of the engine (its name
and patterns, sent once per scan), and a worker process builds the engine once and keeps it for later batches.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial

from trainlog_debugger.tools.bundle.open import READ_ERRORS, natural_key, read_error_reason
from trainlog_debugger.tools.bundle.parallel import Remote, fewer_collections, map_sources
from trainlog_debugger.tools.scan.engine import HyperscanEngine, ReEngine, make_engine
from trainlog_debugger.tools.scan.labels import label_db
from trainlog_debugger.tools.scan.filepass import FileScanner, forget_lines
from trainlog_debugger.tools.scan.result import FileScan, ScanResult
from trainlog_debugger.tools.scan.summary import summarize
from trainlog_debugger.tools.sources import patterns

TEXT_SKIP_KINDS = {"fr_dump"}  # binary dumps have their own reader (tools/sources/flight_recorder)


# Engines of the scans running in this process, by a token per call: a forked worker finds its scan's engine here
# (inherited, not pickled: only the token travels with the task), and two scans in two threads of one process (the
# Slack bot) each find their own. Each thread scans with its own Hyperscan scratch (engine.thread_scratch).
_ENGINES: dict[int, object] = {}
_TOKENS = itertools.count()


def _scan_sources(token: int, batch) -> list:
    return _scan_with(_ENGINES[token], batch)


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


def _remote_scan(batch, recipe: _Recipe) -> list:
    """`_scan_sources` on a cluster worker, with the engine built there (once per worker process and recipe)."""
    eng = _BUILT.get(recipe.key)
    if eng is None:
        eng = recipe.build()
        if len(_BUILT) >= BUILT_KEPT:
            del _BUILT[next(iter(_BUILT))]
        _BUILT[recipe.key] = eng
    return _scan_with(eng, batch)


def _scan_with(engine, batch) -> list:
    """FileScans of a batch of sources; of `(index, source)` pairs (a scan that shares its pass with the step
    reader), `(FileScan, steps FileOut or None)` pairs (see _steps_too)."""
    scanner = FileScanner(engine)
    fatal = {p.id for p in scanner.patterns if p.tier in (1, 2)}
    out = []
    for item in batch:
        idx, src = item if isinstance(item, tuple) else (None, item)
        try:
            with src.open() as stream:
                fs = scanner.scan(src.rel, src.kind, src.size, stream, sized=not src.gzip)
        except READ_ERRORS as e:  # the scanner handles mid-stream errors; this is open() itself failing
            fs = FileScan(rel=src.rel, kind=src.kind, size=src.size, error=read_error_reason(e))
            scanner.whole = None
        out.append(fs if idx is None else (fs, _steps_too(idx, src, fs, scanner.whole, fatal)))
        scanner.whole = None
    return out


def _steps_too(idx: int, src, fs: FileScan, whole: bytes | None, fatal: set[str]):
    """The step reader's FileOut of a file the scan just held whole in memory, read from those bytes (no second
    read), when the file has no fatal line (tiers 1-2: a crash, an error, the cascade after one). Why that test:
    `ask` needs step times only when the diagnosis finds no fault (was the job slow?); such a bundle has no fatal
    line in any file, so every file is read once, while a crashed or hung bundle (fatal lines in nearly every rank's
    file) pays almost nothing for it. Files not read here (fatal lines, several buffers, CR-only line ends) are read
    by tools.steps.analyze.scan_steps later, only if the diagnosis needs them. Each file looks for the job facts
    afresh (reset_facts), as on a cluster worker: the analysis takes each from the first file in bundle order."""
    if whole is None or fs.error or any("carriage return only" in n for n in fs.notes):
        return None
    if any(pid in fatal for pid, _rank in fs.counts):
        return None
    import io
    from trainlog_debugger.tools.steps.parse import FileSteps, reset_facts
    reset_facts()
    return FileSteps(idx, src).run(io.BytesIO(whole))  # BytesIO shares the bytes: read(n >= size) returns them


def scan_bundle(bundle, *, workers: int | None = None, engine=None, pats=None,
                progress: Callable[[int, int], None] | None = None, cluster=None,
                steps_out: dict | None = None) -> ScanResult:
    """`engine` is an engine name (None = fastest available) or a ready engine object over `pats`
    (grep passes its own one-pattern engine); `pats` defaults to the whole catalog. `cluster`: a Dask scheduler
    address or Client (default: DEBUGGER_CLUSTER, if set) to read the bundle's shared files on. `steps_out`: a dict
    that gets, by index in bundle.sources, the step reader's FileOut of every file read for steps in this same pass
    (_steps_too); hand it to tools.steps.analyze.scan_steps(done=...) so those files are not read again."""
    t0 = time.perf_counter()
    pats = list(pats) if pats is not None else list(patterns())
    eng = engine if hasattr(engine, "candidates") else make_engine(pats, engine)
    label_db()  # load the label database once, before the workers fork, not once per worker
    sources = [s for s in bundle.sources if s.kind not in TEXT_SKIP_KINDS]
    if steps_out is not None:
        sources = [(i, s) for i, s in enumerate(bundle.sources) if s.kind not in TEXT_SKIP_KINDS]
    results: list[FileScan] = []
    cluster_notes: list[str] = []
    token = next(_TOKENS)
    _ENGINES[token] = eng
    try:
        with fewer_collections():
            for batch in map_sources(partial(_scan_sources, token), sources, workers=workers, progress=progress,
                                     per_worker=16, remote=Remote(_remote_scan, (_Recipe.of(eng),)), cluster=cluster,
                                     private=getattr(bundle, "tmpdir", None), notes=cluster_notes):
                for got in batch:
                    if isinstance(got, tuple):
                        got, step_file = got
                        if step_file is not None:
                            steps_out[step_file.idx] = step_file
                    results.append(got)
            results.sort(key=lambda f: natural_key(f.rel))
            res = summarize(bundle.root, eng.name, results, list(getattr(bundle, "notes", [])) + cluster_notes,
                            [{"file": s.rel, "reason": s.reason} for s in getattr(bundle, "skipped", [])],
                            {p.id: p for p in pats})
    finally:
        del _ENGINES[token]
        forget_lines()  # what this process remembered of the bundle's lines (the file pass's memo)
    res.seconds = time.perf_counter() - t0
    return res
