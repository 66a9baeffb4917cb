"""Benchmarks, measured as ratios against cat and ripgrep in one run."""
