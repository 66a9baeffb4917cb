"""agent/cli/runner.py: the format chosen once (`--format`, its aliases agreeing), one runner for the report
commands, and every format's renderer written by its kind. The outputs themselves were compared byte for byte with
the pre-refactor tool when the runner replaced the per-command branches (issue 26); here: the choices, that each
alias gives what `--format` gives, and that a new report type or format is one registry entry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from trainlog_debugger.agent.cli import runner as R
from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.agent.cli.fast import parse
from trainlog_debugger.agent.render import registry

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "cases" / "gen-slurm-8r-a"
FR = ROOT / "tests" / "sources" / "flight_recorder" / "fixtures" / "gloo-2.13"
AIS = ROOT / "cases" / "gen-ais-8r-a" / "ais_logs"
cli = CliRunner()
VOLATILE = [re.compile(r"\d+(\.\d+)? ?(s|MB/s|GB/s)\b"), re.compile(r'"seconds": [0-9.e-]+'),
            re.compile(r'"generated_at": "[^"]+"')]


def _same(a: str) -> str:
    for v in VOLATILE:
        a = v.sub("#", a)
    return a


def test_the_format_is_text_unless_asked_and_aliases_must_agree():
    assert R.choose("scan", None, {"--json": None}) == "text"
    assert R.choose("scan", None, {"--json": "json"}) == "json"
    assert R.choose("scan", "json", {"--json": "json"}) == "json"  # the same thing asked twice: fine
    assert R.choose("diagnosis", None, {"--json": None, "--markdown -": "markdown", "--html -": None}) == "markdown"
    with pytest.raises(typer.BadParameter, match=r"--format text and --json ask for different formats"):
        R.choose("scan", "text", {"--json": "json"})
    with pytest.raises(typer.BadParameter, match=r"scan has no markdown output; choose one of: text, json"):
        R.choose("scan", "markdown")
    with pytest.raises(typer.BadParameter, match=r"ask has no csv output; choose one of: text, json, markdown, html"):
        R.choose("diagnosis", "csv")


def test_every_kind_of_format_has_a_writer():
    assert set(registry.FORMATS.values()) <= set(R.WRITERS)


@pytest.mark.parametrize("args, report", [
    (["scan", str(CASE)], "scan"), (["grep", "Watchdog caught", str(CASE)], "grep"), (["nccl", str(CASE)], "nccl"),
    (["diff", str(CASE)], "diff"), (["steps", str(CASE)], "steps"), (["fr", str(FR)], "fr"), (["ais", str(AIS)], "ais"),
    (["catalog"], "catalog"), (["ask", str(CASE)], "diagnosis"),
])
def test_each_alias_prints_what_its_format_prints(args, report):
    """--json is --format json; the default is --format text; `ask --markdown -` is --format markdown."""
    for alias, fmt in ([], "text"), (["--json"], "json"), (["--markdown", "-"], "markdown"):
        if fmt not in registry.formats(report):
            continue
        a, b = cli.invoke(app, args + alias), cli.invoke(app, args + ["--format", fmt])
        assert a.exit_code == b.exit_code == 0, (alias, a.output[-500:], b.output[-500:])
        assert _same(a.stdout) == _same(b.stdout) and a.stdout.strip(), (args, fmt)
        if fmt == "json":
            json.loads(a.stdout)


@pytest.mark.parametrize("args", [["scan", str(CASE), "--format", "markdown"],
                                  ["nccl", str(CASE), "--json", "--format", "text"],
                                  ["ask", str(CASE), "--json", "--markdown", "-"],
                                  ["ask", str(CASE), "--format", "html", "--markdown", "-"]])
def test_a_format_the_report_lacks_or_two_that_disagree_is_a_usage_error(args):
    r = cli.invoke(app, args)
    assert r.exit_code == 2 and "--format" in r.output and r.stdout.count("{") == 0, r.output


def test_the_fast_path_takes_scans_formats_and_leaves_the_rest_to_typer():
    assert parse(["scan", "a", "--format", "json"]).keywords == {"fmt": "json"}
    assert parse(["scan", "a", "--format=text", "--json"]) is None  # they disagree: Typer's usage error
    assert parse(["scan", "a", "--json", "--format", "json"]).keywords == {"json_": True, "fmt": "json"}
    assert parse(["scan", "a", "--format", "markdown"]) is None
    assert parse(["scan", "a", "--format"]) is None


class _Toy:
    def __init__(self, n: int):
        self.n = n

    def __str__(self) -> str:
        return f"toy of {self.n}\n"

    def to_json(self) -> dict:
        return {"n": self.n}


def test_a_new_report_type_is_one_registry_entry_and_one_call(monkeypatch, capsys, tmp_path):
    """The runner opens nothing when told (`bundle=False`), hands the analysis its parameters, renders through the
    registry, passes each format only its own options, and exits with the report's code."""
    monkeypatch.setitem(registry.RENDERERS, "toy", {"json": registry.JSON,
                                                    "markdown": registry.Renderer("builtins:str")})
    seen = {}

    def analyze(paths, progress, n):
        seen.update(paths=paths, progress=progress)
        return _Toy(n)

    R.run_report("toy", analyze, [tmp_path], "json", bundle=False, options={"markdown": {"never": "passed"}}, n=3)
    doc = json.loads(capsys.readouterr().out)
    assert doc.pop("generated_at") and doc.pop("tool_version")  # every document's head (agent/render/data.py)
    assert doc == {"schema_version": 2, "bundle": [str(tmp_path)], "n": 3}
    assert seen == {"paths": [tmp_path], "progress": None}
    with pytest.raises(SystemExit) as e:
        R.run_report("toy", analyze, [], "markdown", bundle=False, exit_code=lambda rep: 1 if rep.n else 0, n=4)
    assert e.value.code == 1 and capsys.readouterr().out == "toy of 4\n"
    assert R.choose("toy", "json") == "json"
    with pytest.raises(typer.BadParameter, match="toy has no text output; choose one of: json, markdown"):
        R.choose("toy", None)


def test_an_analysis_that_fails_is_one_line_and_exit_2(capsys):
    def analyze(paths, progress):
        raise ValueError("the bundle holds nothing this reads")

    with pytest.raises(SystemExit) as e:
        R.run_report("nccl", analyze, [], "text", bundle=False)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: internal error: ValueError: the bundle holds") \
        and err.count("\n") == 1
