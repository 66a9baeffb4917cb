"""Every analysis report speaks tools.model.Report (findings(), to_json(), notes, coverage), and `to_jsonable` of
a report IS its to_json(): the CLI, the agent's tools and the eval print a report one way."""

import json
from pathlib import Path

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.jsonable import to_jsonable
from trainlog_debugger.tools.model import Coverage, Finding, Report

CASES = Path(__file__).resolve().parents[1] / "cases"
FR = Path(__file__).resolve().parent / "sources" / "flight_recorder" / "fixtures" / "gloo-2.13"


def _reports():
    from trainlog_debugger.tools.scan.driver import scan_bundle
    from trainlog_debugger.tools.sources.ais.analyze import analyze_paths
    from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
    from trainlog_debugger.tools.sources.pytorch.collectives import analyze
    from trainlog_debugger.tools.steps.analyze import scan_steps
    out = {}
    with open_bundle(CASES / "gen-slurm-8r-a") as b:
        scan = scan_bundle(b, workers=1)
        out["scan"] = scan
        out["nccl"] = analyze(scan)
        out["steps"] = scan_steps(b, workers=1)
    with open_bundle(FR) as b:
        out["fr"] = analyze_bundle(b)
    ais = CASES / "gen-ais-8r-a"
    out["ais"] = analyze_paths([str(ais / "ais_logs")], [str(ais / "workers")])
    return out


REPORTS = _reports()


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_protocol(name):
    rep = REPORTS[name]
    assert isinstance(rep, Report), name
    assert all(isinstance(f, Finding) and f.evidence for f in rep.findings())
    assert isinstance(rep.notes, list)
    assert rep.coverage is None or isinstance(rep.coverage, Coverage)
    js = rep.to_json()
    assert isinstance(js, dict) and to_jsonable(rep) == to_jsonable(js)
    assert json.loads(json.dumps(js)) == json.loads(json.dumps(to_jsonable(js)))  # plain JSON as it is


def test_reports_that_find_something_say_so():
    scan = REPORTS["scan"]
    assert {f.id for f in scan.findings()} == {p.id for p in scan.patterns if p.first}
    assert REPORTS["nccl"].findings() and REPORTS["nccl"].coverage.seen_ranks == list(range(8))
    assert REPORTS["ais"].findings() and REPORTS["ais"].to_json()["findings"]  # public key kept
    assert REPORTS["fr"].to_json()["findings"] == to_jsonable(REPORTS["fr"].findings())
