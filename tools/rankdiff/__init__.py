"""Templates that only a few ranks printed, or that a few ranks did not print."""
