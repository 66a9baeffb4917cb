"""Step times read in the scan's own pass (tools.scan.driver readers): `ask` on a job with no fault reads its
bytes once, and the step report is the one a separate `steps` pass gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainlog_debugger.tools import pipeline
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.scan.driver import SharedReader, scan_bundle
from trainlog_debugger.tools.steps import analyze, parse
from trainlog_debugger.tools.steps.analyze import scan_steps
from trainlog_debugger.tools.sources import patterns

CASES = Path(__file__).resolve().parents[2] / "cases"


def _plain(rep) -> str:
    return re.sub(r'"seconds": [0-9.e-]+', "", json.dumps(rep.to_json(), sort_keys=True, default=str))


@pytest.mark.parametrize("workers", [1, 2])
def test_slow_job_is_read_once(monkeypatch, workers):
    """A slowed job (no fault line anywhere): every file's step times come from the scan's pass, nothing is opened
    for steps afterwards, and the verdict and step report equal the two-pass ones."""
    case = CASES / "gen-slow-128r-b"
    with open_bundle(case) as b:
        two_pass = scan_steps(b, workers=workers)
    opened = []
    real = parse.scan_sources
    monkeypatch.setattr(analyze, "scan_sources", lambda batch: opened.extend(batch) or real(batch))
    with open_bundle(case) as b:
        inv = pipeline.run(b, workers=workers)
    assert inv.steps is not None and opened == []
    assert _plain(inv.steps) == _plain(two_pass)
    assert inv.diagnosis.category == "infrastructure" and inv.diagnosis.culprit_ranks == [77]  # the slow GPU


def test_crashed_files_are_left_to_the_second_pass():
    """Files with fatal lines (a crash and its cascade) are not read for steps during the scan; the ones without are;
    together they give the report of a full steps pass."""
    case = CASES / "lab-gloo8-c"
    with open_bundle(case) as b:
        reader = SharedReader(parse.read_in_scan)
        res = scan_bundle(b, workers=1, readers=[reader])
        done = reader.got
        tiers = {p.id: p.tier for p in patterns()}
        fatal = {f.rel for f in res.files if any(tiers[pid] in (1, 2) for pid, _ in f.counts)}
        read = {b.sources[i].rel for i in done}
        assert fatal and read and not (fatal & read)
        assert _plain(scan_steps(b, done=done)) == _plain(scan_steps(b))
