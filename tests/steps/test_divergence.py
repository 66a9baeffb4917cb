"""The loss curve read for divergence (tools/steps/divergence.py, the rule numerical.loss_divergence).

The logs are written here in the trainers' own shapes (Megatron-LM training_log lines, the HF Trainer's logged
dicts, NeMo progress lines), with seeded noise: a healthy curve falls and wobbles, a diverged one jumps and stays.
"""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from trainlog_debugger.agent.cli.schemas import errors, schema_of
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.steps.analyze import scan_steps

def meg(it: int, loss: float | None, gnorm: float, scale: float = 65536.0) -> str:
    """Megatron-LM training_log (fp16, a DeepSpeed-era line: no time stamp); `loss` None: the line of an iteration
    whose loss was not reduced (Megatron then prints no `lm loss` key)."""
    lm = f" lm loss: {loss:.6E} |" if loss is not None else ""
    return (f" iteration {it:8d}/  159576 | consumed samples: {it * 176:12d} | elapsed time per iteration (ms): "
            f"61000.0 | learning rate: 6.000E-05 | global batch size:   176 |{lm} loss scale: {scale:.1f} | grad norm: "
            f"{gnorm:.3f} | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def hf(loss: float, gnorm: float, step: int) -> str:
    g = "nan" if math.isnan(gnorm) else f"{gnorm:.4f}"
    return f"{{'loss': {loss:.4f}, 'grad_norm': {g}, 'learning_rate': 1e-05, 'epoch': {step / 1000:.2f}}}\n"


def curve(n: int, start: float = 8.0, floor: float = 2.2, noise: float = 0.03, seed: int = 3) -> list[float]:
    """A pre-training loss: exponential fall to a floor, multiplicative noise."""
    rng = random.Random(seed)
    return [(floor + (start - floor) * math.exp(-i / (n / 6))) * math.exp(rng.gauss(0, noise)) for i in range(n)]


def _write(root: Path, name: str, lines: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("".join(lines))
    return root


def _steps(root: Path):
    with open_bundle(str(root)) as b:
        return scan_steps(b, workers=1)


def _diagnose(root: Path):
    with open_bundle(str(root)) as b:
        return investigate(b)


def test_megatron_loss_that_jumps_and_stays_up_is_numerical(tmp_path):
    """The fp16 spike that did not recover: loss ~3.4 for 60 iterations, then 7+ with the grad norm 10x up, to the
    end of the log; the log ends without an error (a person stopped the run)."""
    rng = random.Random(1)
    lines = ["using world size: 256, data-parallel size: 4, tensor-model-parallel size: 4, pipeline-model-parallel "
             "size: 16\n"]
    lines += [meg(8680 + i, 3.4 * math.exp(rng.gauss(0, 0.02)), 2.0e5 * math.exp(rng.gauss(0, 0.3)))
              for i in range(60)]
    lines += [meg(8740 + i, v, g) for i, (v, g) in enumerate([(7.27, 3.3e6), (4.13, 1.8e6), (7.60, 1.4e6),
                                                               (7.02, 2.1e4)])]
    lines.append(meg(8744, None, 2.1e4, scale=8192.0))
    root = _write(tmp_path / "b", "main_log.txt", lines)
    rep = _steps(root)
    dv = rep.divergence
    assert dv is not None and dv.kind == "rise" and dv.iteration == 8740
    assert dv.before == pytest.approx(3.4, rel=0.05) and dv.after >= 7.0
    assert dv.grad_norm_after > 5 * dv.grad_norm_before
    assert rep.series and all(s.metric == "iteration_ms" for s in rep.series)  # the loss is not a step time
    onset = dv.evidence[0]
    assert onset.line == 62 and "lm loss: 7.270000E+00" in onset.text
    raw = (root / "main_log.txt").read_text().split("\n")
    assert all(raw[e.line - 1] == e.text for e in dv.evidence)
    d = _diagnose(root)
    assert (d.category, d.status) == ("numerical", "inconclusive")
    assert d.chain[0].id == "numerical.loss_divergence" and d.chain[0].evidence[0].line == 62
    assert any("what ended the run" in m for m in d.missing)


def test_spike_that_recovers_is_not_divergence(tmp_path):
    """A loss spike that came back down within a few iterations is what large runs do all the time: noise."""
    vals = curve(300, start=3.6, floor=3.3, noise=0.02)
    vals[200:204] = [6.9, 7.4, 5.1, 3.9]
    root = _write(tmp_path / "b", "main_log.txt", [meg(10 * i + 10, v, 1.5) for i, v in enumerate(vals)])
    assert _steps(root).divergence is None


@pytest.mark.parametrize("seed", range(5))
def test_healthy_noisy_curves_are_not_divergence(tmp_path, seed):
    """Pre-training (smooth fall) and fine-tuning (a noisy per-batch loss, 25 % jitter) never read as diverged."""
    pre = curve(400, seed=seed)
    rng = random.Random(seed)
    sft = [max(0.05, 1.1 * math.exp(-i / 150) + 0.35) * math.exp(rng.gauss(0, 0.25)) for i in range(200)]
    root = _write(tmp_path / "pre", "main_log.txt", [meg(i + 1, v, 1.0) for i, v in enumerate(pre)])
    assert _steps(root).divergence is None
    root = _write(tmp_path / "sft", "train.log", [hf(v, 0.8, i + 1) for i, v in enumerate(sft)])
    assert _steps(root).divergence is None


def test_hf_loss_collapse_to_zero_with_nan_grad_norm(tmp_path):
    """The HF Trainer's fp16 failure: the logged loss is exactly 0.0 with a NaN grad norm from some step on."""
    vals = curve(40, start=1.6, floor=0.9, noise=0.05)
    lines = ["***** Running training *****\n"] + [hf(v, 1.2, i + 1) for i, v in enumerate(vals)]
    lines += [hf(0.0, float("nan"), 41 + i) for i in range(6)]
    root = _write(tmp_path / "b", "train.log", lines)
    dv = _steps(root).divergence
    assert dv is not None and dv.kind == "collapse" and dv.iteration == 41 and dv.points_after == 6
    assert dv.evidence[0].line == 42 and dv.evidence[0].text.startswith("{'loss': 0.0000")


def test_nemo_progress_loss_that_goes_nan(tmp_path):
    rng = random.Random(2)
    lines = [f"Training epoch 0, iteration {i}/999 | lr: 1e-05 | global_batch_size: 8 | global_step: {i} | "
             f"reduced_train_loss: {2.5 * math.exp(rng.gauss(0, 0.03)):.4f} | train_step_timing in s: 0.51\n"
             for i in range(1, 30)]
    lines.append("Training epoch 0, iteration 30/999 | lr: 1e-05 | global_batch_size: 8 | global_step: 30 | "
                 "reduced_train_loss: nan | train_step_timing in s: 0.51\n")
    dv = _steps(_write(tmp_path / "b", "rank_0.log", lines)).divergence
    assert dv is not None and dv.kind == "non-finite" and dv.iteration == 30 and math.isnan(dv.after)


def test_a_crash_is_answered_by_the_crash_not_the_curve(tmp_path):
    """The steps stage (and so this reading) runs only when nothing found a fault: a diverged curve followed by a
    CUDA OOM is the OOM."""
    vals = curve(60, start=3.5, floor=3.3, noise=0.02) + [7.1, 7.4, 7.3, 7.2]
    lines = [meg(i + 1, v, 1.0) for i, v in enumerate(vals)]
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                 "of 79.10 GiB of which 1.23 GiB is free.\n")
    d = _diagnose(_write(tmp_path / "b", "rank_0.log", lines))
    assert d.category == "oom"


def test_json_carries_the_divergence(tmp_path):
    vals = curve(30, start=3.5, floor=3.3, noise=0.02) + [7.1, 7.4, 7.3, 7.2]
    rep = _steps(_write(tmp_path / "b", "main_log.txt", [meg(i + 1, v, 1.0) for i, v in enumerate(vals)]))
    j = rep.to_json()
    assert j["divergence"]["kind"] == "rise" and j["divergence"]["iteration"] == 31
    assert j["training_points"] == {"loss": 34, "grad_norm": 34}
    assert "refs" not in j["divergence"] and j["divergence"]["evidence"][0]["line"] == 31
    assert any(f["id"] == "steps.divergence" for f in j["findings"])
    body = {k: v for k, v in j.items() if k != "schema_version"}
    assert errors(body, {k: v for k, v in schema_of("steps").items() if k != "required"}) == []
    assert errors({**body, "divergence": {**j["divergence"], "kind": "wobble"}}, schema_of("steps")["properties"]
                  ["divergence"]) != []

