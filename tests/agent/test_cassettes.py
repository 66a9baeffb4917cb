"""The agent over HTTP, replayed from cassettes (`record_mode="none"`): the real ChatAnthropic and the real graph
against recorded exchanges in the Messages API's format. Hand-written cassettes say so in their names
(make_cassettes.py writes them). Matching is on method, path and the JSON body, so a change to the prompt, the
tools or what a tool returns fails here until the cassettes are re-made."""

from __future__ import annotations

import re

import pytest
from replay import CASSETTES, cassette
from scenarios import CASE, SCENARIOS, make_session

from trainlog_debugger.eval.run import CASSETTES as EVAL_CASSETTES
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run
from trainlog_debugger.tools.redact import Redactor


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _replay(opened, name):
    b, inv = opened
    sc = SCENARIOS[name]
    session = make_session(b, inv, None, sc)
    with cassette(name) as cas:
        secs = [session.chat(q) for q in sc.questions]
        assert cas.all_played, f"{name}: {len(cas.data) - cas.play_count} recorded request(s) were never sent"
    return inv, secs


@pytest.mark.slow
def test_tool_loop(opened):
    inv, (sec,) = _replay(opened, "tool_loop.handwritten")
    assert sec.outcome == "answered" and sec.tool_calls == ["where_ranks_stop", "nccl_state", "read_lines", "grep"]
    assert sec.claims[0].verified and sec.verdict["category"] == inv.diagnosis.category
    assert sec.tokens_in > 0 and sec.cost_usd > 0


@pytest.mark.slow
def test_a_fabricated_citation_and_an_invented_culprit_are_removed(opened):
    inv, (sec,) = _replay(opened, "fabricated_citation.handwritten")
    assert not sec.claims[0].verified and "quote is not in that line" in sec.claims[0].dropped_because
    assert 4242 not in sec.verdict["culprit_ranks"] and sec.verdict["confidence"] == "low"
    assert len([p for p in sec.problems if "quote is not in that line" in p]) >= 2  # sent back, then removed


def test_a_disagreement_without_support_is_reverted(opened):
    inv, (sec,) = _replay(opened, "disagreement.handwritten")
    assert sec.verdict["category"] == inv.diagnosis.category
    assert any("deterministic" in c for c in sec.changes)


def test_a_follow_up_is_answered_from_history(opened):
    inv, (first, second) = _replay(opened, "follow_up.handwritten")
    assert first.outcome == second.outcome == "answered"
    assert second.question == "why did that rank stop?" and second.verdict["summary"] == "it was stuck reading data"


def test_the_budget_stops_it(opened):
    inv, (sec,) = _replay(opened, "budget.handwritten")
    assert sec.outcome == "budget" and sec.rounds == 2 and not sec.verdict


def test_an_overloaded_api_is_one_line_and_the_offline_answer(opened):
    inv, (sec,) = _replay(opened, "overloaded.handwritten")
    assert sec.outcome == "api_error" and "overloaded" in sec.notice


SECRETISH = re.compile(r"sk-ant-[\w-]{6,}|x-api-key|authorization: bearer", re.I)


def test_no_cassette_holds_a_secret():
    """Every cassette and every request body in it: no key header, no key, nothing the redactor would remove."""
    files = sorted(CASSETTES.glob("*.yaml")) + sorted(EVAL_CASSETTES.glob("*.yaml"))
    assert files, "no cassettes"
    red = Redactor()
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert not SECRETISH.search(text), f"{f.name}: {SECRETISH.search(text)[0]}"
        red.redact(text)
    assert red.secrets_found == 0


def test_eval_llm_mode_replays_a_case_cassette(capsys):
    """`debugger eval --mode llm` on a bundled case: the agent runs, its HTTP replayed from
    eval/cassettes/cases__gen-slurm-8r-a.handwritten.yaml, and its verified verdict is scored."""
    import json

    from trainlog_debugger.agent.graph.evaluate import llm_diagnose
    from trainlog_debugger.eval.run import main
    assert main([CASE], mode="llm", json_=True, llm=llm_diagnose) == 0
    row = json.loads(capsys.readouterr().out)["cases"][0]
    assert row["error"] is None and row["agent_outcome"] == "answered"
    assert row["scores"]["category"] is True and row["tokens"] > 0 and row["cost_usd"] > 0
