"""The tools over the reports `ask` makes (issue 27): the grouped stack dumps, the hardware comparison, the
flight-recorder groups, the Kubernetes records, the scan's tiered hits, the rank → node map and the files, each on a
bundle in the real formats its report reads, each answering first with what decides (the odd group, the outlier
node, the rank that never joined), every line it quotes a line the model may cite; and every report the CLI has is
reachable as a tool."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from trainlog_debugger.agent.graph.result import ToolStatus
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.agent.graph.tools import TOOLS
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "sources" / "hw"), str(TESTS / "sources")]
from hw_samples import bundle as hw_bundle  # noqa: E402
from test_k8s import DESCRIBE_OOM, _worker_log  # noqa: E402
from test_stacks_and_snapshots import add_stacks  # noqa: E402

FR = TESTS / "sources" / "flight_recorder" / "fixtures" / "gloo-2.13"
ODD = 13  # the rank reading data while the 31 others wait in all_reduce


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    """4 nodes × 8 ranks: worker logs, nvidia-smi/ibstat/perfquery/nccl-tests per node with node 1's IB port down,
    and py-spy dumps with rank 13 in the DataLoader."""
    d = tmp_path_factory.mktemp("hw")
    names = hw_bundle(d, 4, bad="port_down", bad_node=1)
    add_stacks(d, 4, odd=ODD)
    with open_bundle(d) as b:
        yield b, run(b), names


def _sent(box, name, args=None):
    res = box.call(name, args or {})
    text, shown = box.render(res)
    return res, json.loads(text), shown


def test_stacks_lead_with_the_minority_group(snapshots):
    b, inv, _ = snapshots
    res, sent, shown = _sent(Toolbox(b, inv), "stacks")
    assert res.status is ToolStatus.ok and list(sent["data"])[0] == "minority"
    odd = sent["data"]["minority"]
    assert (odd["ranks"], odd["category"], odd["doing"]) == (str(ODD), "data_loading_stall", "reading data")
    major, minor = sent["data"]["groups"]
    assert major["ranks"] == f"0-31 except {ODD}" and major["in_collective"] and major["processes"] == 31
    assert minor["line"]["at"].endswith(f"rank-{ODD}.pid-{20032 + ODD % 8}.pyspy.txt:5")
    assert "_try_get_data" in minor["line"]["text"] and minor["line"]["at"] in shown


def test_hardware_names_the_node_out_of_line_with_its_line(snapshots):
    b, inv, names = snapshots
    res, sent, shown = _sent(Toolbox(b, inv), "hardware")
    out = sent["data"]["outliers"]
    assert res.status is ToolStatus.ok and [(o["node"], o["check"]) for o in out] == [(names[1], "ib_port_down")]
    at = out[0]["lines"][0]["at"]
    assert at in shown and "Down" in (Path(b.root) / at.rsplit(":", 1)[0]).read_text().splitlines()[
        int(at.rsplit(":", 1)[1]) - 1]
    assert sent["data"]["nodes_compared"] == 4


def test_rank_map_and_files(snapshots):
    b, inv, names = snapshots
    box = Toolbox(b, inv)
    _, sent, shown = _sent(box, "rank_map", {"node": names[1]})
    row = sent["data"]["rows"][0]
    assert row["ranks"] == "8-15" and names[1] in row["line"]["text"] and row["line"]["at"] in shown
    res = box.call("files", {"kind": "pyspy", "limit": 5})
    assert res.data["kinds"]["pyspy"] == 32 and len(res.data["rows"]) == 5
    assert "showing 1-5 of 32 files; the next page: offset=5" in res.cut
    assert box.call("files", {"kind": "nope"}).status is ToolStatus.error


def test_flight_recorder_names_the_rank_that_never_joined(tmp_path):
    shutil.copytree(FR, tmp_path / "fr")
    with open_bundle(tmp_path / "fr") as b:
        box = Toolbox(b, run(b))
        res, sent, shown = _sent(box, "flight_recorder")
        g = sent["data"]["groups"][0]
        assert (g["pg"], g["op"], g["stuck_seq"], g["missing_ranks"]) == ("0", "gloo:all_reduce", 5, "3")
        assert "rank 3 never joined" in sent["data"]["findings"][0]["summary"] and shown
        assert box.call("flight_recorder", {"seq": 99}).status is ToolStatus.no_data
        files = box.call("files", {})
        assert files.data["kinds"] == {"fr_dump": 4}, "dumps are listed though the line scan skips them"


def test_records_and_scan_hits_on_a_kubernetes_bundle(tmp_path):
    (tmp_path / "describe-worker-1.txt").write_text(DESCRIBE_OOM)
    (tmp_path / "worker-1.log").write_text(_worker_log())
    with open_bundle(tmp_path) as b:
        box = Toolbox(b, run(b))
        res, sent, shown = _sent(box, "records")
        ids = {r["id"]: r for r in sent["data"]["rows"]}
        assert "k8s.oomkilled" in ids and ids["k8s.oomkilled"]["lines"][0]["at"] == "describe-worker-1.txt:22"
        assert "OOMKilled" in shown["describe-worker-1.txt:22"] == (tmp_path / "describe-worker-1.txt").read_text(
        ).splitlines()[21]
        hits = box.call("scan_hits", {"rank": 5})
        assert hits.status is ToolStatus.ok and all(r["ranks"] for r in hits.data["rows"])
        tiers = box.call("scan_hits", {"tier": 1})
        assert {r["tier"] for r in tiers.data["rows"]} == {1}
        assert box.call("scan_hits", {"rank": 999}).status is ToolStatus.error
        assert box.call("stacks", {}).status is ToolStatus.no_data
        assert box.call("hardware", {}).status is ToolStatus.no_data


def test_every_report_of_the_cli_is_reachable_as_a_tool():
    """Each `debugger` report command (agent/cli/tools.py COMMANDS) and each report `ask` makes has a tool."""
    from trainlog_debugger.agent.cli.tools import COMMANDS
    names = {fn.__name__ for fn in TOOLS}
    answers = {"scan": "scan_hits", "grep": "grep", "nccl": "nccl_state", "diff": "rank_diff", "fr": "flight_recorder",
               "ais": "storage", "steps": "step_times", "catalog": "explain_line", "schema": None}
    assert {c.__name__ for c in COMMANDS} == set(answers)
    assert {t for t in answers.values() if t} <= names
    assert {"stacks", "hardware", "records", "files", "rank_map", "lines", "histogram"} <= names
