"""`debugger diff --json` (schema_version 2): every rank list a range set with its count, exact; the text at 80
columns names the ranks as range sets too. On a bundled 8-rank case where rank 5 stops outside the collective."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from trainlog_debugger.agent.render.diff import render_diff
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.groups import parse_rank_set
from trainlog_debugger.tools.jsonable import dumps
from trainlog_debugger.tools.rankdiff.analyze import diff_bundle

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


def test_rank_lists_are_range_sets():
    with open_bundle(CASE) as b:
        res = diff_bundle(b)
    d = json.loads(dumps(res.to_json()))
    assert d["schema_version"] == 2 and (d["ranks"], d["rank_count"]) == ("0-7", 8)
    assert d["only"] and d["missing"]
    for kind in ("only", "missing"):
        for td, j in zip(getattr(res, kind), d[kind]):
            assert parse_rank_set(j["ranks"]) == td.ranks and j["rank_count"] == len(td.ranks)
    lacking = next(j for j in d["missing"] if "Watchdog caught" in j["example"]["text"])
    assert lacking["ranks"] == "5" and lacking["missing_example"]["rank"] == 5
    con = Console(record=True, width=80)
    render_diff(res, con)
    text = con.export_text()
    assert "lacking 5;" in text and "rank 5 ends at" in text
    assert max(len(line) for line in text.splitlines()) <= 80 or len(text.splitlines()) < 60
