"""Batches of files on an existing Dask distributed cluster: the scale-out of tools.bundle.parallel (issue 16).

Why: a bundle of 10,000 ranks and 100 GB+ on a shared filesystem takes one machine longer than anyone waits, and
the per-file work is independent per file. A cluster's workers can each read their share of the files where they
lie, and send back only the compact per-file summaries (the same FileScan / Batch / FileOut objects the forked
workers return); the caller merges them exactly as it merges a local run's, so the answer is the same.

Why Dask distributed, not Ray: pure Python and pip-installable (the `[cluster]` extra), runs plain module-level
functions with Client.submit, starts on SLURM/PBS/LSF with dask-jobqueue or by hand (`dask scheduler`, `dask worker`),
and a LocalCluster of processes serves the tests; Ray is a much heavier install (its own object store and raylet
binaries) for nothing this needs.

What travels and what stays:
- DEBUGGER_CLUSTER (a scheduler address, `tcp://host:8786`) or `map_sources(cluster=...)` turns it on; dask is only
  imported then. One client per address and process, kept for the next analysis (`ask` runs scan, steps, diff).
- A task is a batch of Sources: absolute paths, sizes, the inode seen when indexed; never bytes or open streams.
  The worker opens the files itself, so the bundle must be on a filesystem every worker mounts at the same path.
  Shared state a task needs (the scan's patterns) is scattered once per call (`Remote.shared`), and what is built
  from it (a compiled engine) is memoised per worker process by the caller's remote function.
- Read here, never sent: files under the bundle's private temp dir (archive members, a copied stdin): no worker can
  see them. A batch with a file the worker cannot open (not mounted there, other permissions) comes back unread
  and is read here, with a note. A file on another host has another st_dev: the worker checks the inode only.

Failures, explicitly: a scheduler that cannot be reached, no worker within DEBUGGER_CLUSTER_TIMEOUT seconds, a
missing `distributed` or a scheduler lost mid-run is a ClusterError (one line, exit 2; unset DEBUGGER_CLUSTER to
read on this machine). A worker that dies is Dask's to retry (distributed.scheduler.allowed-failures); when Dask
gives the batch up (KilledWorker) it is read here, with a note. Any other exception a task raises is the same
code's error a local run would raise: it ends the run as a ClusterError naming it.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainlog_debugger.tools.bundle.open import BundleError
from trainlog_debugger.tools.bundle.parallel import CLUSTER_ENV as ENV, Remote, source_of

TIMEOUT_ENV = "DEBUGGER_CLUSTER_TIMEOUT"
DEFAULT_TIMEOUT = 30.0   # seconds to connect, and to wait for a first worker (a SLURM job may still be queued)
MAX_TIMEOUT = 86_400.0
NOT_HERE = (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.ESTALE)


class ClusterError(BundleError):
    """The cluster cannot do what was asked: one line for the user (the CLI prints it and exits 2)."""


@dataclass(frozen=True)
class NotShared:
    """A worker's answer for a batch it could not read: the files it could not open (read here instead)."""

    rels: list[str]


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        t = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        raise ClusterError(f"{TIMEOUT_ENV}={raw[:40]!r} is not a number of seconds") from None
    if not 0 < t <= MAX_TIMEOUT:
        raise ClusterError(f"{TIMEOUT_ENV}={raw[:40]} is out of range (0 to {MAX_TIMEOUT:,.0f} seconds)")
    return t


_CLIENTS: dict[str, Any] = {}  # distributed.Client, imported only where a cluster is used
_LOCK = threading.Lock()


def client(cluster):
    """The client of `cluster`: made once per address and process (a connection costs a round trip and a worker
    wait; `ask` runs three analyses), a Client object as given. ClusterError when it cannot be had."""
    if not isinstance(cluster, str):
        return cluster
    with _LOCK:
        c = _CLIENTS.get(cluster)
        if c is not None and c.status == "running":
            return c
        try:
            from distributed import Client
        except ImportError:
            raise ClusterError(f"{ENV} is set ({cluster}) but dask distributed is not installed: "
                               f"pip install 'trainlog-debugger[cluster]', or unset {ENV} to read on this machine"
                               ) from None
        t = _timeout()
        c = None
        try:
            c = Client(cluster, timeout=t, set_as_default=False)
            c.wait_for_workers(1, timeout=t)
        except (OSError, TimeoutError, ValueError) as e:
            if c is not None:
                c.close()
            why = "no worker joined" if c is not None else f"not reachable ({' '.join(str(e).split())[:200]})"
            raise ClusterError(f"cluster scheduler {cluster}: {why} within {t:g} s ({TIMEOUT_ENV}); "
                               f"unset {ENV} to read the bundle on this machine") from None
        if not _CLIENTS:
            atexit.register(close)
        _CLIENTS[cluster] = c
        return c


