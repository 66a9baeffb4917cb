"""The graph's bounds (agent/graph/state.py Limits, agent/graph/compact.py): the cap on tool calls per question, the
next request counted before it is sent, the history compacted when it nears the budget (earlier questions folded
into their verified claims, older tool results stubbed, the last exchange kept), and prompt caching on the system
prompt and the tools. The five-follow-ups chat runs twice: with a scripted model whose token counts are those of
what it is sent, and through the real ChatAnthropic against the Messages-API stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_model import ScriptedModel, looked, reply, tool_call
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver
from standin import StandIn, message, tool_use

from trainlog_debugger.agent.graph import compact as C
from trainlog_debugger.agent.graph.graph import build_graph
from trainlog_debugger.agent.graph.session import AgentOptions, Session, ask
from trainlog_debugger.agent.graph.state import Limits
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.agent.llm.tokens import count
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
ORDINALS = ("one", "two", "three", "four", "five", "six")  # no digits: the verifier checks numbers a claim states
FOLLOW_UPS = ("why did that rank stop?", "which collective?", "what did the others do?", "when did it start?",
              "what should I do now?")


class Metered(ScriptedModel):
    """The scripted model, reporting as input tokens the size of what it was sent (the tools offered included),
    as the API does: the budget is then spent as a real conversation spends it."""

    sizes: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        res = super()._generate(messages, stop, run_manager, **kw)
        n = sum(C.message_tokens(m) for m in messages) + count(json.dumps(self.bound_tools))
        self.sizes.append(n)
        res.generations[0].message.usage_metadata = {"input_tokens": n, "output_tokens": 150,
                                                     "total_tokens": n + 150}
        return res


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _answer(inv, summary="one rank stalled outside NCCL") -> dict:
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    return {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "culprit_nodes": d.culprit_nodes, "confidence": "medium", "summary": summary,
            "claims": [{"statement": f"the trigger line ({summary})",
                        "citations": [{"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]}]}


def _big_calls(inv) -> list[tuple[str, dict]]:
    """Four different calls of ~2,500 tokens each on this bundle (60-line windows, a broad grep)."""
    files = sorted({e.file for f in inv.diagnosis.chain for e in f.evidence})
    return [("read_lines", {"file": files[-1], "line": 30, "before": 30, "after": 29}),
            ("grep", {"pattern": "NCCL"}),
            ("read_lines", {"file": files[-1], "line": 70, "before": 30, "after": 29}),
            ("read_lines", {"file": files[0], "line": 20, "before": 30, "after": 29})]


def _conversation(inv) -> list[list[tuple[str, dict]]]:
    """Each reply as (tool, args) calls: the first question looks where ranks stop and at the collective state,
    then every question reads four big results and answers."""
    out: list[list[tuple[str, dict]]] = []
    for q in range(1 + len(FOLLOW_UPS)):
        if q == 0:
            out.append([("where_ranks_stop", {}), ("nccl_state", {})])
        out += [[c] for c in _big_calls(inv)]
        out.append([("submit_answer", _answer(inv, f"answer {ORDINALS[q]}"))])
    return out


def test_the_tool_calls_of_a_question_are_capped(opened):
    b, inv = opened
    t = inv.diagnosis.chain[0].evidence[0]
    many = [tool_call("read_lines", {"file": t.file, "line": n, "before": 1, "after": 1}, 10 + n) for n in range(1, 7)]
    m = ScriptedModel(script=[looked(1), reply(*many), reply(tool_call("submit_answer", _answer(inv), 30))])
    sec = ask(build_graph(m, Toolbox(b, inv), limits=Limits(max_tool_calls=5)), None, "cap")
    results = [x for x in m.requests[2] if isinstance(x, ToolMessage) and x.name == "read_lines"]
    assert [r.status for r in results] == ["success"] * 3 + ["error"] * 3
    assert "used its 5 tool calls" in results[-1].content
    assert [t["name"] for t in m.bound_tools] == ["submit_answer"], "past the cap only the answer is offered"
    assert len(sec["tool_calls"]) == 5 and sec["outcome"] == "answered"


def test_a_request_over_the_budget_is_not_sent(opened):
    b, inv = opened
    m = ScriptedModel(script=[looked(1)])
    g = build_graph(m, Toolbox(b, inv), MemorySaver(), limits=Limits(budget_tokens=1_500))
    sec = ask(g, None, "pre")
    assert m.requests == [], "the first request alone passes the budget: it was never sent"
    assert sec["outcome"] == "budget" and sec["rounds"] == 0
    assert "token budget 1,500 reached (0 spent, next request" in sec["problems"][-1]
    assert g.get_state({"configurable": {"thread_id": "pre"}}).values["request_tokens"] > 1_500


def test_older_tool_results_are_stubbed_and_may_be_asked_for_again(opened):
    """Inside one question: past compact_at the oldest results become stubs (pairing kept), the last exchange
    stays whole, and a call whose result was stubbed runs again without counting as a loop."""
    b, inv = opened
    calls = _big_calls(inv)
    script = [looked(1)] + [reply(tool_call(n, dict(a), 10 + i)) for i, (n, a) in enumerate(calls)]
    script += [reply(tool_call(calls[0][0], dict(calls[0][1]), 20)), reply(tool_call("submit_answer", _answer(inv), 21))]
    m = Metered(script=script, sizes=[])
    g = build_graph(m, Toolbox(b, inv), MemorySaver(), limits=Limits(compact_at=9_000, compact_to=6_000))
    sec = ask(g, None, "stub")
    assert sec["outcome"] == "answered"
    late = m.requests[-2]  # the request that answered the repeated call
    stubs = [x for x in late if isinstance(x, ToolMessage) and x.content.startswith(C.STUB_HEAD)]
    assert stubs and all(x.tool_call_id for x in stubs)
    ids = {tc["id"] for x in late if isinstance(x, AIMessage) for tc in x.tool_calls}
    assert all(x.tool_call_id in ids for x in late if isinstance(x, ToolMessage)), "every tool_result has its tool_use"
    assert not late[-1].content.startswith(C.STUB_HEAD) and '"rank_' not in late[-1].content[:0]
    assert not late[-1].content.startswith("Note:"), "asked again after compaction: not a loop"
    state = g.get_state({"configurable": {"thread_id": "stub"}}).values
    assert any("older tool result(s) of this question stubbed" in c for c in state["compacted"])
    assert max(m.sizes) < 9_000 + 3_500, m.sizes


@pytest.mark.slow
def test_five_follow_ups_complete_within_the_budget(opened):
    """One chat, the first question and five follow-ups, each reading ~10,000 tokens of tool results: every
    request is counted before it is sent and the history compacted, so the sixth question is answered like the
    first (with the history kept whole, its rounds would cost ~60,000 tokens each and stop on the budget)."""
    b, inv = opened
    m = Metered(script=[reply(*[tool_call(n, dict(a), 100 * r + k) for k, (n, a) in enumerate(calls)])
                        for r, calls in enumerate(_conversation(inv))], sizes=[])
    s = Session(b, inv, [str(CASE)], AgentOptions(), model=m, checkpointer=MemorySaver())
    secs = [s.chat(q) for q in (None, *FOLLOW_UPS)]
    assert [x.outcome for x in secs] == ["answered"] * 6, [(x.outcome, x.problems) for x in secs]
    assert all(x.tokens_in < Limits().budget_tokens for x in secs)
    assert max(m.sizes) < Limits().compact_at + 3_500, m.sizes
    state = s.graph.get_state({"configurable": {"thread_id": s.thread}}).values
    assert any("earlier question(s) folded into their verified claims" in c for c in state["compacted"])
    digest = next(x.content for x in m.requests[-1] if isinstance(x, HumanMessage) and
                  x.content.startswith(C.DIGEST_HEAD))
    t = inv.diagnosis.chain[0].evidence[0]
    assert "Deterministic analysis of the bundle" in digest
    assert "the trigger line (answer one)" in digest and f'"{t.file}:{t.line}"' in digest, "verified claims kept"
    assert m.requests[-1][-1].content.startswith("Accepted") is False  # the last exchange is the live one
    assert len(state["ledger"]) == 6


@pytest.mark.slow
def test_through_the_stand_in_five_follow_ups_complete_and_the_prompt_is_cached(opened):
    """The same chat through the real ChatAnthropic: usage is the size of each request body. Every body marks the
    system prompt and the tool list for caching, every tool_result still has its tool_use after compaction, and
    all six questions are answered."""
    b, inv = opened
    replies = _conversation(inv)

    def respond(body, n):
        blocks = [tool_use(name, args, 100 * n + k) for k, (name, args) in enumerate(replies[n])]
        return message(*blocks, usage=(count(json.dumps(body)), 150))
    from langchain_anthropic import ChatAnthropic
    with StandIn(respond) as st:
        model = ChatAnthropic(model="claude-sonnet-5-5", api_key="sk-ant-test-0000", base_url=st.url, max_retries=0,
                              timeout=30, max_tokens=1024)
        s = Session(b, inv, [str(CASE)], AgentOptions(), model=model, checkpointer=MemorySaver())
        secs = [s.chat(q) for q in (None, *FOLLOW_UPS)]
        bodies = st.requests()
    assert [x.outcome for x in secs] == ["answered"] * 6, [(x.outcome, x.notice, x.problems) for x in secs]
    assert len(bodies) == len(replies)
    for body in bodies:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert not any("cache_control" in t for t in body["tools"][:-1])
        msgs = body["messages"]
        for prev, cur in zip(msgs, msgs[1:]):
            results = [x["tool_use_id"] for x in cur["content"] if isinstance(cur["content"], list)
                       and x.get("type") == "tool_result"]
            uses = {x["id"] for x in prev["content"] if isinstance(prev["content"], list) and x.get("type") == "tool_use"}
            assert set(results) <= uses, "a tool_result without its tool_use would be a 400 from the API"
    assert max(count(json.dumps(x)) for x in bodies) < 60_000
