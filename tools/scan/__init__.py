"""The one streaming pass over every line of every rank: the compiled engine, the per-file pass, the
per-rank summary and grep."""
