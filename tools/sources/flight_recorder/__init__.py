"""PyTorch's flight-recorder dumps: restricted unpickling, entries, cross-rank matching."""
