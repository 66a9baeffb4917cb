"""Stack dumps of a hung job, STAT-style: report.py parses and groups (pure), read.py reads them from a bundle."""
