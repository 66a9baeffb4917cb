"""The protocol in code (agent/graph/protocol.py), with scripted models: an answer before the model has seen where
every rank stops and the collective state is sent back with what is missing (in round 1 with no tool call at all,
or in the same reply as the calls), a model that keeps doing so ends without an answer, a repeated or alternating
call is nudged and then its tool withdrawn from what the model is offered; and, through the real CLI against the
Messages-API stand-in, an answer with no tool call is sent back as the submit_answer tool_result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_model import ScriptedModel, looked, reply, tool_call
from langchain_core.messages import ToolMessage
from standin import StandIn, last_tool_results, message, tool_use

from trainlog_debugger.agent.graph import protocol as P
from trainlog_debugger.agent.graph.graph import build_graph
from trainlog_debugger.agent.graph.session import ask
from trainlog_debugger.agent.graph.state import Limits
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


class Recording(ScriptedModel):
    """The scripted model, also keeping the names of the tools each request offered."""

    offers: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        self.offers.append([t["name"] for t in self.bound_tools])
        return super()._generate(messages, stop, run_manager, **kw)


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _answer(inv) -> dict:
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    return {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "culprit_nodes": d.culprit_nodes, "confidence": "medium", "summary": "one rank stalled outside NCCL",
            "claims": [{"statement": "the trigger line",
                        "citations": [{"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]}]}


def _results(req: list, name: str) -> list[ToolMessage]:
    return [m for m in req if isinstance(m, ToolMessage) and m.name == name]


def test_an_answer_in_round_1_with_no_tool_call_is_sent_back(opened):
    b, inv = opened
    m = ScriptedModel(script=[reply(tool_call("submit_answer", _answer(inv), 1)), looked(2),
                              reply(tool_call("submit_answer", _answer(inv), 3))])
    sec = ask(build_graph(m, Toolbox(b, inv)), None, "p1")
    back = _results(m.requests[1], "submit_answer")[-1]
    assert back.status == "error" and back.content.startswith("Not accepted yet")
    assert "where every rank stops (call where_ranks_stop)" in back.content
    assert "the collective state of every rank (call nccl_state" in back.content
    assert any(p.startswith("answer sent back: not yet seen where every rank stops") for p in sec["problems"])
    assert sec["tool_calls"] == ["where_ranks_stop", "nccl_state"] and sec["rounds"] == 3
    assert sec["outcome"] == "answered", sec


def test_an_answer_in_the_same_reply_as_the_calls_is_sent_back_once_they_ran(opened):
    """The model called the tools and answered in one reply: the tools run, the answer goes back (it was written
    before their results existed), and the same answer next round is taken."""
    b, inv = opened
    m = ScriptedModel(script=[
        reply(tool_call("where_ranks_stop", {}, 1), tool_call("nccl_state", {}, 2),
              tool_call("submit_answer", _answer(inv), 3)),
        reply(tool_call("submit_answer", _answer(inv), 4))])
    sec = ask(build_graph(m, Toolbox(b, inv)), None, "p2")
    sent = m.requests[1]
    assert [r.status for r in _results(sent, "where_ranks_stop") + _results(sent, "nccl_state")] == ["success"] * 2
    back = _results(sent, "submit_answer")[-1]
    assert back.status == "error" and "in the same reply as the calls" in back.content
    assert sec["outcome"] == "answered" and sec["rounds"] == 2


def test_a_reply_with_neither_call_nor_answer_is_asked_for_what_is_missing(opened):
    b, inv = opened
    m = ScriptedModel(script=[reply(text="It looks like a hang."), looked(2),
                              reply(tool_call("submit_answer", _answer(inv), 3))])
    sec = ask(build_graph(m, Toolbox(b, inv)), None, "p6")
    nudge = m.requests[1][-1].content
    assert nudge.startswith("Before you answer, look at where every rank stops (call where_ranks_stop)"), nudge
    assert nudge.endswith("call submit_answer with your answer (cited lines only).")
    assert sec["outcome"] == "answered" and sec["rounds"] == 3


def test_a_model_that_keeps_answering_without_looking_ends_with_no_answer(opened):
    b, inv = opened
    m = ScriptedModel(script=[reply(tool_call("submit_answer", _answer(inv), i)) for i in range(1, 6)])
    sec = ask(build_graph(m, Toolbox(b, inv), limits=Limits(max_early_answers=2)), None, "p3")
    assert len(m.requests) == 3, "two answers sent back, the third ends it"
    assert "last answer sent back" in _results(m.requests[2], "submit_answer")[-1].content
    assert sec["outcome"] == "no_answer" and not sec["verdict"]
    assert "answered 3 times without having seen where every rank stops" in sec["problems"][-1]


def test_a_repeated_call_is_nudged_then_its_tool_withdrawn(opened):
    b, inv = opened
    g = {"pattern": "Watchdog caught collective operation timeout"}
    m = Recording(script=[looked(1)] + [reply(tool_call("grep", dict(g), i)) for i in (2, 3, 4)]
                  + [reply(tool_call("submit_answer", _answer(inv), 5))], offers=[])
    sec = ask(build_graph(m, Toolbox(b, inv)), None, "p4")
    first, second, third = (_results(m.requests[i], "grep")[-1] for i in (2, 3, 4))
    assert "Note" not in first.content and first.status == "success"
    assert second.content.startswith("Note: you already called grep with these arguments") and '"matches"' in second.content
    assert third.status == "error" and "grep is withdrawn for the rest of this question" in third.content
    assert "grep" in m.offers[3] and "grep" not in m.offers[4], "withdrawn from what the model is offered"
    assert sec["tool_calls"] == ["where_ranks_stop", "nccl_state", "grep", "grep"]
    assert "grep withdrawn: the same call was repeated" in sec["problems"]
    assert sec["outcome"] == "answered"


def test_two_calls_taking_turns_are_nudged_then_both_withdrawn(opened):
    b, inv = opened
    t = inv.diagnosis.chain[0].evidence[0]
    a = ("read_lines", {"file": t.file, "line": t.line, "before": 2, "after": 2})
    g = ("grep", {"pattern": "NCCL WARN"})
    turns = [a, g, a, g, a, g]
    m = Recording(script=[looked(1)] + [reply(tool_call(n, dict(x), 10 + i)) for i, (n, x) in enumerate(turns)]
                  + [reply(tool_call("submit_answer", _answer(inv), 30))], offers=[])
    sec = ask(build_graph(m, Toolbox(b, inv)), None, "p5")
    last = [m.requests[i][-1] for i in range(2, 8)]  # the result of each of the six calls
    assert [x.status for x in last[:2]] == ["success", "success"]
    assert "alternating between this call and grep" in last[2].content and last[2].status == "success"
    assert "alternating between this call and read_lines" in last[3].content
    assert "read_lines is withdrawn" in last[4].content and "grep is withdrawn" in last[5].content
    assert not {"read_lines", "grep"} & set(m.offers[-1]) and "submit_answer" in m.offers[-1]
    assert sec["outcome"] == "answered"


def test_what_must_be_seen_follows_the_bundle(opened, tmp_path):
    """Collective state on a hang with NCCL lines; where ranks stop alone on a crash without them; any tool result
    on a paste that names no rank; a tool the toolbox lacks is never asked for."""
    b, inv = opened
    reqs = P.requirements(Toolbox(b, inv))
    assert [(r.what, r.tools) for r in reqs] == [("where every rank stops", ("where_ranks_stop",)),
                                                 ("the collective state of every rank", ("nccl_state",))]
    crash = tmp_path / "crash"
    crash.mkdir()
    (crash / "rank_0.log").write_text("step 10 loss 2.31\nTraceback (most recent call last):\n"
                                      '  File "train.py", line 88, in <module>\n'
                                      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    (crash / "rank_1.log").write_text("step 10 loss 2.29\nstep 11 loss 2.28\n")
    with open_bundle(crash) as cb:
        got = P.requirements(Toolbox(cb, run(cb)))
    assert [r.tools for r in got] == [("where_ranks_stop",)]
    paste = tmp_path / "paste"
    paste.mkdir()
    (paste / "paste.txt").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    with open_bundle(paste) as pb:
        pinv = run(pb)
        (only,) = P.requirements(Toolbox(pb, pinv))
        assert only.what == "anything beyond the first message" and "overview" in only.tools
    from trainlog_debugger.agent.graph.tools import overview, read_lines
    narrow = P.requirements(Toolbox(b, inv, tools=[overview, read_lines]))
    assert [r.tools for r in narrow] == [("overview", "read_lines")]


def test_judging_a_call():
    calls = [P.signature("grep", {"pattern": "x", "ignore_case": False})]
    same = P.signature("grep", {"ignore_case": False, "pattern": "x"})
    assert P.judge(P.signature("grep", {"pattern": "y"}), "grep", calls, {}, 1, set())[0] == "run"
    assert P.judge(same, "grep", calls, {}, 1, set())[0] == "nudge"
    assert P.judge(same, "grep", calls, {"grep": 1}, 1, set())[0] == "withdraw"
    assert P.judge(same, "grep", calls, {"grep": 1}, 1, {"grep"})[0] == "nudge", "a tool still required stays"


@pytest.mark.slow
def test_through_the_cli_an_answer_with_no_tool_call_is_sent_back(opened, tmp_path):
    """`debugger ask --json` with a key, against the stand-in: the model answers in round 1; the stand-in sees
    that answer come back as an error tool_result naming the tools, then the model looks and answers."""
    b, inv = opened

    def respond(body, n):
        if n == 1:
            return message(tool_use("where_ranks_stop", {}, 2), tool_use("nccl_state", {}, 3))
        return message(tool_use("submit_answer", _answer(inv), 10 + n))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_"))}
    with StandIn(respond) as s:
        env.update(ANTHROPIC_API_KEY="sk-ant-test-0000", ANTHROPIC_BASE_URL=s.url, DEBUGGER_HOME=str(tmp_path))
        r = subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", str(CASE), "--json"],
                           capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL)
        reqs = s.requests()
    assert r.returncode == 0, r.stderr
    (back,) = last_tool_results(reqs[1])
    assert back["tool_use_id"] == "toolu_standin_10" and back["is_error"] is True
    text = back["content"] if isinstance(back["content"], str) else json.dumps(back["content"])
    assert "Not accepted yet" in text and "where_ranks_stop" in text and "nccl_state" in text
    agent = json.loads(r.stdout)["agent"]
    assert agent["tool_calls"] == ["where_ranks_stop", "nccl_state"] and agent["outcome"] == "answered", agent
