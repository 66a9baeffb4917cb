"""py-spy and faulthandler stack dumps of a hung job, STAT-style: format.py recognises a dump (detection, the
frames the one-pass scan counts), report.py parses and groups (pure), read.py reads them from a bundle."""
