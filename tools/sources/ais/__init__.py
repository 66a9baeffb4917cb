"""AIStore daemon logs: the line formats, files per daemon, stats deltas, and the storage chain."""
