"""What a single line says about itself: the wrapper prefixes that name its rank, local rank and node,
and its timestamp."""
