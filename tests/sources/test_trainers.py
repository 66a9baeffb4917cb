"""tools/sources/trainers.py: Megatron, Lightning and JAX stopping on a non-finite value; near-misses."""

from __future__ import annotations

import pytest
from matching import check, params

LINES = [
    ("Megatron grad norm", "Rank 3: found NaN in local grad norm in backward pass before data-parallel communication "
     "collective. Device: 3, node: gpu-07", {"megatron.found_nan": dict(nan_rank=3, host="gpu-07")}),
    ("Megatron forward loss, rank-prefixed", "[rank0]: Rank 0: found NaN in local forward loss calculation. Device: 0, "
     "node: gpu-01", {"megatron.found_nan": dict(nan_rank=0)}),
    ("Lightning EarlyStopping", "Monitored metric val_loss = nan is not finite. Previous best value was 0.412. "
     "Signaling Trainer to stop.", {"lightning.not_finite": {}, "numerical.nan_loss": {}}),
    ("JAX debug_nans", "FloatingPointError: invalid value (nan) encountered in jit(train_step)",
     {"jax.debug_nans": {}}),
]

NEAR_MISSES = [
    ("Megatron's skipped-iterations counter", " iteration      120/  500000 | consumed samples: 3840 | lm loss: "
     "2.412E+00 | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan iterations:   0 |", {}),
    ("a finite monitored metric", "Metric val_loss improved by 0.012 >= min_delta = 0.0. New best score: 0.400", {}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
