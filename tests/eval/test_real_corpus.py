"""The real corpus (cases/real): big enough that tuning to it is not possible, a third of it never read for ideas
(the `test` split, fixed from a hash of the slug when an incident is collected), every incident traceable to its
public thread, and nothing in a bundle that hands the answer to the diagnosis."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from trainlog_debugger.eval.cases import discover, split_of
from trainlog_debugger.tools.model import CATEGORIES

REAL = Path(__file__).resolve().parents[2] / "cases" / "real"
CASES = discover([REAL])
# words that would name the cause in a file name (a seed's per-node or per-role names are as they were posted)
CAUSE_WORDS = re.compile(r"(?i)(?:^|[_\-.])(?:oom|ecc|xid|nan|shm|enospc|disk|full|timeout|hang|deadlock|crash|"
                         r"killed|corrupt|diverge\w*|straggler|culprit)(?:[_\-.]|$)")


def test_the_corpus_is_large_with_a_third_held_out():
    splits = Counter(c.truth.split for c in CASES)
    assert len(CASES) >= 120 and splits["test"] >= 40 and set(splits) <= {"dev", "test"}


@pytest.mark.parametrize("case", CASES, ids=[c.path.name for c in CASES])
def test_each_incident_names_its_thread_and_its_split_is_its_hash(case):
    t = case.truth
    assert t.source_url.startswith("https://"), "every incident names its public source"
    assert t.category in CATEGORIES and t.confidence in ("high", "medium")
    assert set(t.category_accept) <= set(CATEGORIES) - {t.category}
    if t.seed:
        assert t.split == "dev"  # read while the tool was built
    else:
        assert t.split == split_of(case.path.name)


@pytest.mark.parametrize("case", [c for c in CASES if not c.truth.seed], ids=lambda c: c.path.name)
def test_bundles_hold_logs_under_neutral_names(case):
    files = [p for p in case.path.rglob("*") if p.is_file() and p.name != "truth.yaml"]
    assert files, "an incident without log lines"
    assert not [p.name for p in files if CAUSE_WORDS.search(p.stem)]
    assert all(p.stat().st_size > 0 for p in files)
