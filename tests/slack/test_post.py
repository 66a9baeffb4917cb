"""What the bot sends survives Slack's rate limits and stays within our bound on a message (agent/slack/post.py,
agent/render/slack_blocks.py): through its real HTTP endpoint, against the fake Web API on loopback that answers
429 with Retry-After as Slack does."""

from __future__ import annotations

import pytest

import time

from conftest import HF
from fake_slack import blocks_problem

from trainlog_debugger.agent.render import slack_blocks as B
from trainlog_debugger.tools.model import AgentClaim, AgentSection

CH = "C0INCIDENT"
EVERY_CALL = ("chat.postMessage", "chat.update", "files.getUploadURLExternal", "files.completeUploadExternal", "upload")


def _total(args: dict) -> int:
    blocks = args.get("blocks") or []
    if isinstance(blocks, str):
        import json
        blocks = json.loads(blocks)
    return len(args.get("text") or "") + sum(B.text_length(b) for b in blocks)


@pytest.mark.slow
def test_two_429s_on_every_call_lose_nothing(start, bundle_root):
    """Slack refuses each call twice (HTTP 429, Retry-After), then accepts: every message, edit and upload still
    arrives, each exactly once, after the wait Slack asked for."""
    bot = start()
    bot.fake.rate_limit({m: 2 for m in EVERY_CALL}, retry_after=0)
    bot.fake.rate_limit({"chat.postMessage": 2}, retry_after=1)
    t0 = time.monotonic()
    root, (status, _) = bot.mention(f"`{bundle_root / 'jobs' / '4891784'}`")
    assert status == 200
    bot.done(CH, root)
    assert sorted(bot.fake.limited) == sorted(m for m in EVERY_CALL for _ in range(2)), bot.fake.limited
    assert time.monotonic() - t0 >= 2.0, "Retry-After: 1 was not waited"
    posts = bot.posts(CH, root)
    assert len(posts) == 2 and "investigating" in posts[0].args["text"]  # nothing posted twice, nothing missing
    edits = [c for c in bot.fake.named("chat.update") if c.args["ts"] == posts[0].result["ts"]]
    assert edits, "the progress message was never edited"
    head = B.as_text(_blocks(edits[-1]))
    assert "HUNG" in head and "data_loading_stall" in head, "the verdict was lost"
    assert "Root-cause chain" in B.as_text(_blocks(posts[1])), "the report was lost"
    (md,) = bot.fake.uploads.values()
    assert md.startswith(b"# Post-mortem: hung") and len(bot.fake.named("files.completeUploadExternal")) == 1
    assert not bot.fake.refused() and HF.encode() not in md


def _blocks(call) -> list:
    import json
    b = call.args.get("blocks") or []
    return json.loads(b) if isinstance(b, str) else b


def test_a_long_answer_is_bounded_and_the_rest_is_uploaded(start, bundle_root, monkeypatch):
    """A follow-up answer of ~60,000 characters (a long narrative, 200 claims): the message stays within
    MAX_MESSAGE characters in all and says where the rest is; the whole answer is uploaded into the thread."""
    bot = start()
    root, _ = bot.mention(str(bundle_root / "jobs" / "4891784"))
    bot.done(CH, root)
    conv = bot.bot.convs.get(f"{CH}:{root}")
    cited = conv.diag.chain[0].evidence[0]
    long = AgentSection(model="claude-test", outcome="answered", question="why?",
                        narrative="The data loader on rank 5 retried its reads. " * 400,
                        verdict={"status": "hung", "category": "data_loading_stall", "culprit_ranks": [5],
                                 "confidence": "high", "summary": "rank 5 stalled in data loading"},
                        claims=[AgentClaim(statement=f"claim {i}: rank 5 retried", verified=True, evidence=[cited])
                                for i in range(200)])
    monkeypatch.setattr(bot.bot.convs, "agent_on", lambda: None)
    monkeypatch.setattr(bot.bot.convs, "ask", lambda conv, q: long)
    bot.mention("why did rank 5 stop?", thread_ts=root)
    bot.done(CH, root, n=2)
    (answer,) = [c for c in bot.fake.named("chat.update") if c.args.get("text", "").startswith("agent:")]
    blocks = _blocks(answer)
    assert _total(answer.args) <= B.MAX_MESSAGE and blocks_problem(blocks) is None
    assert B.was_cut(blocks) and "attached file" in B.as_text(blocks[-1:])
    whole = [v for v in bot.fake.uploads.values() if b"claim 199: rank 5 retried" in v]
    assert whole, "the rest of the answer is not in the thread"
    assert all(_total(c.args) <= B.MAX_MESSAGE for c in bot.fake.named("chat.postMessage", "chat.update"))
