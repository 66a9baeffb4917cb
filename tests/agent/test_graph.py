"""The graph's topology and node logic with a scripted model (no HTTP): the tool loop, the verifier catching a
fabricated citation and an unsupported culprit, a disagreement with the facts, a follow-up from history, the
budget stop. The bundle is a real bundled case (a hang with one straggler) run through the real pipeline. Every
scripted model opens with `looked()` (where every rank stops, the collective state): the protocol sends an answer
back until the model has seen them (tests/agent/test_protocol.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_model import ScriptedModel, looked, reply, tool_call
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import MemorySaver

from trainlog_debugger.agent.graph.graph import build_graph
from trainlog_debugger.agent.graph.session import ask
from trainlog_debugger.agent.graph.state import Limits
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.bundle.reread import read_lines
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _box(opened):
    b, inv = opened
    return Toolbox(b, inv)


def _trigger(inv):
    return inv.diagnosis.chain[0].evidence[0]


def _answer(inv, citations, **over):
    d = inv.diagnosis
    args = {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "confidence": "high", "summary": "rank stuck outside NCCL", "narrative": "one rank never entered",
            "claims": [{"statement": "the straggler's own line", "citations": citations}]}
    args.update(over)
    return args


def test_tool_loop_then_verified_answer(opened):
    box = _box(opened)
    inv = box.inv
    t = _trigger(inv)
    model = ScriptedModel(script=[
        looked(10),
        reply(tool_call("read_lines", {"file": t.file, "line": t.line, "before": 2, "after": 2}, 1)),
        reply(tool_call("submit_answer", _answer(inv, [{"file": t.file, "line": t.line, "quote": t.text[:40]}]), 2)),
    ])
    g = build_graph(model, box)
    sec = ask(g, None, "t1")
    assert sec["outcome"] == "answered", sec
    assert sec["tool_calls"] == ["where_ranks_stop", "nccl_state", "read_lines"]
    assert sec["claims"][0]["verified"] is True
    assert sec["verdict"]["category"] == inv.diagnosis.category
    # the tool result went back to the model as a tool_result for its call
    second = model.requests[2]
    assert isinstance(second[-1], ToolMessage) and second[-1].tool_call_id == "toolu_001"
    assert f'"{t.file}:{t.line}"' in second[-1].content
    assert {tl["name"] for tl in model.bound_tools} >= {"grep", "read_lines", "nccl_state", "submit_answer"}


def test_a_fabricated_citation_is_sent_back_then_removed(opened):
    box = _box(opened)
    inv = box.inv
    t = _trigger(inv)
    fake = {"file": t.file, "line": t.line, "quote": "NCCL WARN NET/IB : Got completion from peer with error 12"}
    first = read_lines(box.sources[t.file], [1])[1]
    unseen = {"file": t.file, "line": 1, "quote": first[:30]}
    model = ScriptedModel(script=[looked(9)] + [reply(tool_call("submit_answer", _answer(inv, [fake]), i))
                                                for i in range(1, 4)])
    sec = ask(build_graph(model, box, limits=Limits(max_verify_rounds=2)), None, "t2")
    assert sec["outcome"] == "answered"
    assert sec["claims"][0]["verified"] is False and "quote is not in that line" in sec["claims"][0]["dropped_because"]
    assert sec["verdict"]["confidence"] != "high"
    # the model was told exactly what was wrong, twice, before the claim was removed
    rejections = [m for m in model.requests[2] if isinstance(m, ToolMessage) and "Rejected" in m.content]
    assert rejections and "quote is not in that line" in rejections[0].content
    # a real line that no tool showed is not accepted either
    model = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", _answer(inv, [unseen]), 1))])
    sec = ask(build_graph(model, box, limits=Limits(max_verify_rounds=0)), None, "t3")
    assert "no tool showed you this line" in (sec["claims"][0]["dropped_because"] or "")


def test_an_unsupported_culprit_is_removed(opened):
    box = _box(opened)
    inv = box.inv
    t = _trigger(inv)
    cite = [{"file": t.file, "line": t.line, "quote": t.text[:30]}]
    bad = _answer(inv, cite, culprit_ranks=[7777], disagreement="rank 7777 looked odd")
    model = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", bad, 1))])
    sec = ask(build_graph(model, box, limits=Limits(max_verify_rounds=0)), None, "t4")
    assert 7777 not in sec["verdict"]["culprit_ranks"]
    assert any("7777" in c for c in sec["changes"])


def test_a_disagreement_without_verified_support_is_reverted(opened):
    box = _box(opened)
    inv = box.inv
    other = "oom" if inv.diagnosis.category != "oom" else "network"
    bad = _answer(inv, [], category=other)
    model = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", bad, 1))])
    sec = ask(build_graph(model, box, limits=Limits(max_verify_rounds=0)), None, "t5")
    assert sec["verdict"]["category"] == inv.diagnosis.category
    assert any("deterministic" in c for c in sec["changes"])


def test_a_follow_up_is_answered_from_history(opened):
    box = _box(opened)
    inv = box.inv
    t = _trigger(inv)
    cite = [{"file": t.file, "line": t.line, "quote": t.text[:30]}]
    model = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", _answer(inv, cite), 1)),
                                  reply(tool_call("submit_answer", _answer(inv, cite, summary="same rank"), 2))])
    g = build_graph(model, box, MemorySaver())
    ask(g, None, "chat")
    sec = ask(g, "why did that rank stop?", "chat")
    assert sec["outcome"] == "answered" and sec["question"] == "why did that rank stop?"
    assert sec["rounds"] == 1, "what the protocol asked for was seen in the first question: not asked again"
    second = model.requests[2]
    texts = [m.content for m in second if isinstance(m.content, str)]
    assert any("Deterministic analysis" in x for x in texts), "the first turn is in the history"
    assert texts[-1] == "why did that rank stop?"


def test_the_budget_stops_the_investigation(opened):
    box = _box(opened)
    model = ScriptedModel(script=[reply(tool_call("overview", {}, i), tokens=(60_000, 500)) for i in range(1, 6)])
    sec = ask(build_graph(model, box, limits=Limits(budget_tokens=100_000)), None, "t6")
    assert sec["outcome"] == "budget" and sec["rounds"] == 2
    assert any("token budget" in p for p in sec["problems"])


def test_all_ranks_is_checked_against_coverage(opened):
    """'every rank' is a claim about coverage: with ranks missing from the bundle it is a problem."""
    from trainlog_debugger.agent.graph import verify as V
    box = _box(opened)
    facts = box.inv.diagnosis.model_copy(update={"coverage": box.inv.diagnosis.coverage.model_copy(
        update={"missing_ranks": [6, 7]})})
    ans = V.Answer(status="hung", category=facts.category, culprit_ranks=facts.culprit_ranks, confidence="medium",
                   summary="every rank timed out in the same collective", claims=[])
    problems = V.check(ans, {}, facts, box.sources).problems
    assert any("have no log" in p and "6-7" in p for p in problems), problems
    full = box.inv.diagnosis
    assert not [p for p in V.check(ans, {}, full, box.sources).problems if "no log" in p]
