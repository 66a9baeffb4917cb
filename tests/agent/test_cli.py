"""The `debugger` command line: every subcommand listed, --json parses, bad input is one line and exit 2."""

from __future__ import annotations

import pytest

import json
from pathlib import Path

from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.tools.bundle.open import open_bundle

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
runner = CliRunner()


def test_help_lists_every_command():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("ask", "scan", "grep", "diff", "nccl", "fr", "ais", "steps", "eval", "schema", "catalog"):
        assert cmd in r.output


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("debugger ")


def test_scan_json_on_bundled_case():
    r = runner.invoke(app, ["scan", str(CASE), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["coverage"]["seen_ranks"] == "0-7" and d["coverage"]["seen_count"] == 8
    wd = next(p for p in d["patterns"] if p["id"] == "pytorch.watchdog_timeout")
    assert d["schema_version"] == 2 and wd["missing_ranks"] == "5" and wd["missing_rank_count"] == 1
    assert wd["ranks"] == "0-7 except 5" and wd["ranks_by_count"] == {"1": "0-7 except 5"}
    assert wd["first"]["file"].startswith("error-") and wd["first"]["line"] >= 1


def test_scan_table_on_bundled_case():
    r = runner.invoke(app, ["scan", str(CASE)])
    assert r.exit_code == 0
    assert "pytorch.watchdog_timeout" in r.output and "all but 5" in r.output


def test_grep_lists_ranks_without_match():
    r = runner.invoke(app, ["grep", "Watchdog caught", str(CASE), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["schema_version"] == 2 and d["ranks_without_match"] == "5"
    assert d["ranks_with_match"] == "0-7 except 5" and d["ranks_with_match_count"] == 7
    r = runner.invoke(app, ["grep", "Watchdog caught", str(CASE)])
    assert "ranks with NO match" in r.output


def test_catalog_json():
    r = runner.invoke(app, ["catalog", "--json"])
    assert r.exit_code == 0
    assert any(p["id"] == "pytorch.watchdog_timeout" for p in json.loads(r.output))


def _one_line_error(r):
    assert r.exit_code == 2, r.output
    out = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    assert out.startswith("error: ") and "\n" not in out and "Traceback" not in out


def test_missing_path(tmp_path):
    _one_line_error(runner.invoke(app, ["scan", str(tmp_path / "nope")]))


def test_empty_dir(tmp_path):
    _one_line_error(runner.invoke(app, ["scan", str(tmp_path)]))


def test_dir_of_binaries(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 100)
    _one_line_error(runner.invoke(app, ["scan", str(tmp_path)]))


def test_invalid_regex():
    _one_line_error(runner.invoke(app, ["grep", "([", str(CASE)]))


def _case_dirs():
    root = Path(__file__).resolve().parents[2]
    dirs = sorted(p.parent for p in (root / "cases").glob("*/truth.yaml"))
    shared = root.parent / "shared" / "incidents"
    if shared.is_dir():
        dirs += sorted(p.parent for p in shared.glob("*/truth.yaml"))
    return dirs


@pytest.mark.slow
def test_scan_and_grep_run_on_every_case():
    """Every bundled case and every real incident scans without error, and no cited line is invented."""
    dirs = _case_dirs()
    assert dirs
    for d in dirs:
        r = runner.invoke(app, ["scan", str(d), "--json"])
        assert r.exit_code == 0, (d, r.output)
        data = json.loads(r.output)
        with open_bundle(d) as b:  # archive members are cited as `a.tar.gz!member`: read them through the bundle
            by_rel = {s.rel: s for s in b.sources}
            for p in data["patterns"]:
                ev = p["first"]
                with by_rel[ev["file"]].open() as fh:
                    lines = fh.read().decode("utf-8", "replace").split("\n")
                assert lines[ev["line"] - 1].rstrip("\r") == ev["text"], (d, ev)
        r = runner.invoke(app, ["grep", "rank|NCCL|Error", str(d), "--json"])
        assert r.exit_code in (0, 1), (d, r.output)  # 1: nothing matched (grep's convention)
        assert (r.exit_code == 1) == (json.loads(r.output)["total"] == 0), d


def test_ask_json_validates_against_the_schema(tmp_path):
    from trainlog_debugger.tools.model import Diagnosis
    md = tmp_path / "pm.md"
    r = runner.invoke(app, ["ask", str(CASE), "--json", "--markdown", str(md)])
    assert r.exit_code == 0, r.output
    d = Diagnosis.model_validate_json(r.output)
    assert (d.status.value, d.category, d.culprit_ranks) == ("hung", "data_loading_stall", [5])
    raw = json.loads(r.output)
    for key in ("status", "category", "culprit_ranks", "culprit_nodes", "confidence"):
        assert key in raw
    ev = raw["chain"][0]["evidence"][0]
    assert set(ev) >= {"file", "line", "text"}
    text = md.read_text()
    assert text.startswith("# Post-mortem: hung") and "error-4891784-1.out:" in text


def test_ask_terminal_report():
    r = runner.invoke(app, ["ask", str(CASE)])
    assert r.exit_code == 0
    assert "chain (trigger first)" in r.output and "culprit: rank 5" in r.output


def test_schema_command():
    r = runner.invoke(app, ["schema"])
    assert r.exit_code == 0
    schema = json.loads(r.output)
    assert {"status", "category", "culprit_ranks", "culprit_nodes", "confidence"} <= set(schema["properties"])
    # the contract's version on top (a keyword a JSON Schema validator ignores) and as the document's property
    assert schema["schema_version"] == 2 and schema["properties"]["schema_version"]["const"] == 2
    assert schema["type"] == "object" and "$defs" in schema
