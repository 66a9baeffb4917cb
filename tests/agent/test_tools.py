"""The agent's tools as one registry: each declared once (a function in TOOLS whose signature and docstring are its
schema), run by name with its arguments validated, answering ok / no_data / error, reading reports only through
their to_json(), and cutting with the named caps, each cut said. The bundle is the bundled 8-rank hang (rank 5
never entered the collective), run through the real pipeline."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.result import ToolResult, ToolStatus, line, no_data, ok, quote
from trainlog_debugger.agent.graph.toolbox import Toolbox, declare, schema
from trainlog_debugger.agent.graph.tools import TOOLS, Box
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
REPORTS = ("scan", "nccl", "fr", "ais", "steps", "diff")


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def test_every_tool_is_declared_by_its_signature_and_docstring():
    specs = [schema(fn) for fn in TOOLS]
    assert len({s["name"] for s in specs}) == len(TOOLS) == len(specs)
    for fn, s in zip(TOOLS, specs):
        assert s["name"] == fn.__name__ and s["description"] and "\n" not in s["description"]
        props = s["input_schema"]["properties"]
        assert "box" not in props, "the toolbox is injected, never shown to the model"
        for name, p in props.items():
            assert p.get("description"), (fn.__name__, name)
    grep = next(s for s in specs if s["name"] == "grep")["input_schema"]
    assert grep["required"] == ["pattern"] and grep["properties"]["ignore_case"]["default"] is False
    assert grep["properties"]["pattern"]["maxLength"] == caps.GREP_PATTERN_CHARS
    read = next(s for s in specs if s["name"] == "read_lines")
    assert read["input_schema"]["properties"]["before"]["default"] == caps.WINDOW_CONTEXT
    assert f"at most {caps.WINDOW_LINES}" in read["description"], "the model is told the window's cap"
    stop = next(s for s in specs if s["name"] == "where_ranks_stop")["input_schema"]["properties"]["limit"]
    assert (stop["default"], stop["maximum"]) == (caps.STOP_RANKS, caps.STOP_RANKS_MAX)


def test_a_parameter_the_docstring_does_not_describe_is_refused():
    def last_words(box: Box, rank: int) -> ToolResult:
        """The last line a rank printed."""
        return no_data("none")
    with pytest.raises(ValueError, match="no parameter rank"):
        declare(last_words)


def test_a_new_tool_is_one_function_in_the_list(opened):
    """What adding a tool takes: a function over a report's to_json(), passed in the registry."""
    def file_kinds(box: Box, kind: str = "slurm_out") -> ToolResult:
        """The files of one kind.

        Args:
            kind: a file kind as overview lists them
        """
        files = [f["file"] for f in box.report("scan")["files"] if f["kind"] == kind]
        return ok(files) if files else no_data(f"no file of kind {kind}")
    b, inv = opened
    box = Toolbox(b, inv, tools=[*TOOLS, file_kinds])
    assert "file_kinds" in {s["name"] for s in box.schemas()}
    kind = box.report("scan")["files"][0]["kind"]
    res = box.call("file_kinds", {"kind": kind})
    assert res.status is ToolStatus.ok and res.params == {"kind": kind} and res.data
    assert box.call("file_kinds", {"kind": "nope"}).status is ToolStatus.no_data


@pytest.mark.parametrize("name,args,says", [
    ("read_lines", {"file": "error-4891784-1.out", "line": "fifty"}, "line: Input should be a valid integer"),
    ("read_lines", {"file": "error-4891784-1.out"}, "line: Field required"),
    ("grep", {"pattern": "NCCL", "regex": True}, "regex not among pattern, ignore_case"),
    ("shell", {"cmd": "ls"}, "no tool named 'shell'; tools: overview, where_ranks_stop"),
    ("grep", {"pattern": "("}, "not a valid Python regex"),
    ("grep", {"pattern": "x" * 301}, "pattern: String should have at most 300 characters"),
    ("where_ranks_stop", {"limit": 9999}, "limit: Input should be less than or equal to 512"),
    ("explain_line", {"file": "error-4891784-1.out"}, "give both file and line"),
])
def test_bad_calls_are_error_results_the_model_can_correct(opened, name, args, says):
    b, inv = opened
    res = Toolbox(b, inv).call(name, args)
    assert res.status is ToolStatus.error and says in res.data, res.data
    assert json.loads(Toolbox(b, inv).render(res)[0])["status"] == "error"


