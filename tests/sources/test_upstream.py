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


def test_every_variant_of_a_split_message_is_kept():
    """A table may split one message by regex (glibc's `version `%s' not found (required by %s)`: GLIBC_, GLIBCXX_,
    anything else). One variant's example being found by another pattern (an `ImportError:` line) said nothing of
    its other lines: NCCL's net plugin that fails to load on a libfabric ABI mismatch prints the loader's words in
    an INFO line, with no failure word for any other pattern. The generated pattern keeps every variant's lines."""
    from trainlog_debugger.tools.sources import patterns
    line = (" [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found "
            "(required by /opt/conda/lib/python3.10/site-packages/torch/lib/../../../../libnccl-net.so)")
    kept = [p.id for p in patterns() if any(a in line for a in p.anchors) and p.match(line)]
    assert [k for k in kept if k.startswith("upstream.glibc_ld")], kept
    for v in ("version `GLIBC_2.34' not found (required by /x/libtorch_cpu.so)",
              "version `GLIBCXX_3.4.30' not found (required by /x/libtorch_python.so)"):
        assert any(p.id.startswith("upstream.glibc_ld") and p.match(v) for p in upstream.PATTERNS)
