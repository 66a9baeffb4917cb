"""Per-rank step times: stragglers, regressions, compute- vs communication-bound."""
