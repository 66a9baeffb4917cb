"""Issue 27's "tools that answer at scale", on a real-format 1,024-rank bundle (the generated data-loading straggler
cases/gen-1024r-007: 128 SLURM output files, rank 0 never joins BROADCAST 4521 and 1,023 watchdogs fire), with one
more rank's watchdog line taken out: what the model is sent of a grep over 1,023 matching ranks still holds the ranks
without a match (as ranges), whatever the token cap cut; nccl_state keeps the culprit's own lines; rank sets are
ranges, not 1,023 numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.result import ranges
from trainlog_debugger.agent.graph.toolbox import Toolbox, fit
from trainlog_debugger.agent.llm.tokens import count
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-1024r-007"
QUIET = 17  # the rank whose watchdog line is taken out


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("scale") / "bundle"
    shutil.copytree(CASE, d, ignore=shutil.ignore_patterns("truth.yaml"))
    hit = [p for p in d.iterdir() if f"[rank{QUIET}]:" in p.read_text() and "Watchdog caught" in p.read_text()]
    assert len(hit) == 1
    kept = [ln for ln in hit[0].read_text().splitlines()
            if not (f"[rank{QUIET}]:" in ln and "Watchdog caught collective operation timeout" in ln)]
    hit[0].write_text("\n".join(kept) + "\n")
    with open_bundle(d) as b:
        yield b, run(b)


@pytest.mark.slow
def test_grep_at_1024_ranks_keeps_the_ranks_without_a_match(big):
    b, inv = big
    box = Toolbox(b, inv)
    res = box.call("grep", {"pattern": "Watchdog caught collective operation timeout", "limit": 200})
    text, shown = box.render(res)
    assert count(text) <= caps.TOOL_RESULT_TOKENS + 40  # the cap, and its one-line note at most
    sent = json.loads(text)  # cut on its lists, not in the middle of the JSON
    data = sent["data"]
    assert data["ranks_without_match"] == f"0,{QUIET}" and data["ranks_with_match"] == f"1-1023 except {QUIET}"
    assert data["matches"] == 1022 and data["ranks_seen"] == 1024
    assert any(c.startswith("[token cap] showing") and "data.by_rank" in c and "offset/limit" in c
               for c in sent["cut"]), sent["cut"]
    assert "showing 1-200 of 1022 ranks with matches; the next page: offset=200" in sent["cut"]
    assert shown and all(at in text for at in shown), "only lines still in the text count as shown"
    page2 = box.call("grep", {"pattern": "Watchdog caught collective operation timeout", "offset": 1000})
    assert [r["rank"] for r in page2.data["by_rank"]] == list(range(1002, 1024))


def test_nccl_state_at_1024_ranks_leads_with_the_culprit(big):
    b, inv = big
    box = Toolbox(b, inv)
    text, shown = box.render(box.call("nccl_state", {}))
    data = json.loads(text)["data"]
    assert data["culprits"] == "0" and data["groups"][0]["roles"]["never_entered"] == "0"
    assert [ln["at"] for ln in data["culprit_lines"]] and all(ln["at"] in shown for ln in data["culprit_lines"])
    assert max(len(json.dumps(r["ranks"])) for r in data["rank_rows"]) < 40, "rank sets as ranges"


def test_where_ranks_stop_pages_through_1024_ranks(big):
    b, inv = big
    box = Toolbox(b, inv)
    first = box.call("where_ranks_stop", {"limit": 10})
    assert len(first.data) == 10 and "showing 1-10 of 1024 ranks (earliest first); the next page: offset=10" in \
        first.cut
    assert len(box.call("where_ranks_stop", {"limit": 10, "offset": 1020}).data) == 4


@pytest.mark.parametrize("ranks,written", [
    ([*range(17), *range(18, 1024)], "0-1023 except 17"),
    ([0, 1, 2, 3, 7], "0-3,7"),
    (sorted(set(range(4096)) - {5, 900, 901, 902}), "0-4095 except 5,900-902"),
    ([], ""),
    (range(0, 400, 2), None),  # 200 single ranks: exact up to 64 ranges, the rest counted
])
def test_rank_sets_are_written_as_ranges(ranks, written):
    got = ranges(ranks)
    if written is not None:
        assert got == written
    else:
        assert got.startswith("0,2,4,") and got.endswith(",… +136 ranks in 136 more ranges")


def test_fit_shortens_the_heaviest_list_and_says_so():
    payload = {"tool": "t", "status": "ok", "params": {}, "cut": [],
               "data": {"answer": "0-1023 except 17", "rows": [{"line": "x" * 200, "n": i} for i in range(500)],
                        "small": [1, 2, 3]}}
    text = fit(payload, 1000, pages=True)
    sent = json.loads(text)
    assert count(text) <= 1000 and sent["data"]["answer"] == "0-1023 except 17" and sent["data"]["small"] == [1, 2, 3]
    n = len(sent["data"]["rows"])
    assert 0 < n < 500 and sent["cut"] == [f"[token cap] showing {n} of 500 items of data.rows; page with offset/limit"]
