"""`debugger schema COMMAND` for every command's JSON (issue 29), and every command's document conforms to it: on
the bundled cases the schemas were written from and on real incidents they were not (a renamed key or a changed type
fails here; keys may be added)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.agent.cli.schemas import COMMANDS, errors, infer, schema_of

CASES = Path(__file__).resolve().parents[1] / "cases"
BUNDLES = [CASES / "gen-slurm-8r-a", CASES / "gen-ais-8r-a", CASES / "real" / "yolov8-ddp-sighup-terminal-closed-nohup",
           CASES / "real" / "accelerate-1210-slurm-cgroup-optimizer-load"]
runner = CliRunner()


def _doc(args):
    r = runner.invoke(app, [*args, "--json"])
    return json.loads(r.stdout) if r.exit_code in (0, 1) and r.stdout.strip() else None


@pytest.mark.slow
@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
@pytest.mark.parametrize("command", ["ask", "scan", "nccl", "grep", "diff", "steps", "ais"])
def test_every_document_conforms_to_its_schema(command, bundle):
    args = {"grep": ["grep", "NCCL|error|Error"], "ask": ["ask", "--offline"]}.get(command, [command])
    doc = _doc([*args, str(bundle)])
    if doc is None:  # ais on a bundle with no daemon logs: exit 2, no document
        assert command == "ais", (command, bundle)
        return
    assert errors(doc, schema_of(command)) == []


def test_schema_prints_every_commands_contract():
    for command in ("ask", *COMMANDS):
        r = runner.invoke(app, ["schema", command])
        assert r.exit_code == 0, r.output
        s = json.loads(r.stdout)
        assert s["schema_version"] == 2
        if command != "catalog":
            assert {"schema_version", "tool_version", "generated_at", "bundle"} <= set(s["required"])
    r = runner.invoke(app, ["schema", "bogus"])
    assert r.exit_code == 2 and "choose one of: ask, scan" in r.output


def test_the_validator_finds_a_renamed_key_and_a_changed_type():
    schema = infer([{"status": "hung", "ranks": "0-7", "n": 8}, {"status": "crashed", "ranks": "0-3", "n": 4}])
    assert errors({"status": "hung", "ranks": "0-7", "n": 8}, schema) == []
    assert errors({"state": "hung", "ranks": "0-7", "n": 8}, schema) == ["$: status is missing"]
    assert errors({"status": "hung", "ranks": [0, 1], "n": 8}, schema) == ["$.ranks: list where string is expected"]
