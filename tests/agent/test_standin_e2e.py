"""`debugger ask BUNDLE --json` with a key, end to end, against a local stand-in for the Messages API reached through
ANTHROPIC_BASE_URL (the issue's "done when"): the whole graph runs, the tools are offered, a tool call is executed
and its result sent back, a fabricated citation and an unsupported culprit are dropped, a planted secret is never
sent, the agent section is printed; a one-shot question reaches the model; API errors and no key fall back to the
deterministic report with one clear line and exit 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standin import StandIn, error, last_tool_results, message, text, tool_use

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
SECRET = "hf_QpLm0123456789AbCdEfGhIjKlMnOpQrSt"
PASSWORD = "s3cr3tPassw0rd"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The bundled 8-rank hang, with a launch environment dump planted in the culprit's file just before its
    trigger line: a secret the model would see if anything were sent unredacted."""
    d = tmp_path_factory.mktemp("b") / "bundle"
    shutil.copytree(CASE, d, ignore=shutil.ignore_patterns("truth.yaml"))
    with open_bundle(d) as b:
        trig = run(b).diagnosis.chain[0].evidence[0]
    p = d / trig.file
    lines = p.read_text().splitlines()
    lines[trig.line - 1:trig.line - 1] = [f"export HF_TOKEN={SECRET}",
                                          f"pip index: https://builder:{PASSWORD}@pypi.internal.example.com/simple"]
    p.write_text("\n".join(lines) + "\n")
    with open_bundle(d) as b:
        inv = run(b)
    return d, inv


def _cli(args, base_url: str | None, home: Path, key: str | None = "sk-ant-test-0000"):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_"))}
    env["DEBUGGER_HOME"] = str(home)
    if key:
        env["ANTHROPIC_API_KEY"] = key
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", *args],
                          capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL)


def _script(inv):
    """Round 1: read the lines around the trigger. Then an answer with one true claim, one fabricated citation
    and an unsupported culprit rank, until the verifier stops sending it back."""
    d = inv.diagnosis
    t = d.chain[0].evidence[0]

    def respond(body, n):
        if n == 0:
            return message(text("Reading the trigger."), tool_use("read_lines", {"file": t.file, "line": t.line,
                                                                                 "before": 3, "after": 3}, 1))
        return message(tool_use("submit_answer", {
            "status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks + [6001],
            "culprit_nodes": d.culprit_nodes, "confidence": "high", "summary": "one rank stalled outside NCCL",
            "narrative": "The culprit rank stopped outside the collective; the others timed out waiting.",
            "disagreement": "rank 6001 also looked suspicious",
            "claims": [
                {"statement": "the trigger line", "citations": [{"file": t.file, "line": t.line,
                                                                 "quote": t.text.strip()[:40]}]},
                {"statement": "an IB link flapped", "citations": [{"file": t.file, "line": t.line,
                                                                   "quote": "NET/IB : Got async event : port error"}]},
            ]}, 10 + n))
    return respond


def test_the_whole_graph_against_the_stand_in(bundle, tmp_path):
    d, inv = bundle
    with StandIn(_script(inv)) as s:
        r = _cli([str(d), "--json"], s.url, tmp_path)
        bodies = list(s.bodies)
        reqs = s.requests()
        headers = s.headers
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    agent = out["agent"]
    assert agent["outcome"] == "answered", agent
    # the tools were offered, one ran, and its result went back as a tool_result for that call
    assert {t["name"] for t in reqs[0]["tools"]} >= {"grep", "read_lines", "nccl_state", "submit_answer"}
    assert agent["tool_calls"] == ["read_lines"]
    back = last_tool_results(reqs[1])
    assert back and back[0]["tool_use_id"] == "toolu_standin_01"
    # the fabricated citation and the unsupported culprit are dropped, not passed through
    claims = {c["statement"]: c for c in agent["claims"]}
    assert claims["the trigger line"]["verified"] is True
    assert claims["an IB link flapped"]["verified"] is False
    assert 6001 not in agent["verdict"]["culprit_ranks"]
    assert agent["verdict"]["confidence"] != "high"
    assert any("6001" in c for c in agent["changes"])
    # the verifier's problems were sent back to the model before the rest was removed
    assert any("quote is not in that line" in json.dumps(last_tool_results(q)) for q in reqs[2:])
    # the planted secrets never left the machine; the key went only in its header
    for raw in bodies:
        assert SECRET.encode() not in raw and PASSWORD.encode() not in raw
        assert b"sk-ant-test-0000" not in raw
    assert any(b"HF_TOKEN=[REDACTED]" in raw for raw in bodies), "the dump was read, redacted"
    # the SDK sends the key in a header (x-api-key, or Authorization: Bearer in newer SDKs), never in a body
    assert "sk-ant-test-0000" in (headers[0].get("x-api-key", "") + headers[0].get("authorization", ""))
    # tokens and cost are reported; the deterministic answer stands beside the agent's
    assert agent["tokens_in"] > 0 and agent["cost_usd"] > 0
    assert out["category"] == inv.diagnosis.category


def test_a_one_shot_question_reaches_the_model(bundle, tmp_path):
    d, inv = bundle
    seen = []

    def respond(body, n):
        seen.append(body)
        return message(tool_use("submit_answer", {"status": inv.diagnosis.status.value,
                                                  "category": inv.diagnosis.category, "culprit_ranks": [],
                                                  "confidence": "low", "summary": "s", "claims": []}, 1))
    with StandIn(respond) as s:
        r = _cli([str(d), "why did the culprit rank stop?", "--json"], s.url, tmp_path)
    assert r.returncode == 0, r.stderr
    first_user = seen[0]["messages"][0]
    content = first_user["content"] if isinstance(first_user["content"], str) else json.dumps(first_user["content"])
    assert "why did the culprit rank stop?" in content
    assert json.loads(r.stdout)["agent"]["question"] == "why did the culprit rank stop?"


@pytest.mark.parametrize("status,kind,says", [
    (401, "authentication_error", "refused the key (401)"),
    (429, "rate_limit_error", "rate-limiting"),
    (529, "overloaded_error", "overloaded"),
])
def test_api_errors_fall_back_to_the_deterministic_report(bundle, tmp_path, status, kind, says):
    d, inv = bundle
    with StandIn(lambda body, n: error(status, kind, "stand-in says no")) as s:
        r = _cli([str(d), "--json"], s.url, tmp_path)
    assert r.returncode == 0, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["agent"]["outcome"] == "api_error" and out["category"] == inv.diagnosis.category


def test_unreachable_api_and_no_key(bundle, tmp_path):
    d, _ = bundle
    r = _cli([str(d), "--json"], "http://127.0.0.1:9", tmp_path)  # nothing listens on the discard port
    assert r.returncode == 0 and "unreachable" in r.stderr, r.stderr
    r = _cli([str(d)], None, tmp_path, key=None)
    assert r.returncode == 0 and "no ANTHROPIC_API_KEY" in r.stderr
    assert "agent: no ANTHROPIC_API_KEY: the agent did not run" in r.stdout
