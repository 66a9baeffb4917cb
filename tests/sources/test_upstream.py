"""tools/sources/upstream.py, the scan patterns generated from the message tables' triggers: the file is current
(regenerated from the tables it equals the committed one) and each pattern keeps its entry's example line. That
the lines they keep reach the diagnosis (a Megatron walltime exit is a cancelled job) is
tests/test_diagnose_breadth.py."""

from __future__ import annotations

from trainlog_debugger.eval import messages as tool
from trainlog_debugger.tools.sources import upstream


def test_the_generated_file_is_current():
    assert tool.scanlist_text() == tool.SCANLIST.read_text(encoding="utf-8"), \
        "tools/sources/upstream.py is out of date: python -m trainlog_debugger.eval.messages scanlist"


def test_every_generated_pattern_is_a_fallback_root_candidate_with_its_entry_regex():
    assert upstream.PATTERNS
    for p in upstream.PATTERNS:
        assert p.fallback is True and p.role == "root_candidate" and p.verify and p.category
        assert p.match(p.example)



def test_a_table_that_does_not_read_stops_the_generator(monkeypatch, capsys):
    """A shipped table with a YAML error was left out of the tables, and `scanlist` quietly wrote the file without
    its triggers (85 patterns became 77): now it names the table and writes nothing."""
    from trainlog_debugger.tools.sources.messages import catalog
    before = tool.SCANLIST.read_text(encoding="utf-8")
    monkeypatch.setattr(catalog, "LOAD_ERRORS", ["pytorch.yaml: cannot read (ScannerError)"])
    monkeypatch.setattr(tool, "LOAD_ERRORS", catalog.LOAD_ERRORS)
    assert tool.scanlist() == 2
    assert "pytorch.yaml: cannot read" in capsys.readouterr().err
    assert tool.SCANLIST.read_text(encoding="utf-8") == before
