"""trainlog_debugger.eval.run: a run in which a case's diagnosis raised exits 1 (a broken install must not pass the
eval), the report is still written; a case whose bundle is unusable (BundleError) stays a failed score (exit 0)."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.eval.run import crashes, main
from trainlog_debugger.eval.synth import generate as g

PIPELINE = "trainlog_debugger.tools.pipeline"


@pytest.fixture
def suite(tmp_path):
    d = tmp_path / "suite"
    for name, (job, truth) in {"a-oom": g.cuda_oom(ranks=8, culprit=0), "c-clean": g.clean_run(ranks=8)}.items():
        g.write_case(d / name, job, truth)
    return d


def test_a_module_that_fails_to_import_fails_the_run(suite, monkeypatch, capsys):
    """Every case errors because the pipeline cannot be imported: the report says so, and the exit code is 1."""
    monkeypatch.setitem(sys.modules, PIPELINE, None)  # `import trainlog_debugger.tools.pipeline` now raises
    code = main([suite], json_=True, jobs=1)
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert code == 1
    assert rep["totals"]["errors"] == 2 and all("ModuleNotFoundError" in c["error"] for c in rep["cases"])
    err = cap.err.strip().splitlines()
    assert err[0].startswith("error: 2 case run(s) raised") and "Traceback" not in cap.err
    assert any("suite/a-oom: ModuleNotFoundError" in line for line in err[1:])


def test_one_raising_diagnosis_fails_the_run(suite, monkeypatch, capsys):
    import trainlog_debugger.tools.pipeline as pipeline
    real = pipeline.run

    calls = []

    def run(bundle, **kw):  # the first case (suite/a-oom, cases run in order with jobs=1) hits a bug
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom in a rule")
        return real(bundle, **kw)

    monkeypatch.setattr(pipeline, "run", run)
    code = main([suite], json_=True, jobs=1)
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    errors = {c["id"]: c["error"] for c in rep["cases"]}
    assert errors["suite/c-clean"] is None and errors["suite/a-oom"] == "RuntimeError: boom in a rule"
    assert code == 1 and crashes(rep) == ["suite/a-oom: RuntimeError: boom in a rule"]


def test_an_unusable_bundle_is_a_failed_score_not_a_crash(suite, capsys):
    (suite / "d-empty").mkdir()
    (suite / "d-empty" / "truth.yaml").write_text("category: oom\nculprit_ranks: [2]\n")
    code = main([suite], json_=True, jobs=1)
    rep = json.loads(capsys.readouterr().out)
    assert code == 0 and rep["totals"]["errors"] == 1 and crashes(rep) == []


def test_cli_exit_code_and_help(suite, monkeypatch):
    monkeypatch.setitem(sys.modules, PIPELINE, None)
    r = CliRunner().invoke(app, ["eval", str(suite), "--jobs", "1"])
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(app, ["eval", "--help"])
    assert r.exit_code == 0 and "diagnosis raised" in " ".join(r.output.split())
