"""Stack dumps of a hung job (issue 13, item 1), read STAT-style: every rank's main-thread stack grouped by where it
is; the few ranks somewhere the others are not never reached the collective, and their frames say why. py-spy
text and faulthandler formats, one file per rank, at 8 and 1,024 ranks."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.stacks.report import parse, summary_lines

WAITING = [("wait", "torch/distributed/distributed_c10d.py:4130"),
           ("all_reduce", "torch/distributed/distributed_c10d.py:2501"),
           ("_allreduce_grads", "megatron/core/distributed/param_and_grad_buffer.py:412"),
           ("train_step", "/workspace/train.py:210"), ("<module>", "/workspace/train.py:301")]
LOADING = [("_try_get_data", "torch/utils/data/dataloader.py:1011"),
           ("_get_data", "torch/utils/data/dataloader.py:1162"), ("_next_data", "torch/utils/data/dataloader.py:1318"),
           ("__next__", "torch/utils/data/dataloader.py:630"), ("train_step", "/workspace/train.py:188"),
           ("<module>", "/workspace/train.py:301")]
SAVING = [("write", "torch/serialization.py:652"), ("_save", "torch/serialization.py:866"),
          ("save", "torch/serialization.py:629"), ("save_checkpoint", "/workspace/ckpt.py:77"),
          ("<module>", "/workspace/train.py:305")]


def pyspy(pid: int, frames) -> str:
    return "\n".join([f"Process {pid}: /usr/bin/python3 -u train.py --config gpt.yaml",
                      "Python v3.10.12 (/usr/bin/python3.10)", "",
                      f'Thread {pid + 7} (idle): "pt_autograd_0"', "    wait (threading.py:320)",
                      f'Thread {pid} (idle): "MainThread"'] + [f"    {f} ({w})" for f, w in frames]) + "\n"


def faulthandler(frames) -> str:
    out = ["Thread 0x00007f3b2c1ff700 (most recent call first):",
           '  File "/usr/lib/python3.10/threading.py", line 320 in wait', "",
           "Current thread 0x00007f3b3e5d4740 (most recent call first):"]
    for f, w in frames:
        path, ln = w.rsplit(":", 1)
        out.append(f'  File "/usr/lib/python3/dist-packages/{path}", line {ln} in {f}')
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("world,odd", [(8, 5), (1024, 517)])
@pytest.mark.parametrize("fmt", ["pyspy", "faulthandler"])
def test_the_rank_reading_data_is_named_from_dumps_alone(tmp_path, world, odd, fmt):
    for r in range(world):
        frames = LOADING if r == odd else WAITING
        text = pyspy(4000 + r, frames) if fmt == "pyspy" else faulthandler(frames)
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(text)
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks, d.status.value) == ("data_loading_stall", [odd], "hung"), d.headline
    assert "_try_get_data" in d.chain[0].evidence[0].text and d.chain[0].evidence[0].file == f"rank_{odd}.pyspy.txt"
    assert f"{world - 1} processes in wait ← all_reduce" in d.headline


def test_a_rank_saving_a_checkpoint_is_storage(tmp_path):
    for r in range(8):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, SAVING if r == 0 else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks) == ("storage_io", [0]), d.headline


def test_every_rank_in_the_same_collective_is_no_culprit(tmp_path):
    for r in range(8):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [] and d.category == "network" and d.status.value == "inconclusive", d.headline


def test_stat_style_summary_and_rank_prefixed_dumps_in_one_file():
    text = "".join(f"[rank{r}]: " + ln + "\n" for r in range(4) for ln in
                   faulthandler(LOADING if r == 2 else WAITING).splitlines())
    stacks = parse("all_ranks.txt", text)
    assert sorted(s.rank for s in stacks) == [0, 1, 2, 3]
    assert summary_lines(stacks) == ["3 ranks in wait ← all_reduce ← _allreduce_grads",
                                     "rank 2 in _try_get_data ← _get_data ← _next_data"]


def test_a_dump_read_only_in_part_says_so(tmp_path, monkeypatch):
    from trainlog_debugger.tools.stacks import read as R
    monkeypatch.setattr(R, "MAX_DUMP_BYTES", 200)
    for r in range(4):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, LOADING if r == 1 else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert any("only the first" in n for n in d.notes), d.notes
