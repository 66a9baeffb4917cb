"""tools/sources/flight_recorder/format.py: what a flight-recorder dump looks like from outside (its name, its
first bytes) and what the source declares to the registry. A dump has no lines and no patterns: its citations
("line" = entry index) are re-read by the verifier it declares (VERIFIERS), and the scan skips it as text. The
dump reader and matcher are tested in tests/sources/flight_recorder/."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.tools.sources.flight_recorder import format as fr

FIXTURES = Path(__file__).parent / "flight_recorder" / "fixtures"


@pytest.mark.parametrize("name, rank", [("nccl_trace_rank_3", 3), ("comm_lib_trace_rank_12.json", 12),
                                        ("a.tgz!dumps/trace_rank_3.pkl.gz", 3), ("nccl_trace_rank_x", None)])
def test_rank_from_name(name, rank):
    assert fr.rank_from_name(name) == rank


def test_real_dumps_are_recognised_and_logs_are_not():
    dumps = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and "trace_rank" in p.name]
    assert dumps
    for p in dumps:
        head = p.read_bytes()[:4096]
        assert fr.is_fr_dump(p.name, head, head.decode("utf-8", "replace")), p
    line = b"[rank3]:[E1105 12:34:10.579409818 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective ...\n"
    assert not fr.is_fr_dump("rank_3.log", line, line.decode())


def test_the_source_declares_a_verifier_and_no_patterns():
    from trainlog_debugger.tools.sources import declared, patterns, resolve
    from trainlog_debugger.tools.sources.flight_recorder.analyze import verify_entry
    assert not hasattr(fr, "PATTERNS") and not any(p.id.startswith("flight_recorder.") for p in patterns())
    assert ("flight_recorder", fr.VERIFIERS) in declared("VERIFIERS")
    assert resolve(fr.VERIFIERS["fr_dump"]) is verify_entry
