"""The readers the sources declare (READER, tools/sources/declare.py): `debugger catalog` lists the structured readers beside the patterns, and every rule a reader
claims to feed is a rule the diagnosis really has (a renamed rule would leave the catalog lying)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.tools.sources import declared

READERS = [r for _, r in declared("READER")]

RULES_SRC = "\n".join(p.read_text() for p in (Path(__file__).resolve().parents[1] / "tools" / "rules").glob("*.py"))


def test_every_reader_feeds_rules_that_exist():
    emitted = set(re.findall(r'candidate\(\s*f?"([a-z_]+\.[a-z_]+)"', RULES_SRC))
    families = {f"{p}.*" for p in re.findall(r'candidate\(\s*f"([a-z_]+)\.\{', RULES_SRC)}  # f"hardware.{check}"
    for r in READERS:
        assert r.rules and set(r.rules) <= emitted | families, (r.id, set(r.rules) - emitted - families)


def test_catalog_lists_readers_with_their_formats():
    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["catalog", "--json"]).output)
    readers = {r["id"]: r for r in rows if r["role"] == "reader"}
    assert "reader.stacks" in readers and any("--json" in f for f in readers["reader.stacks"]["formats"])
    assert all(r["role"] != "reader" for r in rows[: len(rows) - len(readers)])  # patterns first, readers after
    text = runner.invoke(app, ["catalog"], env={"COLUMNS": "200"}).output
    assert "structured readers" in text and "probing" in text
