"""The terminal chat of `debugger ask` (agent/cli/chat.py): Ctrl-C during a follow-up cancels that question and the
prompt comes back, and the next question runs on a history the Messages API accepts (the tool call the cancelled
run left open is answered before the new question). The graph is the real one, over the bundled 8-rank hang, with
a scripted model; KeyboardInterrupt is raised where Python raises it on Ctrl-C, in the middle of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_model import ScriptedModel, reply, tool_call
from langchain_core.messages import HumanMessage, ToolMessage

from trainlog_debugger.agent.cli import chat
from trainlog_debugger.agent.graph.session import AgentOptions, Session
from trainlog_debugger.agent.render.report import render_agent
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _answer(inv, summary: str) -> dict:
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    return {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "confidence": "medium", "summary": summary,
            "claims": [{"statement": "the trigger line", "citations": [{"file": t.file, "line": t.line,
                                                                        "quote": t.text.strip()[:40]}]}]}


def _session(b, inv, script) -> Session:
    from langgraph.checkpoint.memory import MemorySaver
    return Session(b, inv, [str(CASE)], AgentOptions(), model=ScriptedModel(script=script),
                   checkpointer=MemorySaver())


def test_ctrl_c_during_a_follow_up_cancels_it_and_the_prompt_comes_back(opened, monkeypatch, capsys):
    b, inv = opened
    done = reply(tool_call("submit_answer", _answer(inv, "after the cancel"), 5))
    s = _session(b, inv, [reply(tool_call("grep", {"pattern": "Watchdog caught"}, 2)),  # then Ctrl-C in the tool
                          # the next question: what the protocol asks to see first, then the answer
                          reply(tool_call("where_ranks_stop", {}, 3), tool_call("nccl_state", {}, 4)), done, done])
    real_call = s.box.call

    def ctrl_c_once(name, args):
        s.box.call = real_call
        raise KeyboardInterrupt
    s.box.call = ctrl_c_once
    typed = iter(["which ranks timed out?", "and rank 5?", "/quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    chat.chat_loop(s, render_agent)  # returns at /quit: the Ctrl-C did not end the chat
    got = capsys.readouterr()
    assert "question cancelled (Ctrl-C)" in got.err
    assert "question: and rank 5?" in got.out and "which ranks timed out?" not in got.out
    # the next request closes the cancelled run's tool call before the new question
    last = s.model.requests[-1]
    closed = [m for m in last if isinstance(m, ToolMessage) and m.tool_call_id == "toolu_002"]
    assert closed and "interrupted" in closed[0].content
    asked = [i for i, m in enumerate(last) if isinstance(m, HumanMessage) and "and rank 5?" in str(m.content)]
    assert asked and last.index(closed[0]) < asked[0]
    # the cancelled question's tokens count in /cost
    assert s.cost()[0] == 1000 * len(s.model.requests)  # every call: 1,000 tokens in, the cancelled one too


def test_ctrl_c_during_the_first_answer_is_an_interrupted_section(opened):
    b, inv = opened

    class Slow(ScriptedModel):
        def _generate(self, messages, stop=None, run_manager=None, **kw):
            raise KeyboardInterrupt  # as the signal raises it, inside the model call

    session, sec, interrupted = chat.first_answer(
        lambda: Session(b, inv, [str(CASE)], AgentOptions(history=False), model=Slow(script=[])), None, None)
    assert interrupted and session is not None
    assert sec.outcome == "interrupted" and "Ctrl-C" in sec.notice and sec.model == session.model_id