def test_nothing_found_is_no_data_with_what_was_searched(opened):
    b, inv = opened
    res = Toolbox(b, inv).call("grep", {"pattern": "Xid 79"})
    assert res.status is ToolStatus.no_data and res.data == {"matches": 0, "ranks_seen": 8}
    assert res.params == {"pattern": "Xid 79", "ignore_case": False, "offset": 0, "limit": caps.GREP_RANKS}


def test_a_cap_cuts_and_says_what_it_cut(opened):
    b, inv = opened
    res = Toolbox(b, inv).call("grep", {"pattern": "Watchdog caught collective operation timeout", "limit": 2})
    assert [r["rank"] for r in res.data["by_rank"]] == [0, 1]
    assert "showing 1-2 of 7 ranks with matches; the next page: offset=2" in res.cut
    assert res.data["ranks_with_match"] == "0-7 except 5" and res.data["ranks_without_match"] == "5"
    assert caps.take([1, 2, 3], 5, "x", cut := []) == [1, 2, 3] and cut == []


class OnlyJson:
    """A report reduced to its public JSON: reading any other attribute fails the test."""

    def __init__(self, rep):
        self._rep = rep

    def to_json(self) -> dict:  # made when asked, as the report's own is (inside the toolbox's per-rank listing)
        return self.__dict__["_rep"].to_json()

    def __getattr__(self, name):
        raise AssertionError(f"a tool read the report's field {name!r}: read its to_json()")


def test_tools_read_reports_only_through_to_json(opened):
    b, inv = opened
    reduced = dataclasses.replace(inv, **{k: OnlyJson(getattr(inv, k)) for k in REPORTS
                                          if getattr(inv, k) is not None})
    box, plain = Toolbox(b, reduced), Toolbox(b, inv)
    t = inv.diagnosis.chain[0].evidence[0]
    calls = [("overview", {}), ("where_ranks_stop", {"limit": 3}), ("nccl_state", {}), ("step_times", {}),
             ("storage", {}), ("timeline", {}), ("rank_diff", {}), ("grep", {"pattern": "SIGTERM"}),
             ("read_lines", {"file": t.file, "line": t.line}), ("explain_line", {"file": t.file, "line": t.line})]
    for name, args in calls:
        res = box.call(name, args)
        assert res.status is not ToolStatus.error, (name, res.data)
        assert res.payload() == plain.call(name, args).payload()
    assert box.hosts() == ["gpu-node-17", "gpu-node-18"]


def test_nccl_state_quotes_the_culprits_own_lines(opened):
    b, inv = opened
    box = Toolbox(b, inv)
    res = box.call("nccl_state", {})
    assert res.status is ToolStatus.ok and res.data["verdict"] == "straggler" and res.data["culprits"] == "5"
    row = res.data["rank_rows"][0]
    assert row["ranks"] == "5" and row["role"] == "never_entered" and row["enqueued"] == row["completed"] == 4520
    assert row["evidence"]["at"] == "error-4891784-1.out:66" and "Observed flight recorder dump signal" in \
        row["evidence"]["text"]
    assert [ln["at"] for ln in res.data["culprit_lines"]] == ["error-4891784-1.out:66", "error-4891784-1.out:67"]
    text, shown = box.render(res)
    assert {"error-4891784-1.out:66", "error-4891784-1.out:67"} <= set(shown)


def test_lines_inside_a_report_field_count_as_shown():
    """AIStore's stats jump names the two stats lines it compares (`start_line`, `end_line`): quoted, they are
    lines like any other, and the model may cite them."""
    jump = {"daemon": "t[oNMi8794]", "errors": 110, "start_line": {
        "file": "ais_logs/aistarget-oNMi8794.tar.gz!aistarget.ais-target-1.INFO.0821-200014.328", "line": 221,
        "text": "I 00:03:47.071058 {err.get.n:14,err.kalive.n:9,get.n:21773}", "node": "t[oNMi8794]",
        "time": {"iso": "2025-08-22T00:03:47.071058+00:00", "hour": 0}}, "counters": {"err.get.n": {"delta": 12}}}
    lines: list[dict] = []
    out = quote(jump, lines)
    at = "ais_logs/aistarget-oNMi8794.tar.gz!aistarget.ais-target-1.INFO.0821-200014.328:221"
    assert out["start_line"] == {"at": at, "text": jump["start_line"]["text"],
                                 "time": "2025-08-22T00:03:47.071058+00:00"}
    assert lines == [out["start_line"]] and out["counters"] == jump["counters"]
    assert line({"file": "rank_3.log", "line": 9, "text": "x", "rank": 3}) == {"at": "rank_3.log:9", "text": "x",
                                                                               "rank": 3}
