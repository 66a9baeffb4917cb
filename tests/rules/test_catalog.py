"""Wording families that mean their category by themselves (Pattern.weight, tools/rules/catalog.py), through the
whole pipeline: a few lines of realistic context, with and without rank prefixes and timestamps, and the handled
variants of the same producers that must never become the trigger (issue 10, mechanism 6)."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate

STEP = "[rank{r}]: 2025-04-09 07:1{s}:00,000 INFO train: iteration {i} loss 2.31"

FAMILIES = [
    ("nvidia-smi in an epilog", "epilog.out",
     ["+ nvidia-smi -q -d ECC", "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"],
     "gpu_cuda"),
    ("PCIe AER in the kernel log", "kern.log",
     ["Mar  3 02:11:08 node12 kernel: nvidia-nvlink: Unregistered Nvlink Core",
      "Mar  3 02:11:09 node12 kernel: pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error received: 0000:81:00.0"],
     "gpu_cuda"),
    ("DeepSpeed's loss scaler gives up after handled overflows", "rank_0.log",
     ["[rank0]: [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1",
      "[rank0]: [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1",
      "[rank0]: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."], "numerical"),
    ("Megatron's NaN check", "rank_3.log",
     [STEP.format(r=3, s=0, i=900), "[rank3]: Rank 3: found NaN in local grad norm in backward pass before "
      "data-parallel communication collective. Device: 3, node: gpu-07"], "numerical"),
    ("Lightning's EarlyStopping on a NaN metric", "train.log",
     ["Epoch 3: 100%|##########| 250/250 [00:41<00:00,  6.02it/s, loss=nan]",
      "Monitored metric val_loss = nan is not finite. Previous best value was 0.412. Signaling Trainer to stop."],
     "numerical"),
    ("JAX debug_nans", "worker-0.log",
     ["I0409 07:10:00.000000 140 train.py:88] step 1200", "jax._src.source_info_util.JaxStackTraceBeforeTransformation: "
      "FloatingPointError: invalid value (nan) encountered in jit(train_step)"], "numerical"),
    ("Horovod's stall inspector", "horovod.log",
     ["[1,0]<stderr>:[2024-03-01 10:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more tensors "
      "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
      "ranks for more than 60 seconds."], "software"),
]


@pytest.mark.parametrize("name,fname,lines,category", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_family_line_decides_its_category(tmp_path, name, fname, lines, category):
    (tmp_path / fname).write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == category and d.status not in (Status.completed, Status.inconclusive), (name, d.headline)
    assert d.chain[0].evidence[0].text in lines and d.verified  # the first non-finite line may come first


@pytest.mark.parametrize("name,lines", [
    ("DeepSpeed overflow skips in a run that finished", [
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, reducing to 16384",
        "I1105 14:00:00.000000 2585 torch/distributed/elastic/agent/server/api.py:862] [default] worker group "
        "successfully finished. Waiting 300 seconds for other agents to finish."]),
    ("corrected AER errors in a run that finished", [
        "[ 8012.551234] pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0",
        "`Trainer.fit` stopped: `max_epochs=3` reached."]),
    ("HF Trainer's end-of-training metrics", [
        "{'loss': 0.912, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 2.0}",
        "{'train_runtime': 812.4, 'train_samples_per_second': 39.4, 'train_steps_per_second': 1.23, "
        "'train_loss': 0.95, 'epoch': 3.0}"]),
])
def test_handled_lines_of_the_same_producers_are_not_faults(tmp_path, name, lines):
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.status == Status.completed and d.category == "none", (name, d.headline)
