"""torchrun / torchelastic: the line formats and --log-dir layout, and the launcher's rank map."""
