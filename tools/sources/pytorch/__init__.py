"""PyTorch c10d (ProcessGroupNCCL / gloo): the line formats, and the per-rank collective state built from them."""
