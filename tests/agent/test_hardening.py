"""The agent against a model that misbehaves and logs that hide secrets: each test is a way an answer could pass
unverified, a secret could reach the model, the conversation could break the Messages API, or a failure could
lose the user's report (found by review; each reproduced here first)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fake_model import ScriptedModel, reply, tool_call
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver

from trainlog_debugger.agent.graph import verify as V
from trainlog_debugger.agent.graph.graph import build_graph
from trainlog_debugger.agent.graph.session import AgentOptions, Session, ask
from trainlog_debugger.agent.graph.state import Limits
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run
from trainlog_debugger.tools.redact import Redactor

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def _answer(d, claims, **over):
    a = {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks, "confidence": "high",
         "summary": "s", "narrative": "n", "claims": claims}
    a.update(over)
    return a


def _good(d):
    t = d.chain[0].evidence[0]
    return [{"statement": "the trigger", "citations": [{"file": t.file, "line": t.line, "quote": t.text.strip()[:40]}]}]


def test_a_stop_at_the_limit_leaves_no_tool_use_unanswered(opened):
    b, inv = opened
    m = ScriptedModel(script=[reply(tool_call("overview", {}, 1)), reply(tool_call("submit_answer",
                                                                                   _answer(inv.diagnosis, _good(inv.diagnosis)), 2))])
    g = build_graph(m, Toolbox(b, inv), MemorySaver(), limits=Limits(max_rounds=1))
    assert ask(g, None, "t")["outcome"] == "no_answer"
    ask(g, "and now?", "t")
    msgs = m.requests[-1]
    for i, msg in enumerate(msgs):
        if isinstance(msg, AIMessage) and msg.tool_calls:
            answered = {x.tool_call_id for x in msgs[i + 1:] if isinstance(x, ToolMessage)}
            assert {c["id"] for c in msg.tool_calls} <= answered, "a tool_use without its tool_result"
            nxt = msgs[i + 1]
            assert isinstance(nxt, ToolMessage), type(nxt)


def test_a_one_letter_quote_proves_nothing(opened):
    b, inv = opened
    t = inv.diagnosis.chain[0].evidence[0]
    ans = V.Answer.model_validate(_answer(inv.diagnosis, [{"statement": "x", "citations": [
        {"file": t.file, "line": t.line, "quote": " e "}]}]))
    ch = V.check(ans, {t.cite(): t.text}, inv.diagnosis, {s.rel: s for s in b.sources})
    assert not ch.claims[0].verified and "too short" in ch.claims[0].dropped_because


def test_status_nodes_and_claimless_answers_are_checked(opened):
    b, inv = opened
    d = inv.diagnosis
    src = {s.rel: s for s in b.sources}
    shown = {e.cite(): e.text for f in d.chain for e in f.evidence}
    # a changed status needs support like a changed category
    ch = V.check(V.Answer.model_validate(_answer(d, [], status="slow")), shown, d, src)
    assert any("differs from the deterministic facts" in p for p in ch.problems)
    # an invented node is removed
    ch = V.check(V.Answer.model_validate(_answer(d, _good(d), culprit_nodes=["node-that-does-not-exist"])), shown, d, src)
    verdict, _, changes = V.finalize(ch, d)
    assert verdict["culprit_nodes"] == [] and any("node-that-does-not-exist" in c for c in changes)
    # with an inconclusive deterministic answer, an answer with no verified claim changes nothing
    unsure = d.model_copy(update={"status": d.status.__class__("inconclusive")})
    ch = V.check(V.Answer.model_validate(_answer(d, [], status="crashed", category="oom", confidence="high")),
                 shown, unsure, src)
    verdict, _, _ = V.finalize(ch, unsure)
    assert verdict["category"] == d.category and verdict["confidence"] != "high"


def test_all_ranks_claims_are_removed_after_the_last_round(opened):
    b, inv = opened
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    partial = d.model_copy(update={"coverage": d.coverage.model_copy(update={"missing_ranks": [6, 7]})})
    claims = [{"statement": "every rank timed out", "citations": [{"file": t.file, "line": t.line,
                                                                   "quote": t.text.strip()[:40]}]}] + _good(d)
    ch = V.check(V.Answer.model_validate(_answer(d, claims, narrative="All 8 GPUs hung. Rank 5 stalled.")),
                 {t.cite(): t.text}, partial, {s.rel: s for s in b.sources})
    verdict, out, changes = V.finalize(ch, partial)
    assert not out[0].verified and out[1].verified
    assert verdict["narrative"] == "Rank 5 stalled." and any("'all ranks'" in c for c in changes)


SECRETS = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
           "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
           "-----END RSA PRIVATE KEY-----",
           "DB_PASSWORD=\tS3cretPassw0rdValue", "Authorization: Bearer\tabcdefghijklmnopqrstuvwxyz123456",
           "\x1b[32mWANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\x1b[0m"]


def test_secrets_that_json_or_colours_would_hide_never_reach_the_model(tmp_path):
    (tmp_path / "rank_0.log").write_text("\n".join(
        ["[rank0]: 2025-05-01 10:00:00,000 INFO train: start"] + SECRETS +
        ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]) + "\n")
    with open_bundle(tmp_path) as b:
        inv = run(b)
        box = Toolbox(b, inv, redact=Redactor().redact)
        texts = [box.render(box.call("read_lines", {"file": "rank_0.log", "line": 3, "before": 0, "after": 0}))[0],
                 box.render(box.call("read_lines", {"file": "rank_0.log", "line": 5, "before": 4, "after": 4}))[0],
                 box.render(box.call("grep", {"pattern": "MIIE|VTLw|PASSWORD|Bearer|WANDB"}))[0]]
    for text in texts:
        for leak in ("MIIEowIBAAKC", "VTLw7onLRnrq", "S3cretPassw0rd", "abcdefghijklmnopqrstuvwxyz123456",
                     "0123456789abcdef0123"):
            assert leak not in text, (leak, text[:300])


def test_a_catastrophic_regex_is_refused(opened):
    b, inv = opened
    res = Toolbox(b, inv).call("grep", {"pattern": r"(\w+\s?)*Watchdog caught"})
    assert res.status == "error" and "nested quantifiers" in res.data


def test_a_line_whose_text_was_cut_is_not_shown(opened):
    b, inv = opened
    box = Toolbox(b, inv, max_tokens=60)
    text, shown = box.render(box.call("read_lines", {"file": "error-4891784-1.out", "line": 30, "before": 0,
                                                     "after": 5}))
    for at, line in shown.items():
        assert json.dumps(line.strip())[1:30] in text


def test_tokens_spent_before_an_api_error_are_reported(opened):
    import anthropic
    b, inv = opened

    class Flaky(ScriptedModel):
        def _generate(self, messages, stop=None, run_manager=None, **kw):
            if len(self.requests) == 1:
                raise anthropic.APIConnectionError(request=httpx.Request("POST", "https://api.anthropic.com/v1/messages"))
            return super()._generate(messages, stop, run_manager, **kw)
    m = Flaky(script=[reply(tool_call("overview", {}, 1), tokens=(55_000, 300))])
    sec = Session(b, inv, [str(CASE)], AgentOptions(), model=m, checkpointer=MemorySaver()).chat(None)
    assert sec.outcome == "api_error" and "unreachable" in sec.notice
    assert sec.tokens_in == 55_000 and sec.cost_usd > 0


def test_an_unexpected_failure_keeps_the_report(opened):
    b, inv = opened
    m = ScriptedModel(script=[])  # raises AssertionError on the first call: not an API error
    sec = Session(b, inv, [str(CASE)], AgentOptions(), model=m, checkpointer=MemorySaver()).chat(None)
    assert sec.outcome == "error" and sec.notice.startswith("the agent failed")


def test_verifier_feedback_is_redacted_like_everything_else(opened):
    b, inv = opened
    d = inv.diagnosis
    node = d.culprit_nodes[0]
    s = Session(b, inv, [str(CASE)], AgentOptions(redact_hosts=True), model=ScriptedModel(script=[]),
                checkpointer=MemorySaver())
    bad = _answer(d, [{"statement": f"on {s.redactor.redact(node)}", "citations": [
        {"file": "error-4891784-1.out", "line": 1, "quote": f"{s.redactor.redact(node)} exploded in flames"}]}],
        culprit_nodes=[s.redactor.redact(node)])
    s.model.script = [reply(tool_call("submit_answer", bad, i)) for i in range(1, 5)]
    s.chat(None)
    for req in s.model.requests:
        for msg in req:
            assert node not in str(msg.content), msg
