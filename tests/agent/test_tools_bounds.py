"""Issue 27's bounds on the tools: a regex that backtracks without end comes back as a tool error within 10 s (the
child running it is killed), every call ends within its wall-clock limit, and a malformed tool input, whatever its
shape, is an error result naming what to fix; through the real CLI against the Messages-API stand-in, a run with
malformed tool inputs still ends with the deterministic report and the agent's outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin import StandIn, last_tool_results, message, tool_use

from trainlog_debugger.agent.graph import bounded, caps
from trainlog_debugger.agent.graph.result import ToolResult, ToolStatus, ok
from trainlog_debugger.agent.graph.toolbox import Box, Toolbox
from trainlog_debugger.agent.graph.tools import TOOLS
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
# what a tokenizer dump or a base64 blob in a log looks like to a regex: one long run of one letter, then not it
LONG_LINE = "[default3]:[rank3]:W1105 12:30:00.000000 20003 data.py:41] token dump " + "a" * 30_000 + "!"


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory):
    d = tmp_path_factory.mktemp("long")
    for r in range(4):
        (d / f"rank_{r}.log").write_text(
            f"[default{r}]:[rank{r}]:I1105 12:29:59.000000 2000{r} train.py:10] step 100 loss 2.31\n"
            + (LONG_LINE.replace("default3]:[rank3", f"default{r}]:[rank{r}") + "\n") * 2)
    with open_bundle(d) as b:
        yield b, run(b)


@pytest.mark.parametrize("tool,args,limit", [
    ("grep", {"pattern": "(a|aa)+$"}, None),       # overlapping alternation: passes the nested-quantifier check
    # the other tools run the same child and its kill, under a shorter limit (the production one is timed above)
    ("grep", {"pattern": "(.*a){25}x"}, 1.0),      # a counted group around .*: passes it too
    ("lines", {"rank": 3, "pattern": "(a|aa)+$"}, 1.0),
    ("histogram", {"pattern": "(a|aa)+$"}, 1.0),
])
@pytest.mark.slow
def test_a_catastrophic_regex_is_a_tool_error_within_10_s(long_lines, tool, args, limit, monkeypatch):
    b, inv = long_lines
    if limit is not None:
        monkeypatch.setattr(caps, "REGEX_SECONDS", limit)
    box = Toolbox(b, inv)
    t0 = time.monotonic()
    res = box.call(tool, args)
    took = time.monotonic() - t0
    assert took < 10, f"{tool} took {took:.1f} s"
    assert res.status is ToolStatus.error and "did not finish" in res.data and "literal" in res.data, res.data
    assert json.loads(box.render(res)[0])["status"] == "error"
    assert box.call("grep", {"pattern": "token dump a+!"}).status is ToolStatus.ok, "the toolbox works on after it"


def test_the_regex_child_is_killed_not_left_running():
    t0 = time.monotonic()
    with pytest.raises(bounded.Timeout):
        bounded.in_child(time.sleep, 60, seconds=0.5)
    assert time.monotonic() - t0 < 5
    assert bounded.in_child(sum, [1, 2, 3], seconds=5) == 6
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        bounded.in_child(divmod, 1, 0, seconds=5)


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def test_every_call_ends_within_the_wall_clock_limit(opened, monkeypatch):
    def slow(box: Box) -> ToolResult:
        """A tool that never finishes in time."""
        time.sleep(5)
        return ok("late")
    b, inv = opened
    monkeypatch.setattr(caps, "TOOL_SECONDS", 0.3)
    t0 = time.monotonic()
    res = Toolbox(b, inv, tools=[*TOOLS, slow]).call("slow", {})
    assert time.monotonic() - t0 < 2
    assert res.status is ToolStatus.error and "longer than 0.3 s" in res.data and "narrower" in res.data


@pytest.mark.parametrize("name,args,says", [
    ("grep", "Watchdog", "the input must be a JSON object of named arguments, not str 'Watchdog'"),
    ("grep", ["Watchdog"], "not list"),
    ("grep", None, "not NoneType"),
    ("grep", {"pattern": ["Watchdog"]}, "pattern: Input should be a valid string"),
    ("lines", {"rank": "three"}, "rank: Input should be a valid integer"),
    ("lines", {"rank": 3, "since": "yesterday"}, "since: 'yesterday' is not a time"),
    ("lines", {}, "give rank or node"),
    ("scan_hits", {"tier": 12}, "tier: Input should be less than or equal to 9"),
    ("rank_map", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("histogram", {"bucket": 60}, "pattern: Field required"),
    (None, {}, "no tool named 'None'"),
    ("read_file", {"path": "/etc/passwd"}, "no tool named 'read_file'; tools: overview"),
])
def test_a_malformed_input_is_an_error_result_naming_the_field(opened, name, args, says):
    b, inv = opened
    box = Toolbox(b, inv)
    res = box.call(name, args)
    assert res.status is ToolStatus.error and says in res.data, res.data
    assert json.loads(box.render(res)[0])["status"] == "error"


@pytest.mark.slow
def test_malformed_tool_inputs_through_the_cli_end_with_the_report(tmp_path, opened):
    """Round 1: three malformed calls (a string for the arguments, a wrong type, a tool that does not exist);
    round 2: well-formed calls; round 3: an answer. Each malformed call gets an error tool_result naming what is
    wrong, and the run ends with the deterministic report and the agent's section, exit 0."""
    _, inv = opened
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    bodies = []

    def respond(body, n):
        bodies.append(body)
        if n == 0:
            return message(tool_use("grep", {"pattern": 17}, 1), tool_use("read_lines", {"file": t.file}, 2),
                           tool_use("shell", {"cmd": "ls"}, 3))
        if n == 1:
            return message(tool_use("where_ranks_stop", {}, 4), tool_use("nccl_state", {}, 5),
                           tool_use("read_lines", {"file": t.file, "line": t.line, "before": 2, "after": 2}, 6))
        return message(tool_use("submit_answer", {
            "status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "culprit_nodes": d.culprit_nodes, "confidence": "medium", "summary": "as the deterministic answer",
            "claims": [{"statement": "the trigger line", "citations": [
                {"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]}]}, 10 + n))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_"))}
    env.update(DEBUGGER_HOME=str(tmp_path), ANTHROPIC_API_KEY="sk-ant-test-0000")
    with StandIn(respond) as s:
        env["ANTHROPIC_BASE_URL"] = s.url
        r = subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", str(CASE), "--json"],
                           capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["category"], out["culprit_ranks"]) == (d.category, d.culprit_ranks), "the deterministic report"
    assert out["agent"]["outcome"] in ("answered", "no_answer", "budget"), out["agent"]
    errors = [json.loads(b["content"] if isinstance(b["content"], str) else b["content"][0]["text"])
              for b in last_tool_results(bodies[1])]
    says = {e["tool"]: e["data"] for e in errors}
    assert "pattern: Input should be a valid string" in says["grep"]
    assert "line: Field required" in says["read_lines"]
    assert "no tool named 'shell'" in says["shell"]