def close() -> None:
    """Close the clients this process made (at exit; tests that start their own cluster call it)."""
    with _LOCK:
        for c in _CLIENTS.values():
            try:
                c.close()
            except Exception:  # a scheduler already gone: nothing left to close
                pass
        _CLIENTS.clear()


def _withsource_of(item, src):
    return (item[0], src) if isinstance(item, tuple) else src


def _visible(src, same_host: bool):
    """`src` as this worker must read it, or None when it cannot open the file (not mounted here, not readable by
    this worker's user). The inode seen when indexed is kept; on another host the device number of the same file
    differs (NFS, Lustre, GPFS mounts), so it is taken from here: a file replaced since (another inode) is still
    refused by Source.open(), exactly as it would be locally. Other open errors (a symlink swapped in) are left to
    the reader, which says why as it does locally."""
    try:
        fd = os.open(src.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return None if e.errno in NOT_HERE else src
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if same_host or src.ident is None or st.st_ino != src.ident[1] or st.st_dev == src.ident[0]:
        return src
    return replace(src, ident=(st.st_dev, st.st_ino))


def on_worker(fn: Callable, host: str, batch: list, *shared):
    """The task run on a worker: `fn(batch, *shared)` when every file of the batch opens here, else NotShared."""
    same_host = socket.gethostname() == host
    items, missing = [], []
    for it in batch:
        src = _visible(source_of(it), same_host)
        if src is None:
            missing.append(source_of(it).rel)
        else:
            items.append(_withsource_of(it, src))
    return NotShared(missing) if missing else fn(items, *shared)


_RUNS = itertools.count()


class ClusterRun:
    """One `map_sources` call's batches on the cluster: `submit`, then `results()` as they finish; `notes` says what
    was read here instead and why."""

    def __init__(self, cluster: Any):
        self.name = cluster if isinstance(cluster, str) else "of the given client"
        self.client = client(cluster)
        self.futures: dict = {}
        self.shared: list = []
        self.notes: list[str] = []

    @property
    def slots(self) -> int:
        """Threads of the workers now connected: what `batches` spreads the files over."""
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, remote: Remote, tasks: list[list]) -> None:
        host = socket.gethostname()
        run = next(_RUNS)
        prefix = f"{getattr(remote.fn, '__name__', 'batch')}-{os.getpid()}-{run}"
        self.shared = [self.client.scatter([v], broadcast=True, hash=False)[0] for v in remote.shared]
        for i, task in enumerate(tasks):
            sent = [_withsource_of(it, replace(source_of(it), path=Path(os.path.abspath(source_of(it).path))))
                    for it in task]
            fut = self.client.submit(on_worker, remote.fn, host, sent, *self.shared, key=f"{prefix}-{i}",
                                     pure=False)
            self.futures[fut] = i

    def results(self) -> Iterator[tuple[int, object]]:
        """(task index, result) as tasks finish; the result is None where the batch must be read here."""
        from distributed import KilledWorker, as_completed
        unread, killed = [], 0
        left = len(self.futures)
        for fut in as_completed(list(self.futures), loop=self.client.loop, raise_errors=False):
            i = self.futures.pop(fut)
            left -= 1
            if fut.status == "finished":
                res = fut.result()
                if isinstance(res, NotShared):
                    unread += res.rels
                    res = None
            elif fut.status == "error" and isinstance(fut.exception(), KilledWorker):
                killed, res = killed + 1, None
            elif fut.status == "error":
                e = fut.exception()
                raise ClusterError(f"cluster {self.name}: a batch failed on a worker: {type(e).__name__}: "
                                   f"{' '.join(str(e).split())[:300]} (workers need the same trainlog-debugger "
                                   f"install as this machine)")
            else:
                raise ClusterError(f"cluster {self.name}: lost the scheduler with {left + 1} batch(es) unread "
                                   f"({fut.status}); unset {ENV} to read the bundle on this machine")
            fut.release()
            yield i, res
        if unread:
            self.notes.append(f"{len(unread):,} file(s) the cluster's workers could not open were read on this "
                              f"machine (first: {unread[0]}): the bundle must be on a filesystem every worker "
                              f"mounts at the same path, readable by the workers' user")
        if killed:
            self.notes.append(f"{killed} batch(es) whose workers died (Dask's KilledWorker) were read on this "
                              f"machine")

    def cancel(self) -> None:
        """Drop what is still queued (the caller stopped early: an error, Ctrl-C) and the scattered values."""
        try:
            if self.futures:
                self.client.cancel(list(self.futures))
            if self.shared:
                self.client.cancel(self.shared)
        except Exception:  # a scheduler already gone has nothing left to cancel
            pass
        self.futures.clear()
        self.shared = []
