"""The agent's HTTP scenarios, shared by the cassette tests (replay) and make_cassettes.py (which writes the
hand-written cassettes by running the real graph and the real ChatAnthropic against the stand-in's scripted
replies). Each scenario: the scripted replies (`respond(body, n)`, Messages API format) and `drive(session)`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from standin import error, message, text, tool_use

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@dataclass
class Scenario:
    name: str
    respond: Callable  # (facts Diagnosis) → respond(body, n)
    questions: tuple = (None,)
    budget: int = 200_000


def _answer(d, citations, **over) -> dict:
    a = {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
         "culprit_nodes": d.culprit_nodes, "confidence": "high", "summary": "one rank stalled outside NCCL",
         "narrative": "The culprit rank never entered the collective; the others timed out waiting for it.",
         "claims": [{"statement": "the culprit's trigger line", "citations": citations}]}
    a.update(over)
    return a


def _trigger(d):
    t = d.chain[0].evidence[0]
    return t, [{"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]


def looks_first(scenario):
    """The scenario's replies after a first one that calls what the protocol asks for before an answer is accepted
    (where every rank stops, the collective state: agent/graph/protocol.py)."""
    def of(d):
        inner = scenario(d)

        def respond(body, n):
            if n == 0:
                return message(tool_use("where_ranks_stop", {}, 90), tool_use("nccl_state", {}, 91))
            return inner(body, n - 1)
        return respond
    return of


def tool_loop(d):
    t, cite = _trigger(d)

    def respond(body, n):
        if n == 0:
            return message(text("Checking the trigger's neighbourhood."),
                           tool_use("read_lines", {"file": t.file, "line": t.line, "before": 2, "after": 2}, 1))
        if n == 1:
            return message(tool_use("grep", {"pattern": "Watchdog caught collective operation timeout"}, 2))
        return message(tool_use("submit_answer", _answer(d, cite), 3))
    return respond


def fabricated_citation(d):
    t, cite = _trigger(d)
    fake = [{"file": t.file, "line": t.line, "quote": "NET/IB : Got completion from peer with error 12"}]

    def respond(body, n):
        return message(tool_use("submit_answer", _answer(d, fake, culprit_ranks=d.culprit_ranks + [4242],
                                                         disagreement="rank 4242 also stalled"), 10 + n))
    return respond


def disagreement(d):
    other = "network" if d.category != "network" else "oom"

    def respond(body, n):
        return message(tool_use("submit_answer", _answer(d, [], category=other, confidence="medium",
                                                         disagreement="looks like a fabric problem"), 20 + n))
    return respond


def follow_up(d):
    t, cite = _trigger(d)

    def respond(body, n):
        if n == 0:
            return message(tool_use("submit_answer", _answer(d, cite), 30))
        return message(text("It never entered the collective."),
                       tool_use("submit_answer", _answer(d, cite, summary="it was stuck reading data"), 31))
    return respond


def budget(d):
    def respond(body, n):
        return message(tool_use("overview", {}, 40 + n), usage=(120_000, 200))
    return respond


def overloaded(d):
    return lambda body, n: error(529, "overloaded_error", "Overloaded")


SCENARIOS = {s.name: s for s in (
    Scenario("tool_loop.handwritten", looks_first(tool_loop)),
    Scenario("fabricated_citation.handwritten", looks_first(fabricated_citation)),
    Scenario("disagreement.handwritten", looks_first(disagreement)),
    Scenario("follow_up.handwritten", looks_first(follow_up), questions=(None, "why did that rank stop?")),
    Scenario("budget.handwritten", budget, budget=200_000),
    Scenario("overloaded.handwritten", overloaded),
)}


def make_session(bundle, inv, base_url: str | None, scenario: Scenario, *, key: str = "sk-ant-test-key"):
    """The Session the CLI would make, with ChatAnthropic pointed at `base_url` (None: the real API's default) and
    no retries (a replayed 529 must not be retried into a cassette miss). History in memory."""
    from langchain_anthropic import ChatAnthropic
    from langgraph.checkpoint.memory import MemorySaver

    from trainlog_debugger.agent.graph.session import AgentOptions, Session
    from trainlog_debugger.agent.llm.model import DEFAULT_MODEL, MAX_OUTPUT_TOKENS
    kw = {"base_url": base_url} if base_url else {}
    model = ChatAnthropic(model=DEFAULT_MODEL, api_key=key, max_tokens=MAX_OUTPUT_TOKENS, max_retries=0,
                          timeout=30, **kw)
    return Session(bundle, inv, [str(CASE)], AgentOptions(budget_tokens=scenario.budget), model=model,
                   checkpointer=MemorySaver())
