"""`debugger slack` end to end over HTTP: signed Events API and slash-command requests posted to the bot's real
endpoint, its Web API calls answered and recorded by a fake Slack on loopback (fake_slack.py). What an incident
channel must be able to trust: the answer lands in the thread with its proof, progress is one edited message, every
message fits Slack's limits, nothing secret is posted, retries are answered once, and every refusal says why."""

from __future__ import annotations

import io
import json
import logging
import tarfile
import time

from conftest import CASE, HF, TOKEN
from fake_slack import BOT_USER, TEAM, blocks_problem

from trainlog_debugger.agent.render.slack_blocks import as_text

CH = "C0INCIDENT"


def _blocks(call) -> list:
    b = call.args["blocks"]
    return json.loads(b) if isinstance(b, str) else b


def _texts(calls) -> str:
    """Everything the bot sent in these calls (text and blocks), as one string."""
    return "\n".join(json.dumps(c.args) for c in calls)


def test_a_mention_with_a_path_answers_in_the_thread(start, bundle_root, caplog):
    caplog.set_level(logging.DEBUG)  # slack_sdk and bolt at their most talkative: still no token
    bot = start()
    path = bundle_root / "jobs" / "4891784"
    root, (status, _) = bot.mention(f"`{path}`")
    assert status == 200
    bot.done(CH, root)
    posts = bot.posts(CH, root)
    # one progress message, edited into the headline; then the full report; nothing else posted
    assert len(posts) == 2 and "investigating" in posts[0].args["text"]
    progress_ts = posts[0].result["ts"]
    edits = [c for c in bot.fake.named("chat.update") if c.args["ts"] == progress_ts]
    assert edits, "the progress message was never edited"
    head = as_text(_blocks(edits[-1]))
    assert "HUNG" in head and "data_loading_stall" in head and "rank 5" in head and "confidence" in head
    assert "trigger: `error-4891784-1.out:57`" in head  # the planted line moved the trigger down by one
    assert "no ANTHROPIC_API_KEY: the agent did not run" in head
    # the full report: Block Kit within Slack's limits, the chain with file:line
    report = _blocks(posts[1])
    assert blocks_problem(report) is None and len(report) <= 50
    assert "Root-cause chain" in as_text(report) and "error-4891784-1.out:57" in as_text(report)
    # the post-mortem, uploaded into the thread through files.uploadV2's three steps
    (done,) = bot.fake.named("files.completeUploadExternal")
    assert done.args["channel_id"] == CH and done.args["thread_ts"] == root
    (md,) = bot.fake.uploads.values()
    assert md.startswith(b"# Post-mortem: hung") and b"error-4891784-1.out:57" in md
    # the HF token planted before the trigger was in the quoted lines? never in what reached Slack
    sent = _texts(bot.fake.calls) + md.decode()
    assert HF not in sent and TOKEN not in sent
    assert not bot.fake.refused()
    assert caplog.records and TOKEN not in caplog.text and HF not in caplog.text


def test_unsigned_forged_and_stale_requests_are_refused(start, bundle_root):
    bot = start()
    path = bundle_root / "jobs" / "4891784"
    _, (unsigned, _) = bot.mention(str(path), signed=False)
    _, (stale, _) = bot.mention(str(path), age_s=6 * 60)
    _, (forged, _) = bot.mention(str(path), headers={"x-slack-signature": "v0=" + "0" * 64})
    assert unsigned == stale == forged == 401
    assert {c.method for c in bot.fake.calls} <= {"auth.test"}


def test_a_retried_event_is_answered_once(start, bundle_root):
    bot = start()
    path = bundle_root / "jobs" / "4891784"
    root, (s1, _) = bot.mention(str(path), event_id="Ev0RETRY01")
    status, _ = bot.event({"type": "app_mention", "user": "U0ONCALL", "text": f"<@{BOT_USER}> {path}", "ts": root,
                           "channel": CH}, event_id="Ev0RETRY01", headers={"x-slack-retry-num": "1",
                                                                             "x-slack-retry-reason": "http_timeout"})
    # the same message as a `message` event (Slack sends both for a mention): not a second investigation
    bot.event({"type": "message", "user": "U0ONCALL", "text": f"<@{BOT_USER}> {path}", "ts": root, "channel": CH,
               "channel_type": "channel"})
    assert s1 == status == 200
    bot.done(CH, root)
    assert len([p for p in bot.posts(CH, root) if "investigating" in p.args["text"]]) == 1


