"""`debugger grep --json` (schema_version 2): matching lines grouped by template across ranks, the ranks with and
without a match as range sets; the per-rank listing only with --per-rank. On a bundled 8-rank case where rank 5's
watchdog never fired."""

from __future__ import annotations

import json
from pathlib import Path

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.groups import per_rank_listing
from trainlog_debugger.tools.jsonable import dumps
from trainlog_debugger.tools.scan.grep import grep_bundle

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


def test_matches_grouped_by_template():
    with open_bundle(CASE) as b:
        res = grep_bundle(b, "Watchdog caught")
    d = json.loads(dumps(res.to_json()))
    assert d["schema_version"] == 2 and "ranks" not in d
    assert (d["ranks_without_match"], d["ranks_without_match_count"]) == ("5", 1)
    assert (d["ranks_with_match"], d["ranks_with_match_count"]) == ("0-7 except 5", 7)
    assert d["grouped_lines"] == d["total"] == sum(g["count"] for g in d["groups"])
    for g in d["groups"]:   # every template: its ranks, its lines, first/last exemplars from real lines
        assert "<NUM>" in g["template"] or "<" in g["template"]
        assert g["ranks"] == "0-7 except 5" and g["rank_count"] == 7
        assert all("Watchdog caught" in e["text"] and e["rank"] != 5 for e in g["exemplars"])
    with per_rank_listing():
        full = json.loads(dumps(res.to_json()))
    assert sorted(x["rank"] for x in full["ranks"]) == [0, 1, 2, 3, 4, 6, 7]
    assert sum(x["count"] for x in full["ranks"]) == d["total"] - d["unranked_count"]
