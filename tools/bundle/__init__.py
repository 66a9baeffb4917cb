"""Reading a bundle: directories and archives opened under caps, newline-aligned chunks, the one
worker pool, and the one re-reader of cited lines."""
