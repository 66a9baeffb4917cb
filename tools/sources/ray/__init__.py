"""Ray: its workers' line prefixes and the ranks they state (format.py: patterns; ranks.py: the scan step)."""
