"""`debugger ask --model openai:NAME` end to end through the real CLI and graph, against a local stand-in for an
OpenAI-compatible server (vLLM, Ollama, llama.cpp) reached through OPENAI_BASE_URL: the same tools are offered as
to Claude, tool calls run and their results go back as `role: tool` messages, the answer is verified, planted
secrets never reach the endpoint, and no Anthropic key is needed. Then the bounds through the CLI, for both vendors:
a 429 with `retry-after: 120` mid-run ends in seconds with one line, the deterministic report, and the tokens the
first call spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin import StandIn, plant_secrets, message, tool_use
from standin import error as an_error
from standin_openai import OpenAIStandIn, call, completion, tool_messages
from standin_openai import error as oa_error

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
SECRET = "hf_QpLm0123456789AbCdEfGhIjKlMnOpQrSt"
PASSWORD = "s3cr3tPassw0rd"
MODEL = "openai:qwen2.5-72b"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The bundled 8-rank hang with a launch environment dump planted just before the trigger line."""
    d = plant_secrets(CASE, tmp_path_factory.mktemp("b") / "bundle", SECRET, PASSWORD)
    with open_bundle(d) as b:
        inv = run(b)
        from trainlog_debugger.agent.graph.toolbox import Toolbox
        schemas = {s["name"]: s["input_schema"] for s in Toolbox(b, inv).schemas()}
    return d, inv, schemas


def _cli(args, home: Path, **env_over):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_", "OPENAI_"))}
    env["DEBUGGER_HOME"] = str(home)
    env.update({k: v for k, v in env_over.items() if v is not None})
    return subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", *args],
                          capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL)


def _answer(d, t) -> dict:
    return {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "culprit_nodes": d.culprit_nodes, "confidence": "high", "summary": "one rank stalled outside NCCL",
            "claims": [{"statement": "the trigger line",
                        "citations": [{"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]}]}


@pytest.mark.slow
def test_an_on_prem_model_runs_the_same_investigation(bundle, tmp_path):
    d, inv, schemas = bundle
    diag = inv.diagnosis
    t = diag.chain[0].evidence[0]

    def respond(body, n):
        if n == 0:  # three calls in one turn, as vLLM's hermes/llama3 tool parsers return them
            return completion("Checking every rank first.", call("where_ranks_stop", {}, 1), call("nccl_state", {}, 2),
                              call("read_lines", {"file": t.file, "line": t.line, "before": 3, "after": 3}, 3))
        return completion(None, call("submit_answer", _answer(diag, t), 10 + n))
    with OpenAIStandIn(respond) as s:
        r = _cli([str(d), "--json", "--model", MODEL], tmp_path, OPENAI_BASE_URL=s.base_url)
        reqs, bodies, headers = s.requests(), list(s.bodies), list(s.headers)
    assert r.returncode == 0, r.stderr
    agent = json.loads(r.stdout)["agent"]
    assert agent["model"] == MODEL
    # the tools Claude is offered, in the Chat Completions shape: same names, same parameter schemas
    offered = {f["function"]["name"]: f["function"]["parameters"] for f in reqs[0]["tools"]}
    assert set(offered) == set(schemas) | {"submit_answer"}
    assert all(offered[n] == schemas[n] for n in schemas)
    assert "cache_control" not in json.dumps(reqs[0]), "an Anthropic-only field reached the endpoint"
    # the system prompt and the deterministic evidence, as the first two messages
    from trainlog_debugger.prompts import load
    system = reqs[0]["messages"][0]
    said = system["content"] if isinstance(system["content"], str) else "".join(x["text"] for x in system["content"])
    assert system["role"] == "system" and said.startswith(load("investigator")[:500])
    # each call ran and its result went back under its id
    back = {m["tool_call_id"]: m for m in tool_messages(reqs[1])}
    assert set(back) == {"call_standin_01", "call_standin_02", "call_standin_03"}
    assert agent["tool_calls"][:3] == ["where_ranks_stop", "nccl_state", "read_lines"]
    # the verifier ran on the answer; the deterministic verdict stands beside it
    assert agent["outcome"] == "answered", agent
    assert [c["verified"] for c in agent["claims"]] == [True]
    # redaction: the planted secrets never left the machine, the dump was read redacted
    for raw in bodies:
        assert SECRET.encode() not in raw and PASSWORD.encode() not in raw
    assert any(b"HF_TOKEN=[REDACTED]" in raw for raw in bodies)
    # no key was set: a placeholder, never another vendor's key
    assert headers[0]["authorization"] == "Bearer not-needed"
    # tokens from the endpoint's `usage`, and no price for a model of one's own
    assert agent["tokens_in"] == 900 * len(reqs) and agent["tokens_out"] == 120 * len(reqs)
    assert agent["cost_usd"] == 0.0


@pytest.mark.slow
def test_without_an_endpoint_nothing_is_sent_anywhere(bundle, tmp_path):
    """OPENAI_API_KEY alone is not enough: the endpoint is never defaulted to a vendor's."""
    d, inv, _ = bundle
    r = _cli([str(d), "--json", "--model", MODEL], tmp_path, OPENAI_API_KEY="sk-test-0000")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["agent"]["outcome"] == "offline" and "no OPENAI_BASE_URL" in out["agent"]["notice"]
    assert out["category"] == inv.diagnosis.category


def test_a_typo_in_the_provider_is_bad_usage(tmp_path):
    r = _cli([str(CASE), "--json", "--model", "opnai:qwen2.5-72b"], tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --model opnai:qwen2.5-72b: unknown provider") and r.stderr.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_retry_after_120_mid_run_ends_in_seconds_with_the_tokens_spent(bundle, tmp_path, kind):
    """The issue's case: `retry-after: 120` was waited out in full (twice, by the SDK), then reported 0 tokens.
    Round 1 answers with a tool call; round 2 is a 429 asking for 120 s."""
    d, inv, _ = bundle
    if kind == "anthropic":
        first = message(tool_use("where_ranks_stop", {}, 1), usage=(1200, 150))
        limited = (*an_error(429, "rate_limit_error", "rate limit exceeded"), {"retry-after": "120"})
        server = StandIn(lambda body, n: first if n == 0 else limited)
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-0000", "ANTHROPIC_BASE_URL": server.url}
        model = []
    else:
        first = completion(None, call("where_ranks_stop", {}, 1), usage=(1200, 150))
        limited = oa_error(429, "rate_limit_exceeded", "Rate limit reached", {"retry-after": "120"})
        server = OpenAIStandIn(lambda body, n: first if n == 0 else limited)
        env = {"OPENAI_BASE_URL": server.base_url}
        model = ["--model", MODEL]
    with server:
        t0 = time.monotonic()
        r = _cli([str(d), "--json", *model], tmp_path, **env)
        took = time.monotonic() - t0
        asked = len(server.bodies)
    assert r.returncode == 0, r.stderr
    assert took < 60, f"{took:.0f} s: the retry-after was waited out"
    assert asked == 2, "retried past the cap"
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "rate-limiting" in r.stderr and "retry after 120 s" in r.stderr and "30 s cap" in r.stderr
    out = json.loads(r.stdout)
    assert out["agent"]["outcome"] == "api_error" and out["category"] == inv.diagnosis.category
    assert (out["agent"]["tokens_in"], out["agent"]["tokens_out"]) == (1200, 150)
    assert (out["agent"]["cost_usd"] > 0) is (kind == "anthropic")
