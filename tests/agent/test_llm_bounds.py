"""agent/llm/bounds.py through the real SDKs against local stand-ins (the Messages API and an OpenAI-compatible
server): `retry-after` honoured up to its cap, never past the question's deadline, each request's timeout cut to the
time left, and the tokens of every call that answered counted even when a later one fails and no history is kept
(the one-shot `ask --json`, where they were reported as 0)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from standin import StandIn, error, message, text, tool_use
from standin_openai import OpenAIStandIn, completion
from standin_openai import error as oa_error

from trainlog_debugger.agent.llm import bounds as B
from trainlog_debugger.agent.llm import model as M

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for e in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY",
              B.DEADLINE_ENV, B.RETRY_AFTER_ENV):
        monkeypatch.delenv(e, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")


def _vendor(kind: str, answers: list, monkeypatch):
    """(stand-in, model spec) for `kind`: each request gets the next answer (an error tuple or a reply)."""
    def respond(body, n):
        return answers[min(n, len(answers) - 1)]
    if kind == "anthropic":
        s = StandIn(respond)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        return s, "claude-sonnet-5-5"
    s = OpenAIStandIn(respond)
    monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
    return s, "openai:qwen2.5-72b"


def _too_many(kind: str, retry_after: str):
    h = {"retry-after": retry_after}
    if kind == "anthropic":
        return (*error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"), h)
    return oa_error(429, "rate_limit_exceeded", "Rate limit reached for requests", h)


def _ok(kind: str):
    return message(text("fine")) if kind == "anthropic" else completion("fine")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_retry_after_over_the_cap_ends_at_once(kind, monkeypatch):
    s, spec = _vendor(kind, [_too_many(kind, "120")], monkeypatch)
    with s:
        model = M.make_model(spec)
        B.begin(model)
        t0 = time.monotonic()
        with pytest.raises(Exception) as got:
            model.invoke([HumanMessage("hello")])
        took = time.monotonic() - t0
    assert took < 5, f"waited {took:.1f} s: the 120 s retry-after was waited out"
    assert len(s.bodies) == 1, "the SDK retried on its own"
    line = M.describe_api_error(got.value)
    assert "rate-limiting" in line and "retry after 120 s" in line and "30 s cap" in line, line
    assert M.error_outcome(got.value) == "api_error"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_retry_after_under_the_cap_is_honoured(kind, monkeypatch):
    s, spec = _vendor(kind, [_too_many(kind, "1"), _ok(kind)], monkeypatch)
    with s:
        model = M.make_model(spec)
        run = B.begin(model)
        t0 = time.monotonic()
        ai = model.invoke([HumanMessage("hello")])
        took = time.monotonic() - t0
    assert "fine" in str(ai.content) and len(s.bodies) == 2
    assert 1.0 <= took < 5 and run.waited == 1.0


def test_the_cap_and_the_deadline_come_from_the_environment(monkeypatch):
    """DEBUGGER_RETRY_AFTER_MAX=0.5 refuses a 1 s wait; DEBUGGER_DEADLINE=2 refuses a 3 s one under the cap."""
    monkeypatch.setenv(B.RETRY_AFTER_ENV, "0.5")
    s, spec = _vendor("anthropic", [_too_many("anthropic", "1")], monkeypatch)
    with s:
        model = M.make_model(spec)
        B.begin(model)
        with pytest.raises(B.RetryAfterTooLong):
            model.invoke([HumanMessage("hello")])
    monkeypatch.delenv(B.RETRY_AFTER_ENV)
    monkeypatch.setenv(B.DEADLINE_ENV, "2")
    s, spec = _vendor("anthropic", [_too_many("anthropic", "3")], monkeypatch)
    with s:
        model = M.make_model(spec)
        B.begin(model)
        t0 = time.monotonic()
        with pytest.raises(B.DeadlineExceeded) as got:
            model.invoke([HumanMessage("hello")])
    assert time.monotonic() - t0 < 1.5, "it slept into the deadline instead of ending"
    assert M.error_outcome(got.value) == "deadline"
    assert "deadline of 2 s" in M.describe_api_error(got.value) and "retry after 3 s" in M.describe_api_error(got.value)


@pytest.mark.slow
def test_no_call_starts_past_the_deadline(monkeypatch):
    s, spec = _vendor("openai", [_ok("openai")], monkeypatch)
    with s:
        model = M.make_model(spec)
        B.begin(model, deadline_s=0.05)
        time.sleep(0.1)
        with pytest.raises(B.DeadlineExceeded):
            model.invoke([HumanMessage("hello")])
    assert s.bodies == []


@pytest.mark.slow
def test_a_hung_endpoint_cannot_outlive_the_deadline(monkeypatch):
    """The stand-in takes 6 s to answer; with 2 s left, the request's own timeout is cut to what is left."""
    def slow(body, n):
        time.sleep(6)
        return completion("late")
    s = OpenAIStandIn(slow)
    monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
    with s:
        model = M.make_model("openai:qwen2.5-72b")
        B.begin(model, deadline_s=2)
        t0 = time.monotonic()
        with pytest.raises(Exception) as got:
            model.invoke([HumanMessage("hello")])
        took = time.monotonic() - t0
    assert took < 4.5, took
    assert M.error_outcome(got.value) == "deadline"


@pytest.mark.slow
def test_a_failure_without_retry_after_is_retried_twice_with_backoff(monkeypatch):
    s, spec = _vendor("anthropic", [error(529, "overloaded_error", "Overloaded")], monkeypatch)
    with s:
        model = M.make_model(spec)
        B.begin(model)
        with pytest.raises(Exception) as got:
            model.invoke([HumanMessage("hello")])
    assert len(s.bodies) == 3 and "overloaded" in M.describe_api_error(got.value)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_tokens_before_an_api_error_are_reported_without_history(kind, monkeypatch):
    """Round 1 answers with a tool call (usage counted), round 2 is refused (401): the one-shot session keeps no
    checkpointer, yet the section reports round 1's tokens and their cost."""
    from trainlog_debugger.agent.graph.session import AgentOptions, Session
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    if kind == "anthropic":
        first = message(tool_use("where_ranks_stop", {}, 1), usage=(1200, 150))
        refused = error(401, "authentication_error", "invalid x-api-key")
    else:
        from standin_openai import call
        first = completion(None, call("where_ranks_stop", {}, 1), usage=(1200, 150))
        refused = oa_error(401, "invalid_api_key", "Incorrect API key provided")
    s, spec = _vendor(kind, [first, refused], monkeypatch)
    with s, open_bundle(CASE) as b:
        sess = Session(b, run(b), [str(CASE)], AgentOptions(model=spec, history=False))
        assert sess.checkpointer is None
        sec = sess.chat(None)
    assert sec.outcome == "api_error" and "refused the key (401)" in sec.notice
    assert (sec.tokens_in, sec.tokens_out) == (1200, 150)
    assert sess.cost()[:2] == (1200, 150)
    assert (sec.cost_usd > 0) is (kind == "anthropic")  # a model of one's own is not priced