def _refusal(bot, root) -> str:
    got = bot.fake.wait(lambda: [p for p in bot.posts(CH, root) if ":no_entry:" in p.args["text"]], 30)
    return got[0].args["text"]


def test_every_refusal_says_why(start, bundle_root, tmp_path):
    bot = start(channels=[CH, "C0OTHER"], users=["U0ONCALL"], rate=3, max_upload_mb=1)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    escape = bundle_root / "jobs" / "up"
    escape.symlink_to(outside)
    cases = [
        ({"text": str(outside)}, "outside the allowed roots"),
        ({"text": str(escape)}, "outside the allowed roots"),                      # a symlink out of a root
        ({"text": f"{bundle_root}/jobs/../../../etc"}, "outside the allowed roots"),
        ({"text": f"{bundle_root}/jobs/nope"}, "does not exist"),
        ({"text": "/etc/passwd", "channel": "C0RANDOM"}, "not on the bot's channel allowlist"),
        ({"text": str(bundle_root), "user": "U0STRANGER"}, "not on the bot's user allowlist"),
        ({"text": "upload", "files": [{"id": "F1", "name": "logs.tar.gz", "size": 5 << 20}]}, "over the cap of 1 MiB"),
        ({"text": "upload", "files": [{"id": "F2", "name": "a.log", "size": 10,
                                       "url_private_download": "https://evil.example.com/a.log"}]},
         "not on Slack's file host"),
    ]
    for kw, why in cases:
        channel = kw.pop("channel", CH)
        root, (status, _) = bot.mention(kw.pop("text"), channel=channel, **kw)
        assert status == 200
        got = bot.fake.wait(lambda: [p for p in bot.fake.named("chat.postMessage") if p.args.get("thread_ts") == root
                                     and ":no_entry:" in p.args["text"]], 30)
        assert why in got[0].args["text"], (why, got[0].args["text"])
    assert not bot.fake.downloads, "a file was fetched from a foreign host (with the token?)"
    # the rate limit: three asks a minute per channel (the two upload refusals above counted), the next refused
    roots = [bot.mention(str(bundle_root / "jobs" / "4891784"), channel="C0OTHER")[0] for _ in range(4)]
    refused = bot.fake.wait(lambda: [p for p in bot.fake.named("chat.postMessage") if p.args.get("thread_ts") ==
                                     roots[-1] and "rate limit" in p.args["text"]], 60)
    assert "try again in" in refused[0].args["text"]
    for r in roots[:3]:
        bot.done("C0OTHER", r)


def test_no_root_means_no_paths(start, bundle_root):
    bot = start(roots=[])
    root, _ = bot.mention(str(bundle_root / "jobs" / "4891784"))
    assert "started without --allow-root" in _refusal(bot, root)


def test_a_bundle_uploaded_to_the_thread(start):
    bot = start()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for p in sorted(CASE.glob("*.out")):
            tf.add(p, arcname=f"job/{p.name}")
    bot.fake.files["logs.tar.gz"] = buf.getvalue()
    url = f"{bot.fake.url}/files-pri/{TEAM}-F0LOGS/download/logs.tar.gz"
    root, (status, _) = bot.mention("here are the logs", files=[
        {"id": "F0LOGS", "name": "../../logs.tar.gz", "size": len(buf.getvalue()), "url_private_download": url}])
    assert status == 200
    bot.done(CH, root)
    assert bot.fake.downloads == [(url.split(bot.fake.url)[1], f"Bearer {TOKEN}")]
    head = _texts(bot.fake.named("chat.update"))
    assert "data_loading_stall" in head and "error-4891784-1.out:56" in head
    # a second upload into the same thread (no mention): a new investigation in that thread
    ts2 = "1717000000.999999"
    bot.event({"type": "message", "subtype": "file_share", "user": "U0ONCALL", "text": "", "ts": ts2,
               "thread_ts": root, "channel": CH, "files": [{"id": "F0LOGS", "name": "again.tar.gz",
                                                            "size": len(buf.getvalue()),
                                                            "url_private_download": url}]})
    bot.done(CH, root, 2)


