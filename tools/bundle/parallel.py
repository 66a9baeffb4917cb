"""Files over forked workers: the one place that decides whether to fork, how many workers, and how files are batched.

Why (../shared/PERF.md): the per-file work is linear in bytes, and two forked workers on the 2-core VM cut a big
bundle's time by about 40 % (hyperscan at 4 GiB: 4.92 s in one process, 2.79 s with the patterns compiled in the
parent and a forked Pool(2)). But one task per small file costs more than it gains: over 2048 files of 0.5 MiB,
2 workers with one-file tasks took 1.45 s against 1.08 s in one process, hence "tasks should be batches of files of
at least about 16–64 MB each". So tasks are batches of ≥ 32 MB, largest files first, and a bundle under
PARALLEL_MIN_BYTES (64 MiB, where the pool's start-up is not worth it), or of one file, or where `fork` is
unavailable, is read in-process, one file at a time. Workers are forked so that what the parent prepared (a
compiled pattern engine, reset per-process state) is inherited, not pickled.

Used by tools.scan.summary (the catalog scan), tools.rankdiff.analyze (the rank diff) and tools.steps.analyze (step times).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN_BYTES = 64 << 20   # below this a bundle is read in-process (unless min_files says otherwise)
MIN_BATCH_BYTES = 32 << 20      # a task is a batch of files of at least this many bytes
MAX_WORKERS = 2                 # the project VM has 2 cores; more workers only fight over them


def _size(item) -> int:
    """Size of a source, or of an `(index, source)` pair."""
    return item[1].size if isinstance(item, tuple) else item.size


def default_workers(workers: int | None = None) -> int:
    return workers or min(MAX_WORKERS, os.cpu_count() or 1)


def batches(items: Iterable[T], workers: int, *, per_worker: int = 8) -> list[list[T]]:
    """Items (sources, or `(index, source)` pairs), largest first, cut into batches of ≥ MIN_BATCH_BYTES, or of
    total / (workers × per_worker) where that is more (so a huge bundle still spreads over the workers). A bundle
    under PARALLEL_MIN_BYTES (forked only because it has many files, see `map_sources`' min_files) gets 4 batches
    per worker instead."""
    items = list(items)
    total = sum(map(_size, items)) or 1
    if total >= PARALLEL_MIN_BYTES:
        target = max(MIN_BATCH_BYTES, total // (workers * per_worker))
    else:
        target = total // (workers * 4) + 1
    out, cur, cur_size = [], [], 0
    for it in sorted(items, key=lambda it: -_size(it)):
        cur.append(it)
        cur_size += _size(it)
        if cur_size >= target:
            out.append(cur)
            cur, cur_size = [], 0
    if cur:
        out.append(cur)
    return out


def forks(items: list, workers: int, *, min_files: int | None = None) -> bool:
    """Whether `map_sources` forks: more than one worker and one item, `fork` available, and PARALLEL_MIN_BYTES in
    all (or at least `min_files` items, where given)."""
    big = sum(map(_size, items)) >= PARALLEL_MIN_BYTES or (min_files is not None and len(items) >= min_files)
    return workers > 1 and big and len(items) > 1 and "fork" in mp.get_all_start_methods()


def map_sources(fn: Callable[[list[T]], R], items: Iterable[T], *, workers: int | None = None,
                progress: Callable[[int, int], None] | None = None, per_worker: int = 8,
                min_files: int | None = None) -> Iterator[R]:
    """`fn(batch)` for batches of `items` in forked workers (see `batches`), yielded as they finish (unordered);
    in-process, `fn([item])` for each item in order. `fn` must be a module-level function (it is pickled by name)
    and its results plain data. `progress(bytes_done, bytes_total)` is called after each result. Callers that need
    an order sort the results afterwards."""
    items = list(items)
    total = sum(map(_size, items))
    workers = default_workers(workers)
    done = 0
    if forks(items, workers, min_files=min_files):
        tasks = batches(items, workers, per_worker=per_worker)
        sizes = [sum(map(_size, b)) for b in tasks]
        # concurrent.futures, not mp.Pool: when a worker dies (the OOM killer, a signal), Pool replaces it and waits
        # forever for the task it held (seen: a scan of 4,096 files hung for good); the executor raises
        # BrokenProcessPool instead, and the unfinished batches are read here, in-process, so the answer is complete
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool
        left = set(range(len(tasks)))
        try:
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
                futs = {pool.submit(fn, tasks[i]): i for i in range(len(tasks))}
                for fut in as_completed(futs):
                    res = fut.result()
                    i = futs[fut]
                    left.discard(i)
                    done += sizes[i]
                    if progress:
                        progress(done, total)
                    yield res
        except BrokenProcessPool:
            pass
        for i in sorted(left):  # a worker died: its batches (and any not yet run) are read in-process
            res = fn(tasks[i])
            done += sizes[i]
            if progress:
                progress(done, total)
            yield res
    else:
        for it in items:
            res = fn([it])
            done += _size(it)
            if progress:
                progress(done, total)
            yield res
