"""`lines` and `histogram` (issue 27) on the bundled 8-rank hang (two SLURM output files, four ranks each behind
torchrun's `[defaultN]:` prefixes; rank 0 retries its data reads from 12:02 to 12:04, the watchdogs of the other
ranks fire at 12:34): a rank's lines between two times, a regex over them, paging, a node's lines, and the count of
matching lines per time bucket. Every line shown is the bundle's own line at its number."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.agent.graph.result import ToolStatus
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@pytest.fixture(scope="module")
def box():
    with open_bundle(CASE) as b:
        yield Toolbox(b, run(b))


def _is_the_line(ln: dict) -> bool:
    file, n = ln["at"].rsplit(":", 1)
    return (CASE / file).read_text().splitlines()[int(n) - 1] == ln["text"]


def test_a_ranks_lines_between_two_times(box):
    res = box.call("lines", {"rank": 0, "since": "12:02", "until": "12:05"})
    assert res.status is ToolStatus.ok and res.data["who"] == "rank 0"
    texts = [ln["text"] for ln in res.data["lines"]]
    assert texts and all(t.startswith("[default0]:") for t in texts), "lines of rank 0 only, by its local prefix"
    assert any("retrying 1/5" in t for t in texts) and not any("Watchdog" in t for t in texts)
    assert all("12:02" <= ln["time"][8:13] <= "12:05" for ln in res.data["lines"])
    assert all(_is_the_line(ln) for ln in res.data["lines"]) and res.lines == res.data["lines"]


def test_a_pattern_and_paging(box):
    every = box.call("lines", {"rank": 0, "pattern": "ProcessGroupNCCL"})
    n = every.data["matches"]
    assert n >= 2 and all("ProcessGroupNCCL" in ln["text"] for ln in every.data["lines"])
    first = box.call("lines", {"rank": 0, "pattern": "ProcessGroupNCCL", "limit": 1})
    second = box.call("lines", {"rank": 0, "pattern": "ProcessGroupNCCL", "limit": 1, "offset": 1})
    assert first.data["lines"] + second.data["lines"] == every.data["lines"][:2]
    assert f"showing 1-1 of {n} matching lines of rank 0; the next page: offset=1" in first.cut
    none = box.call("lines", {"rank": 0, "pattern": "Xid 79"})
    assert none.status is ToolStatus.no_data and none.data["matches"] == 0 and none.data["pattern"] == "Xid 79"


def test_a_nodes_lines(box):
    res = box.call("lines", {"node": "gpu-node-18", "pattern": "Watchdog caught"})
    assert res.status is ToolStatus.ok and res.data["matches"] == 4 - 1  # rank 5 of ranks 4-7 never timed out
    assert box.call("lines", {"node": "gpu-node-99"}).status is ToolStatus.error
    assert "no log line names rank 64" in box.call("lines", {"rank": 64}).data


def test_histogram_counts_matching_lines_per_bucket(box):
    res = box.call("histogram", {"pattern": "Watchdog caught|retrying", "bucket": 60})
    assert res.status is ToolStatus.ok
    b = res.data["buckets"]
    assert b[0]["from"].startswith("--11-05T12:0") and res.data["peak"]["count"] == 7 and res.data["peak"]["ranks"] == 7
    assert sum(x["count"] for x in b) + res.data["untimed"] == res.data["matches"]
    wide = box.call("histogram", {"pattern": "Watchdog caught|retrying", "bucket": 1})
    assert wide.data["bucket_seconds"] > 1 and any("widened" in c for c in wide.cut)
    assert box.call("histogram", {"pattern": "("}).status is ToolStatus.error
