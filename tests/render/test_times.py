"""One time style everywhere (issue 29): text output never shows our internal `--MM-DD` form (the year the log did
not state), and every time in every command's JSON is RFC 3339 with an offset, or null with the time as the log
stated it beside it (`<key>_text`). The documents carry schema_version, tool_version, generated_at and the bundle."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.agent.render.data import rfc3339, rfc3339_times

CASES = Path(__file__).resolve().parents[2] / "cases"
# glog/c10 stamps without a year (the `--11-05` case), a Python-logging bundle with years, a real SLURM log
BUNDLES = [CASES / "gen-slurm-8r-a", CASES / "gen-128r-026"]
COMMANDS = [["scan"], ["nccl"], ["steps"], ["diff"], ["grep", "Watchdog|timed out"], ["ask", "--offline", "--full"]]
NO_YEAR_ISO = re.compile(r"(?<![\w-])--\d\d-\d\d")
ISOISH = re.compile(r"^(?:\d{4}|-)?-?\d\d-\d\dT\d\d:\d\d|^T\d\d:\d\d:\d\d|^uptime\+")

runner = CliRunner()


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_text_never_shows_a_date_without_its_year_as_dashes(bundle, cmd):
    r = runner.invoke(app, [*cmd, str(bundle)], env={"COLUMNS": "120"})
    assert r.exit_code in (0, 1), r.output
    assert not NO_YEAR_ISO.search(r.stdout), NO_YEAR_ISO.search(r.stdout)


def _times(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _times(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _times(v, f"{path}[{i}]")
    elif isinstance(obj, str) and ISOISH.match(obj):
        yield path, obj


@pytest.mark.slow
@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_every_json_time_is_rfc3339_or_null_and_the_document_says_what_wrote_it(bundle, cmd):
    r = runner.invoke(app, [*cmd, str(bundle), "--json"])
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    for path, value in _times(doc):
        t = dt.datetime.fromisoformat(value)  # RFC 3339 is a profile of ISO 8601: Python reads it
        assert t.tzinfo is not None and value[4] == "-", (path, value)
    assert doc["schema_version"] == 2 and doc["tool_version"] and doc["bundle"] == [str(bundle)]
    assert dt.datetime.fromisoformat(doc["generated_at"]).tzinfo is not None
    if cmd[0] == "ask":  # a stamp the log gave without a year: null, and the time as stated beside it
        first = doc["timeline"][0]
        assert first["time"] is None and first["time_text"].startswith("Nov 05 "), first


def test_rfc3339_keeps_what_the_log_stated_and_nothing_more():
    assert rfc3339("2024-11-05T12:00:01.000000+00:00") == "2024-11-05T12:00:01.000000+00:00"
    assert rfc3339("2024-11-05T12:00:01.000000") is None          # no zone stated
    assert rfc3339("--11-05T12:00:01.000000+02:00") is None       # no year stated
    assert rfc3339("2024-11-05T12:00:01.000000[CST]") is None     # a zone name with several offsets
    assert rfc3339("uptime+5107.644336s") is None                 # dmesg: seconds since boot
    assert rfc3339("ALLREDUCE") == "ALLREDUCE"                    # not a time: as it is
    got = rfc3339_times({"time": "--11-05T12:34:10.579409", "evidence": {"time": {"text": "1105 12:34:10.579409",
                                                                              "iso": "--11-05T12:34:10.579409"}}})
    assert got == {"time": None, "time_text": "Nov 05 12:34:10.579",
                   "evidence": {"time": {"text": "1105 12:34:10.579409", "iso": None}}}
