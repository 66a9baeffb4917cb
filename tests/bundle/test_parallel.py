"""tools/bundle/parallel.map_sources: a forked worker that dies (the OOM killer, a signal) must not hang the scan.
With multiprocessing.Pool the task it held was lost and the parent waited forever (a 4,096-file scan hung); now the
pool reports itself broken and the unfinished batches are read in the parent: every batch's result, no hang."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from trainlog_debugger.tools.bundle import parallel

PARENT = os.getpid()


@dataclass(frozen=True)
class Item:
    name: str
    size: int


def _work(batch):
    if os.getpid() != PARENT and any(i.name == "poison" for i in batch):
        os._exit(137)  # as if SIGKILLed: no exception, no result
    return sorted(i.name for i in batch)


def test_a_dead_worker_does_not_hang_and_loses_nothing():
    items = [Item(f"f{i}", 40 << 20) for i in range(12)] + [Item("poison", 40 << 20)]
    assert parallel.forks(items, 2)
    got = sorted(n for res in parallel.map_sources(_work, items, workers=2) for n in res)
    assert got == sorted(i.name for i in items)


def _never(batch):
    raise AssertionError("the remote function ran without a cluster")


def test_remote_is_used_only_where_a_cluster_is_configured(monkeypatch):
    """Without DEBUGGER_CLUSTER (or with it empty) a caller's `remote` is ignored: nothing is imported or contacted,
    the bundle is read here exactly as before."""
    items = [Item(f"f{i}", 1 << 10) for i in range(5)]
    for value in (None, "", "  "):
        if value is None:
            monkeypatch.delenv(parallel.CLUSTER_ENV, raising=False)
        else:
            monkeypatch.setenv(parallel.CLUSTER_ENV, value)
        got = list(parallel.map_sources(_work, items, remote=parallel.Remote(_never)))
        assert got == [[i.name] for i in items]  # in-process, one file at a time, in order
    assert parallel.cluster_of("tcp://h:8786") == "tcp://h:8786"
    monkeypatch.setenv(parallel.CLUSTER_ENV, " tcp://h:8786 ")
    assert parallel.cluster_of() == "tcp://h:8786"


def test_fewer_collections_restores_the_threshold_after_the_last_of_overlapping_scans():
    """Scans in threads of one process (the Slack bot) overlap: the raised threshold holds while any of them runs,
    and what was set before comes back when the last one ends, whatever order they end in."""
    import gc
    import threading

    before = gc.get_threshold()
    try:
        gc.set_threshold(555, 11, 12)
        first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
        seen = []

        def scan(mine: threading.Event):
            with parallel.fewer_collections():
                mine.set()
                release.wait(10)
                seen.append(gc.get_threshold())

        a = threading.Thread(target=scan, args=(first_in,))
        a.start()
        first_in.wait(10)
        with parallel.fewer_collections():
            b = threading.Thread(target=scan, args=(second_in,))
            b.start()
            second_in.wait(10)
            release.set()
            a.join(10)
            assert gc.get_threshold() == (parallel.GC_YOUNG, 11, 12)  # the first scan ended, two still run
            b.join(10)
        assert seen == [(parallel.GC_YOUNG, 11, 12)] * 2
        assert gc.get_threshold() == (555, 11, 12)
    finally:
        gc.set_threshold(*before)


@pytest.mark.slow
def test_the_whole_investigation_runs_with_fewer_collections(monkeypatch):
    """tools.pipeline.run raises the threshold for every stage, not only the scan: the diagnosis after it walks the
    scan's objects too (a third of its time at 4,096 ranks went to collections). It comes back when the run ends,
    and when the run fails."""
    import gc
    from pathlib import Path

    from trainlog_debugger.tools import pipeline
    from trainlog_debugger.tools.bundle.open import open_bundle

    case = sorted(p for p in (Path(__file__).parents[2] / "cases").iterdir() if (p / "truth.yaml").exists())[0]
    before = gc.get_threshold()
    seen = []
    real = pipeline.diagnose

    def diagnose(inputs):
        seen.append(gc.get_threshold()[0])
        return real(inputs)

    monkeypatch.setattr(pipeline, "diagnose", diagnose)
    try:
        gc.set_threshold(555, 11, 12)
        with open_bundle(case) as b:
            inv = pipeline.run(b, workers=1)
            assert inv.diagnosis.status
            assert seen and set(seen) == {parallel.GC_YOUNG}
            assert gc.get_threshold() == (555, 11, 12)

            def broken(inputs):
                raise RuntimeError("a rule failed")

            monkeypatch.setattr(pipeline, "diagnose", broken)
            with pytest.raises(RuntimeError, match="a rule failed"):
                pipeline.run(b, workers=1)
            assert gc.get_threshold() == (555, 11, 12)
    finally:
        gc.set_threshold(*before)


def _pids_and_squares(chunk: list[int], offset: int) -> list[tuple[int, int]]:
    return [(os.getpid(), x * x + offset) for x in chunk]


def test_map_ordered_keeps_the_order_and_forks():
    """map_ordered (issue 28: opening 10,000 files in workers): the chunks' results in the items' order, from
    forked workers where fork exists, with the shared argument passed to each."""
    from trainlog_debugger.tools.bundle.parallel import fork_workers, map_ordered
    got = map_ordered(_pids_and_squares, list(range(1000)), 7, workers=2)
    assert [v for chunk in got for _pid, v in chunk] == [x * x + 7 for x in range(1000)]
    if fork_workers(2) >= 2:
        assert os.getpid() not in {pid for chunk in got for pid, _v in chunk}


def _fails_in_a_worker(chunk: list[int], parent: int) -> list[int]:
    if os.getpid() != parent and 500 in chunk:
        raise OSError("a worker's read failed")
    return chunk


def test_map_ordered_runs_a_failed_chunk_here():
    from trainlog_debugger.tools.bundle.parallel import map_ordered
    got = map_ordered(_fails_in_a_worker, list(range(1000)), os.getpid(), workers=2)
    assert [x for chunk in got for x in chunk] == list(range(1000))
