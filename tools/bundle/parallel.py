"""Files over forked workers: the one place that decides whether to fork, how many workers, and how files are batched.

Why (../shared/PERF.md): the per-file work is linear in bytes, and two forked workers on the 2-core VM cut a big
bundle's time by about 40 % (hyperscan at 4 GiB: 4.92 s in one process, 2.79 s with the patterns compiled in the
parent and a forked Pool(2)). But one task per small file costs more than it gains: over 2048 files of 0.5 MiB,
2 workers with one-file tasks took 1.45 s against 1.08 s in one process, hence "tasks should be batches of files of
at least about 16–64 MB each". So tasks are batches of ≥ 32 MB, largest files first, and a bundle under
PARALLEL_MIN_BYTES (64 MiB, where the pool's start-up is not worth it), or of one file, or where `fork` is
unavailable, is read in-process, one file at a time. Workers are forked so that what the parent prepared (a
compiled pattern engine, reset per-process state) is inherited, not pickled.

Where a cluster is configured (DEBUGGER_CLUSTER; tools.bundle.distributed), the same batches go to its workers
instead, for callers that say how to rebuild on a worker what a fork would inherit (`remote`).

Used by tools.scan.driver (the catalog scan), tools.rankdiff.analyze (the rank diff) and tools.steps.analyze (step
times).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN_BYTES = 64 << 20   # below this a bundle is read in-process (unless min_files says otherwise)
MIN_BATCH_BYTES = 32 << 20      # a task is a batch of files of at least this many bytes
MAX_WORKERS = 2                 # the project VM has 2 cores; more workers only fight over them
CLUSTER_ENV = "DEBUGGER_CLUSTER"  # a Dask scheduler's address (tcp://host:8786): batches go to its workers


GC_YOUNG = 100_000  # new containers between two runs of the cycle collector during a scan (Python's default: 700)
_GC = {"users": 0, "saved": None}
_GC_LOCK = threading.Lock()


@contextmanager
def fewer_collections():
    """Python's cycle collector runs every GC_YOUNG new containers instead of every 700 while a scan runs. Why: as
    the heap grows it re-walks everything held, and a scan holds a lot (500,000 objects of kept hits at 4,096 ranks):
    it took half of unpickling the workers' results, a third of the merge and 40 % of the JSON conversion. What a
    scan makes is acyclic (reference counting frees it) and cycles are still collected, only later. Forked workers
    inherit the setting. Scans in several threads of one process (the Slack bot) share it: the first sets it, the
    last restores what was there before."""
    with _GC_LOCK:
        if _GC["users"] == 0:
            _GC["saved"] = gc.get_threshold()
            gc.set_threshold(GC_YOUNG, *_GC["saved"][1:])
        _GC["users"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC["users"] -= 1
            if _GC["users"] == 0:
                gc.set_threshold(*_GC["saved"])


@dataclass(frozen=True)
class Remote:
    """What `map_sources` runs on a cluster worker instead of `fn`: `fn(batch, *shared)`, with `fn` a module-level
    function (workers import it by name, so they need the same install) that rebuilds what a fork would inherit,
    and `shared` picklable values every task needs, sent to the cluster once per call (tools.bundle.distributed)."""

    fn: Callable
    shared: tuple = ()

    def __call__(self, batch):
        return self.fn(batch, *self.shared)


def cluster_of(cluster=None):
    """The cluster to use: `cluster` (an address, or a distributed.Client the caller owns), else DEBUGGER_CLUSTER;
    None where neither is set (an empty string turns the variable off)."""
    if cluster is None:
        cluster = os.environ.get(CLUSTER_ENV, "").strip()
    return cluster or None


def source_of(item):
    """A source, or the source of an `(index, source)` pair."""
    return item[1] if isinstance(item, tuple) else item


def _size(item) -> int:
    return source_of(item).size


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
                min_files: int | None = None, remote: Remote | None = None, cluster=None,
                private: str | os.PathLike | None = None, notes: list[str] | None = None) -> Iterator[R]:
    """`fn(batch)` for batches of `items` in forked workers (see `batches`), yielded as they finish (unordered);
    in-process, `fn([item])` for each item in order. `fn` must be a module-level function (it is pickled by name)
    and its results plain data. `progress(bytes_done, bytes_total)` is called after each result. Callers that need
    an order sort the results afterwards.

    On a cluster (tools.bundle.distributed: `cluster`, else DEBUGGER_CLUSTER; only for callers that give `remote`, a
    Remote doing what `fn` does from nothing a fork would inherit): the batches go to the cluster's
    workers, while the files under `private` (the bundle's temp dir: archive members, no worker sees them) are read
    here as above; a batch the cluster gives back unread is read here with `fn`, and `notes` gets why."""
    items = list(items)
    tally = _Tally(sum(map(_size, items)), progress)
    target = cluster_of(cluster) if remote is not None else None
    here = [it for it in items if _under(it, private)] if target is not None else items
    there = [it for it in items if not _under(it, private)] if target is not None else []
    if not there:
        yield from _local(fn, here, default_workers(workers), per_worker, min_files, tally)
        return
    from trainlog_debugger.tools.bundle import distributed  # dask and the rest: only where a cluster is used
    assert remote is not None  # a target is looked for only with a remote function
    run = distributed.ClusterRun(target)
    try:
        tasks = batches(there, run.slots, per_worker=per_worker)
        run.submit(remote, tasks)
        yield from _local(fn, here, default_workers(workers), per_worker, min_files, tally)  # while the cluster reads
        for i, res in run.results():
            yield tally(fn(tasks[i]) if res is None else cast(R, res), sum(map(_size, tasks[i])))
    finally:
        run.cancel()
    if notes is not None:
        notes.extend(run.notes)


class _Tally:
    """Bytes done, reported to `progress` after each result."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None):
        self.total, self.done, self.progress = total, 0, progress

    def __call__(self, res: R, size: int) -> R:
        self.done += size
        if self.progress:
            self.progress(self.done, self.total)
        return res


def _under(item, private) -> bool:
    """Whether the item's file lies under `private` (None: nothing is private)."""
    return private is not None and str(source_of(item).path).startswith(f"{os.fspath(private)}{os.sep}")


def _local(fn: Callable[[list[T]], R], items: list[T], workers: int, per_worker: int, min_files: int | None,
           tally: _Tally) -> Iterator[R]:
    """The items on this machine: batches in forked workers where `forks` says so, else one at a time in order."""
    if not forks(items, workers, min_files=min_files):
        for it in items:
            yield tally(fn([it]), _size(it))
        return
    tasks = batches(items, workers, per_worker=per_worker)
    # concurrent.futures, not mp.Pool: when a worker dies (the OOM killer, a signal), Pool replaces it and waits
    # forever for the task it held (seen: a scan of 4,096 files hung for good); the executor raises
    # BrokenProcessPool instead, and the unfinished batches are read here, in-process, so the answer is complete
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    left = set(range(len(tasks)))
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_worker_signals)
    try:
        futs = {pool.submit(fn, tasks[i]): i for i in range(len(tasks))}
        for fut in as_completed(futs):
            res = fut.result()
            i = futs[fut]
            left.discard(i)
            yield tally(res, sum(map(_size, tasks[i])))
    except BrokenProcessPool:
        pool.shutdown(wait=True)
    except BaseException:
        # Ctrl-C, SIGTERM/SIGHUP (Terminated), or the caller stopped reading: the queued batches are cancelled and
        # the workers stopped NOW. The executor's own exit waited for every queued batch to run first: 159-200 s
        # late on a 4.3 GB bundle, and a 30 s grace period ended in SIGKILL with the temp left behind (issue 30).
        stop_pool(pool)
        raise
    else:
        pool.shutdown(wait=True)
    for i in sorted(left):  # a worker died: its batches (and any not yet run) are read in-process
        yield tally(fn(tasks[i]), sum(map(_size, tasks[i])))


