"""The bot under test: its real HTTP endpoint (bolt's WSGI adapter on a loopback port) wired to the fake Slack Web
API (fake_slack.py), and helpers that post Slack-shaped, signed requests to it."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fake_slack import BOT_USER, TEAM, FakeSlack  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "cases" / "gen-slurm-8r-a"
TOKEN = "xoxb-1111111111-2222222222-abcdefABCDEF0123456789ab"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
HF = "hf_QpLm0123456789AbCdEfGhIjKlMnOpQrSt"
_ids = itertools.count(1)


def sign(body: bytes, ts: int, secret: str = SECRET) -> str:
    """Slack's v0 request signature: HMAC-SHA256 of `v0:<timestamp>:<body>` with the signing secret."""
    return "v0=" + hmac.new(secret.encode(), b"v0:%d:" % ts + body, hashlib.sha256).hexdigest()


class Bot:
    """The running bot: `.url` its /slack/events endpoint, `.fake` the Web API, `.bot` the Bot object."""

    def __init__(self, fake: FakeSlack, cfg, bot, server):
        self.fake, self.cfg, self.bot, self.server = fake, cfg, bot, server
        self.url = f"http://127.0.0.1:{server.server_port}/slack/events"

    def post(self, body: bytes, ctype: str, *, signed: bool = True, age_s: int = 0, headers=None) -> tuple[int, str]:
        ts = int(time.time()) - age_s
        h = {"content-type": ctype}
        if signed:
            h.update({"x-slack-request-timestamp": str(ts), "x-slack-signature": sign(body, ts)})
        h.update(headers or {})  # after signing: a test may forge the signature
        req = urllib.request.Request(self.url, data=body, headers=h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def event(self, event: dict, *, event_id: str | None = None, **kw) -> tuple[int, str]:
        """An Events API `event_callback` envelope around `event`, as Slack posts it."""
        event = {"event_ts": event.get("ts"), **event}
        body = {"token": "verification-token-unused", "team_id": TEAM, "api_app_id": "A0APP0001", "event": event,
                "type": "event_callback", "event_id": event_id or f"Ev{next(_ids):08d}",
                "event_time": int(time.time()), "authorizations": [{"team_id": TEAM, "user_id": BOT_USER,
                                                                    "is_bot": True, "is_enterprise_install": False}]}
        return self.post(json.dumps(body).encode(), "application/json", **kw)

    def mention(self, text: str, *, channel: str = "C0INCIDENT", user: str = "U0ONCALL", thread_ts: str | None = None,
                files: list | None = None, **kw) -> tuple[str, tuple[int, str]]:
        ts = f"1717000000.{next(_ids):06d}"
        ev = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "ts": ts, "channel": channel}
        if thread_ts:
            ev["thread_ts"] = thread_ts
        if files:
            ev["files"] = files
        return ts, self.event(ev, **kw)

    def command(self, text: str, *, channel: str = "C0INCIDENT", user: str = "U0ONCALL") -> tuple[int, str]:
        form = {"token": "unused", "team_id": TEAM, "channel_id": channel, "channel_name": "incident", "user_id": user,
                "user_name": "oncall", "command": "/debug", "text": text, "api_app_id": "A0APP0001",
                "response_url": "https://hooks.slack.com/commands/T0TEAM01/1/x", "trigger_id": "1.2.3"}
        return self.post(urllib.parse.urlencode(form).encode(), "application/x-www-form-urlencoded")

    def posts(self, channel: str, root: str) -> list:
        """The messages the bot posted into that thread, in order."""
        return [c for c in self.fake.named("chat.postMessage") if c.args.get("thread_ts") == root
                and c.args.get("channel") == channel]

    def done(self, channel: str, root: str, n: int = 1):
        """Wait for n post-mortem uploads into the thread: the end of an investigation."""
        return self.fake.wait(lambda: len([c for c in self.fake.named("files.completeUploadExternal")
                                           if c.args.get("thread_ts") == root]) >= n)


@pytest.fixture(scope="session")
def bundle_root(tmp_path_factory) -> Path:
    """An allowlisted root holding the bundled 8-rank hang, with an env dump (an HF token) planted just before
    its trigger line: a secret that must never reach Slack."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    root = tmp_path_factory.mktemp("shared")
    d = root / "jobs" / "4891784"
    shutil.copytree(CASE, d, ignore=shutil.ignore_patterns("truth.yaml"))
    with open_bundle(d) as b:
        t = run(b).diagnosis.chain[0].evidence[0]
    p = d / t.file
    lines = p.read_text().splitlines()
    lines[t.line - 1:t.line - 1] = [f"export HF_TOKEN={HF}"]
    p.write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def start(monkeypatch, tmp_path, bundle_root):
    """start(**config) → a running Bot; stopped after the test."""
    from slack_sdk import WebClient

    from trainlog_debugger.agent.slack.app import build_app, serve_http
    from trainlog_debugger.agent.slack.intake import Config
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "DEBUGGER_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DEBUGGER_HOME", str(tmp_path / "state"))
    running = []

    def _start(**over):
        fake = FakeSlack(TOKEN).__enter__()
        kw = {"bot_token": TOKEN, "mode": "http", "signing_secret": SECRET,
              "roots": [str(bundle_root), str(CASE.parent)], **over}
        cfg = Config(**kw)
        app, bot = build_app(cfg, WebClient(token=TOKEN, base_url=fake.url + "/api/"))
        srv = serve_http(app, "127.0.0.1", 0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        running.append((fake, srv, bot))
        return Bot(fake, cfg, bot, srv)

    yield _start
    for fake, srv, bot in running:
        srv.shutdown()
        srv.server_close()
        bot.convs.close_all()
        fake.__exit__()
