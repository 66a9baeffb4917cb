"""The pure parts of the bot: Block Kit within Slack's limits whatever the report's size, mrkdwn that a log line
cannot turn into a mention or a link, the message parser, the log filter that keeps tokens out of logs, and the
`debugger slack` command's help and one-line errors."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from conftest import CASE, TOKEN
from fake_slack import blocks_problem

from trainlog_debugger.agent.render import slack_blocks as B
from trainlog_debugger.agent.slack.intake import parse_text


@pytest.fixture(scope="module")
def diag():
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    with open_bundle(CASE) as b:
        return run(b).diagnosis


def test_a_huge_report_still_fits_slacks_limits(diag):
    """A chain of 300 findings, 2,000 timeline rows, a 10,000-character recommendation: at most 50 blocks, each
    section at most 3,000 characters, all of them within MAX_MESSAGE characters beside the fallback text, and the
    last block says where the rest is."""
    big = diag.model_copy(update={"chain": diag.chain * 43, "timeline": diag.timeline * 250,
                                  "recommendations": ["x" * 10_000, "restart without the culprit node"]})
    blocks = B.fit(B.report_parts(big))
    assert len(blocks) <= 50 and blocks_problem(blocks) is None
    assert sum(B.text_length(b) for b in blocks) + B.MAX_FALLBACK <= B.MAX_MESSAGE
    assert sum(B.text_length(b) for b in blocks) > B.MAX_MESSAGE - B.MAX_FALLBACK - B.MAX_SECTION  # filled
    assert blocks[-1]["type"] == "context" and "attached post-mortem" in blocks[-1]["elements"][0]["text"]
    assert B.was_cut(blocks) and "Root-cause chain" in B.as_text(blocks)
    # many small blocks: the block cap still holds, within the character bound
    many = B.fit([("section", f"line {i}") for i in range(300)])
    assert len(many) == 50 and B.was_cut(many) and "251 more block(s)" in B.as_text(many[-1:])
    small = B.fit(B.report_parts(diag))
    assert len(small) < 50 and blocks_problem(small) is None and "more block" not in B.as_text(small)
    assert not B.was_cut(small)


def test_log_text_cannot_mention_or_link(diag):
    ev = diag.chain[0].evidence[0]
    evil = ev.model_copy(update={"text": "<!channel> see <https://evil.example|here> ```x``` & more"})
    f = diag.chain[0].model_copy(update={"evidence": [evil], "summary": "<@U123> did it"})
    text = B.as_text(B.fit(B.headline_parts(diag.model_copy(update={"chain": [f]}), "/x", "agent off")))
    raw = str(B.fit(B.headline_parts(diag.model_copy(update={"chain": [f]}), "/x", "agent off")))
    assert "<!channel>" not in raw and "<@U123>" not in raw and "&lt;!channel&gt;" in raw
    assert "```" not in raw.split("trigger:")[1] and "<!channel>" in text  # escaped, still readable


def test_which_part_and_the_message_parser():
    assert B.which_part("can you show the timeline again?") == "timeline"
    assert B.which_part("what should we do now") == "recommendations"
    assert B.which_part("which node is to blame") == "culprit"
    assert B.which_part("tell me a joke") is None
    assert parse_text("<@UBOT> `/shared/jobs/1 &amp; 2` why?") == ("/shared/jobs/1", "&amp; 2` why?".replace(
        "&amp;", "&"))
    assert parse_text("<@UBOT> please look at </shared/jobs/9/logs> now") == ("/shared/jobs/9/logs", "please look at now")
    assert parse_text("<@UBOT> why did rank 3 stop?") == (None, "why did rank 3 stop?")


def test_tokens_never_reach_the_log(caplog):
    from trainlog_debugger.agent.slack.app import NoTokens
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "auth failed for %s (%s)",
                            (TOKEN, "xapp-1-A0APP-123456789-abcdefabcdef"), None)
    assert NoTokens().filter(rec) and TOKEN not in rec.getMessage() and "xapp-1-A0APP" not in rec.getMessage()
    assert "[REDACTED]" in rec.getMessage()


def _cli(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "slack", *args],
                          capture_output=True, text=True, env=e, timeout=60, stdin=subprocess.DEVNULL)


def test_help_documents_both_modes():
    r = _cli("--help")
    assert r.returncode == 0
    for words in ("Socket Mode", "SLACK_APP_TOKEN", "HTTP mode", "SLACK_SIGNING_SECRET", "/slack/events",
                  "--allow-root", "--allow-channel", "--allow-user", "--max-upload-mb", "--rate", "--port"):
        assert words in r.stdout, words


def test_the_manifest_is_printed_with_no_token():
    """`debugger slack --manifest`: the app manifest from the package data, as YAML Slack takes, with what the bot
    needs (the wheel check runs it from a wheel install: .ci/wheel_check.sh)."""
    import yaml
    r = _cli("--manifest")
    assert r.returncode == 0 and not r.stderr, r.stderr
    m = yaml.safe_load(r.stdout)
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "files:read", "files:write"} <= scopes
    assert m["settings"]["socket_mode_enabled"] is True and "app_mention" in m["settings"]["event_subscriptions"][
        "bot_events"]
    assert [c["command"] for c in m["features"]["slash_commands"]] == ["/debug"]


@pytest.mark.parametrize("args,env,missing", [
    ((), {}, "SLACK_BOT_TOKEN and SLACK_APP_TOKEN not set"),
    ((), {"SLACK_BOT_TOKEN": TOKEN}, "SLACK_APP_TOKEN not set"),
    (("--mode", "http"), {"SLACK_BOT_TOKEN": TOKEN}, "SLACK_SIGNING_SECRET not set"),
    (("--mode", "http", "--allow-root", "/nonexistent/x"), {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": "s"},
     "--allow-root /nonexistent/x is not a directory"),
    (("--mode", "ftp"), {}, "--mode must be socket or http"),
])
def test_missing_configuration_is_one_line_and_exit_2(args, env, missing):
    r = _cli(*args, **env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and missing in r.stderr and TOKEN not in r.stderr


def test_the_bot_renders_its_post_mortem_and_blocks_without_rich():
    """rich is a terminal library: the bot imports the rich-free Markdown renderer (agent/render/markdown.py),
    never the terminal report's module (tests/test_layers.py rule i_slack_no_rich checks the imports; this checks
    what a real run loads)."""
    code = ("import sys\n"
            "import trainlog_debugger.agent.slack.app\n"
            "from trainlog_debugger.agent.render.markdown import to_markdown\n"
            "from trainlog_debugger.agent.render import slack_blocks as B\n"
            "from trainlog_debugger.tools.bundle.open import open_bundle\n"
            "from trainlog_debugger.tools.pipeline import run\n"
            f"with open_bundle({str(CASE)!r}) as b:\n"
            "    d = run(b).diagnosis\n"
            "md = to_markdown(d); blocks = B.fit(B.report_parts(d))\n"
            "print(md.splitlines()[0], len(blocks), sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("# Post-mortem: hung") and r.stdout.rstrip().endswith("[]"), r.stdout