def test_slash_command_acks_at_once_and_answers_in_a_thread(start, bundle_root):
    bot = start()
    t0 = time.monotonic()
    status, body = bot.command(str(bundle_root / "jobs" / "4891784"))
    assert status == 200 and "investigating" in body  # ack(text=...): plain text, shown to the asker only
    assert time.monotonic() - t0 < 3.0  # Slack's acknowledgement deadline
    (root_msg,) = bot.fake.wait(lambda: [c for c in bot.fake.named("chat.postMessage")
                                         if "/debug" in c.args["text"]])
    root = root_msg.result["ts"]
    bot.done(CH, root)
    assert "data_loading_stall" in _texts(bot.fake.named("chat.update"))
    # a refusal goes to the asker only, in the ack
    status, body = bot.command("/etc")
    assert status == 200 and "outside the allowed roots" in body
    status, body = bot.command("")
    assert "usage: /debug PATH" in body


def test_a_follow_up_without_the_agent_reshows_the_part_asked(start, bundle_root):
    bot = start()
    root, _ = bot.mention(str(bundle_root / "jobs" / "4891784"))
    bot.done(CH, root)
    bot.mention("what is the timeline?", thread_ts=root)
    got = bot.fake.wait(lambda: [p for p in bot.posts(CH, root) if p.args["text"].startswith("timeline")])
    text = as_text(_blocks(got[0]))
    assert "Timeline" in text and "error-4891784-1.out:57" in text and "no ANTHROPIC_API_KEY" in text
    bot.mention("tell me a joke", thread_ts=root)
    got = bot.fake.wait(lambda: [p for p in bot.posts(CH, root) if "Without the agent" in p.args["text"]])
    assert "timeline" in got[0].args["text"]
    # a thread the bot does not hold
    bot.mention("and why?", thread_ts="1700000000.000001")
    got = bot.fake.wait(lambda: [p for p in bot.fake.named("chat.postMessage")
                                 if p.args.get("thread_ts") == "1700000000.000001"])
    assert "no longer hold an investigation" in got[0].args["text"]


def test_a_follow_up_continues_the_agents_conversation_in_the_thread(start, monkeypatch):
    """With a key: the agent answers the first mention and then a follow-up in the same thread, from the thread's
    history (thread ts = conversation id). Its HTTP is replayed from the agent's follow-up cassette
    (tests/agent/cassettes/follow_up.handwritten.yaml, record_mode none): the same bundle and the same two
    questions as `debugger ask`, so the requests the bot sends must be byte-for-byte those of the CLI's Session.
    Loopback traffic (the fake Slack, the bot's endpoint) is not part of the cassette."""
    from trainlog_debugger.agent.llm.cassettes import replayer
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    bot = start()
    cas_path = CASE.parents[1] / "tests" / "agent" / "cassettes" / "follow_up.handwritten.yaml"
    with replayer("none").use_cassette(str(cas_path), allow_playback_repeats=False, ignore_localhost=True) as cas:
        root, _ = bot.mention(str(CASE))
        bot.done(CH, root)
        head = as_text(_blocks(bot.fake.named("chat.update")[-1]))
        assert "agent: answered (1 verified claim(s))" in head
        report = as_text(_blocks(bot.posts(CH, root)[1]))
        assert "*agent*" in report and "one rank stalled outside NCCL" in report and "[verified]" in report
        bot.mention("why did that rank stop?", thread_ts=root)
        got = bot.fake.wait(lambda: [c for c in bot.fake.named("chat.update")
                                     if "stuck reading data" in c.args.get("text", "")])
        assert cas.all_played and cas.play_count == len(cas.data)  # every exchange, each once
    answer = as_text(_blocks(got[0]))
    assert "> why did that rank stop?" in answer and "[verified]" in answer
    thinking = [p for p in bot.posts(CH, root) if "thinking" in p.args["text"]]
    assert len(thinking) == 1 and got[0].args["ts"] == thinking[0].result["ts"]  # edited, not a new post
    assert not bot.fake.refused()
