"""tools/sources/upstream.py, the scan patterns generated from the message tables' triggers: the file is current
(regenerated from the tables it equals the committed one), each pattern keeps its entry's example line, and the
lines these patterns keep reach the diagnosis as the upstream's reading (a Megatron walltime exit is a cancelled
job, not "no fault found")."""

from __future__ import annotations

from trainlog_debugger.eval import messages as tool
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.sources import upstream


def test_the_generated_file_is_current():
    assert tool.scanlist_text() == tool.SCANLIST.read_text(encoding="utf-8"), \
        "tools/sources/upstream.py is out of date: python -m trainlog_debugger.eval.messages scanlist"


def test_every_generated_pattern_is_a_fallback_root_candidate_with_its_entry_regex():
    assert upstream.PATTERNS
    for p in upstream.PATTERNS:
        assert p.fallback is True and p.role == "root_candidate" and p.verify and p.category
        assert p.match(p.example)


def test_a_planned_walltime_exit_is_a_cancelled_job_not_no_fault(tmp_path):
    (tmp_path / "combined.log").write_text(
        " iteration     4200/  100000 | consumed samples:      4300800 | lm loss: 2.143E+00 |\n"
        "[exiting program after 1190.0123456 minutes] datetime: 2025-03-01 07:59:58\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "infrastructure" and d.status == Status.cancelled
    assert "exit-duration-in-mins" in " ".join(d.recommendations)
