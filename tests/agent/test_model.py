"""agent/llm/model.py: the `--model` spec (Claude by default, `openai:NAME` for a model of one's own), which
credentials each needs, how each is built, what it costs, and the one line each failure becomes."""

from __future__ import annotations

import pytest

from trainlog_debugger.agent.llm import bounds as B
from trainlog_debugger.agent.llm import model as M

ENVS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
        "OPENAI_API_BASE", "DEBUGGER_MODEL", "DEBUGGER_PRICE_IN", "DEBUGGER_PRICE_OUT")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for e in ENVS:
        monkeypatch.delenv(e, raising=False)


@pytest.mark.parametrize("spec,want", [
    ("claude-sonnet-5-5", ("anthropic", "claude-sonnet-5-5")),          # a bare id is Claude, as before
    ("anthropic:claude-opus-5", ("anthropic", "claude-opus-5")),
    ("openai:qwen2.5-72b", ("openai", "qwen2.5-72b")),                   # vLLM serves the HF repo's name
    ("openai:qwen2.5:72b", ("openai", "qwen2.5:72b")),                   # Ollama's tags hold a colon
    ("openai:meta-llama/Llama-3.3-70B-Instruct", ("openai", "meta-llama/Llama-3.3-70B-Instruct")),
    ("anthropic.claude-v2:1", ("anthropic", "anthropic.claude-v2:1")),  # a gateway's id with a dot: no provider
])
def test_a_spec_names_its_provider(spec, want):
    assert M.parse(spec) == want


@pytest.mark.parametrize("spec", ["opnai:qwen2.5-72b", "gemini:pro", "openai:", "openai:  "])
def test_a_typo_in_the_provider_is_refused_not_sent_to_claude(spec):
    with pytest.raises(ValueError, match="--model"):
        M.parse(spec)


def test_which_credentials_each_provider_needs(monkeypatch):
    assert M.missing_key(None) == "no ANTHROPIC_API_KEY"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert M.has_key(None) and M.has_key("claude-opus-5")
    # an OpenAI key alone is not enough: the endpoint is never defaulted to a public one
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert "OPENAI_BASE_URL" in M.missing_key("openai:qwen2.5-72b")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-head:8000/v1")
    assert M.has_key("openai:qwen2.5-72b")
    # DEBUGGER_MODEL is read when --model is not given
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("DEBUGGER_MODEL", "openai:qwen2.5-72b")
    assert M.has_key(None)


def test_each_model_is_built_bounded_and_leaves_retrying_to_us(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.internal:8080")
    c = M.make_model("claude-sonnet-5-5")
    assert isinstance(c, B.Bounded) and c.max_retries == 0 and c._llm_type == "anthropic-chat"
    assert c.anthropic_api_url == "http://gateway.internal:8080"  # the SDK's environment, unchanged
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-head:8000/v1")
    o = M.make_model("openai:qwen2.5:72b")
    assert isinstance(o, B.Bounded) and o.max_retries == 0 and o.model_name == "qwen2.5:72b"
    assert o.openai_api_base == "http://gpu-head:8000/v1" and o.openai_api_key.get_secret_value() == "not-needed"
    # `max_tokens`, not ChatOpenAI's `max_completion_tokens`: what vLLM, Ollama and llama.cpp all read
    assert o._get_request_payload("hi")["max_tokens"] == M.MAX_OUTPUT_TOKENS


def test_anthropic_only_fields_never_reach_an_openai_compatible_endpoint(monkeypatch):
    """A thread resumed after switching --model, or a system prompt marked for Claude's cache, carries
    `cache_control` blocks; a strict server answers 400 to an unknown field."""
    from langchain_core.messages import HumanMessage, SystemMessage
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-head:8000/v1")
    o = M.make_model("openai:qwen2.5-72b")
    cached = {"type": "text", "text": "You are the investigator.", "cache_control": {"type": "ephemeral"}}
    payload = o._get_request_payload([SystemMessage([cached]), HumanMessage("why?")])
    assert "cache_control" not in str(payload)
    assert "You are the investigator." in str(payload["messages"][0]["content"])


def test_a_model_of_ones_own_costs_nothing_per_token_unless_priced(monkeypatch):
    assert M.cost_usd("openai:qwen2.5-72b", 1_000_000, 1_000_000) == 0.0
    assert M.price("openai:qwen2.5-72b")[2] is True
    assert M.cost_usd("claude-sonnet-5-5", 1_000_000, 0) == 2.0
    monkeypatch.setenv("DEBUGGER_PRICE_IN", "0.5")
    monkeypatch.setenv("DEBUGGER_PRICE_OUT", "1.5")
    assert M.cost_usd("openai:qwen2.5-72b", 1_000_000, 1_000_000) == 2.0


def test_our_bounds_read_as_one_line_and_their_own_outcome():
    over = B.RetryAfterTooLong(120, 30)
    line = M.describe_api_error(over)
    assert "120 s" in line and "30 s cap" in line and "DEBUGGER_RETRY_AFTER_MAX" in line
    assert M.error_outcome(over) == "api_error"
    dead = B.DeadlineExceeded(600)
    assert "deadline of 600 s" in M.describe_api_error(dead) and M.error_outcome(dead) == "deadline"
    assert M.describe_api_error(ValueError("x")) is None and M.error_outcome(ValueError("x")) == "error"


class _Resp:
    def __init__(self, headers: dict, status: int = 429):
        self.headers, self.status_code = headers, status


class _Err(Exception):
    def __init__(self, headers: dict, status: int = 429):
        super().__init__("rate limited")
        self.response, self.status_code = _Resp(headers, status), status


@pytest.mark.parametrize("headers,want", [
    ({"retry-after": "120"}, 120.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the SDKs' own precedence
    ({}, None),
    ({"retry-after": "soon"}, None),
])
def test_retry_after_is_read_as_the_sdks_read_it(headers, want):
    assert B.retry_after(_Err(headers)) == want


def test_retry_after_as_an_http_date():
    import email.utils
    import time
    got = B.retry_after(_Err({"retry-after": email.utils.formatdate(time.time() + 90, usegmt=True)}))
    assert 85 <= got <= 91


@pytest.mark.parametrize("status,headers,want", [
    (429, {}, True), (529, {}, True), (500, {}, True), (408, {}, True),
    (400, {}, False), (401, {}, False), (404, {}, False),
    (429, {"x-should-retry": "false"}, False), (400, {"x-should-retry": "true"}, True),
])
def test_what_is_retried_is_what_the_sdks_retry(status, headers, want):
    assert B.retryable(_Err(headers, status)) is want
