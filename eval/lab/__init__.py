"""Real fault-injection runs (CPU torchrun, gloo)."""
