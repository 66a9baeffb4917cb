"""A straggler is read by what kept it busy (TAXONOMY's edge case), from its last lines BEFORE the hang's own reports:
the scan's last line of a hung rank is the flight recorder's `Observed ... dump signal`, printed after the hang
(tools/activity.py reads the lines above it; tools/rules/collective.py: collective.straggler)."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate


def _waiting(r: int, seq: int = 2) -> list[str]:
    return [f"[rank{r}]:[E302 07:31:08.901942900 ProcessGroupNCCL.cpp:621] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=BARRIER, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
            f"ran for 1800045 milliseconds before timing out.",
            f"[rank{r}]:[E302 07:31:08.480529775 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  "
            f"failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last "
            f"completed work: {seq - 1}"]


def _notified(r: int, seq: int = 2) -> list[str]:
    done = seq - 1
    return [f"[rank{r}]:[E302 07:31:10.268917310 ProcessGroupNCCL.cpp:1692] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
            "Observed flight recorder dump signal from another rank via TCPStore.",
            f"[rank{r}]:[E302 07:31:10.567212062 ProcessGroupNCCL.cpp:1597] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
            "Received a dump signal due to a collective timeout from  rank 1 and we will try our best to dump the debug "
            f"info. Last enqueued NCCL work: {done}, last completed NCCL work: {done}."]


def _hang(tmp_path, doing: list[str], files: dict[str, list[str]] | None = None):
    lines = [f"[rank{r}]: step 40 loss 1.20" for r in range(4)] + doing
    for r in (1, 2, 3):
        lines += _waiting(r)
    lines += _notified(0)
    (tmp_path / "console.txt").write_text("\n".join(lines) + "\n")
    for name, text in (files or {}).items():
        (tmp_path / name).write_text("\n".join(text) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


@pytest.mark.parametrize("doing, category", [
    # HF datasets' map on the main process while the others wait in a barrier: one-rank preprocessing
    (["[rank0]: Running tokenizer on dataset (num_proc=16):  88%|########8 | 7392000/8400000 [29:40<04:00, 4120 examples/s]"],
     "software"),
    # an evaluation loop on rank 0 only, its progress unlabelled (the main process's tqdm)
    (["Evaluating:  61%|######    | 305/500 [09:51<06:18,  1.94s/it]"], "software"),
    # a generation loop on rank 0 only (summaries for a ROUGE eval)
    (["Generating:  43%|████      | 860/2000 [09:58<13:12,  1.44it/s]"], "software"),
    # a long phase every rank goes through, still running when the timeout ran out
    (["[rank0]: Loading checkpoint shards:  53%|#####3    | 16/30 [12:40<11:05, 47.5s/it]"], "config"),
    # reading data
    (["[rank0]: Fetching shard 00417 of dataset train from s3://corpus/train/"], "data_loading_stall"),
    # its batch reads timing out and falling back (lhotse's AIStore loader went on): still reading, a stall
    (["[rank0]: Batch stream truncated at index 9/32. Falling back to direct AIStore API calls for remaining objects."],
     "data_loading_stall"),
    # its epoch's bar at its end while the others are still in the loop: it ran out of batches (uneven shards)
    (["[rank0]: Epoch 0: 100%|██████████| 1187/1187 [12:04<00:00, 1.64it/s]"], "data"),
])
def test_the_stragglers_last_activity_decides_its_category(tmp_path, doing, category):
    d = _hang(tmp_path, doing)
    assert d.category == category and d.culprit_ranks == [0], d.headline
    assert any(doing[0][:30] in e.text for f in d.chain for e in f.evidence), "the activity line is cited"


def test_another_ranks_activity_is_not_the_stragglers(tmp_path):
    """Rank 3's evaluation bar is rank 3's: rank 0 (the straggler) said nothing of what it did."""
    d = _hang(tmp_path, ["[rank3]: Evaluating:  61%|######    | 305/500 [09:51<06:18,  1.94s/it]"])
    assert d.category == "data_loading_stall" and "does not say" in d.headline, d.headline


def _dump(*frames: str) -> list[str]:
    """A py-spy dump of rank 0's process, innermost frame first."""
    return ["Process 55302: python train.py", "Python v3.11.9 (/opt/conda/bin/python3.11)", "",
            'Thread 55302 (idle): "MainThread"'] + [f"    {f}" for f in frames] + ["    train_step (train.py:212)"]


@pytest.mark.parametrize("frames, category, said", [
    # its own code re-entered from a signal handler: stuck in the program
    (("log_metrics (utils/metrics.py:57)", "_on_sigusr1 (utils/profiling.py:41)", "log_metrics (utils/metrics.py:61)"),
     "software", "own code"),
    # waiting in a socket read: the dump does not say what for
    (("recv_into (socket.py:706)", "readinto (socket.py:706)"), "data_loading_stall", "does not say"),
])
def test_the_stragglers_stack_dump(tmp_path, frames, category, said):
    d = _hang(tmp_path, [], {"pyspy_rank0.txt": _dump(*frames)})
    assert d.category == category and said in d.headline, d.headline


def test_the_stragglers_faulthandler_dump_in_the_console_is_read(tmp_path):
    """faulthandler's dump (SIGUSR1 with faulthandler registered) printed into the console under rank 0's prefix:
    its frames are the program's own logging code re-entering the handler's lock, neither a loader's nor a
    collective's. The dump header itself marks the lines as a dump, so the straggler is read by its stack."""
    dump = ["[rank0]: Thread 0x00007f0a337fe640 (most recent call first):",
            '[rank0]:   File "/usr/lib/python3.11/threading.py", line 327 in wait',
            '[rank0]:   File "/usr/lib/python3.11/logging/handlers.py", line 1551 in _monitor',
            "[rank0]: ",
            "[rank0]: Current thread 0x00007f0b1a2c9740 (most recent call first):",
            '[rank0]:   File "/usr/lib/python3.11/logging/__init__.py", line 923 in acquire',
            '[rank0]:   File "/usr/lib/python3.11/logging/__init__.py", line 1026 in handle',
            '[rank0]:   File "/workspace/llm/utils/log_rotate.py", line 58 in doRollover',
            '[rank0]:   File "/workspace/llm/utils/log_rotate.py", line 33 in emit',
            '[rank0]:   File "/workspace/llm/train.py", line 402 in train_step']
    d = _hang(tmp_path, [], {"dump.txt": dump})
    assert d.category == "software" and d.culprit_ranks == [0], d.headline


def test_the_stragglers_activity_line_keeps_its_own_time(tmp_path):
    """The activity line that says what the straggler was doing is the trigger: its own stamp is its time (the
    onset the eval and the timeline read), never one borrowed from another line."""
    d = _hang(tmp_path, ["[rank0]: 2026-11-24 03:55:48,581 INFO train: running validation: 200 batches of 16"])
    t = d.chain[0].evidence[0]
    assert d.category == "software" and "running validation" in t.text, d.headline
    assert t.time is not None and (t.time.hour, t.time.minute, t.time.second) == (3, 55, 48)
    assert t.time.meta("inferred_from_line") is None