def fork_workers(workers: int | None = None) -> int:
    """How many forked workers `map_ordered` would use: 0 where `fork` is unavailable."""
    return default_workers(workers) if "fork" in mp.get_all_start_methods() else 0


def map_ordered(fn: Callable[..., R], items: list[T], *shared, workers: int | None = None,
                per_worker: int = 4) -> list[R]:
    """`fn(chunk, *shared)` over `items` cut into `workers × per_worker` chunks of consecutive items, in forked
    workers, the results in the chunks' order: for work that is per item, small and many (opening 10,000 files)
    rather than per byte (`map_sources`). A chunk whose worker died or raised is run here, so the answer is
    complete; Ctrl-C stops the workers at once (stop_pool)."""
    n = max(1, fork_workers(workers))
    size = max(1, -(-len(items) // (n * per_worker)))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    if n < 2 or len(chunks) < 2:
        return [fn(c, *shared) for c in chunks]
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    out: list = [None] * len(chunks)
    done = [False] * len(chunks)
    pool = ProcessPoolExecutor(n, mp_context=mp.get_context("fork"), initializer=_worker_signals)
    try:
        futs = [pool.submit(fn, c, *shared) for c in chunks]
        for i, fut in enumerate(futs):
            try:
                out[i], done[i] = fut.result(), True
            except BrokenProcessPool:
                break
            except Exception:  # noqa: BLE001 - the chunk is run here instead, where its error is the caller's
                continue
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return [out[i] if done[i] else fn(c, *shared) for i, c in enumerate(chunks)]


def _worker_signals() -> None:
    """In each forked worker: Ctrl-C (sent to the whole process group) is the parent's to handle; the parent stops
    the workers itself (stop_pool). A worker that raised KeyboardInterrupt mid-batch printed a traceback and broke
    the pool, and the parent read the rest in-process: the interrupt made the scan go on."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def stop_pool(pool, grace: float = 1.0) -> None:
    """Cancel what is queued and stop the workers of a ProcessPoolExecutor at once: terminated, joined for `grace`
    seconds, killed if still there. (The executor has no public way to stop running work.)"""
    # taken before shutdown(), which drops them: the workers, and the queue that feeds them (joined at exit; with
    # the workers gone its pipe may never drain, and the interpreter's exit waited on it forever)
    procs = list((getattr(pool, "_processes", None) or {}).values())
    queue = getattr(pool, "_call_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)
    if queue is not None and hasattr(queue, "cancel_join_thread"):
        queue.cancel_join_thread()
    for p in procs:
        try:
            p.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    for p in procs:
        try:
            p.join(grace)
            if p.is_alive():
                p.kill()
                p.join(grace)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass
