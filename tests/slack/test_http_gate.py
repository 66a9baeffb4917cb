"""The Slack HTTP endpoint checks what Slack signs before it parses anything (issue 30): a body over the cap is
refused unread (413), a malformed timestamp is a 401 (was a 500 with a traceback), an unsigned or forged request a
401, a replayed signed /debug is answered once, and idle connections are dropped and bounded."""

from __future__ import annotations

import socket
import time
import urllib.parse

from conftest import sign

from trainlog_debugger.agent.slack import app as A


def _raw(bot, head: bytes, *, read: bool = True) -> bytes:
    s = socket.create_connection(("127.0.0.1", bot.server.server_port), timeout=10)
    s.sendall(head)
    out = s.recv(4096) if read else b""
    s.close()
    return out


def test_a_body_over_the_cap_is_refused_unread(start):
    bot = start()
    ts = str(int(time.time()))
    head = (f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            f"{256 << 20}\r\nX-Slack-Request-Timestamp: {ts}\r\nX-Slack-Signature: v0=00\r\n\r\n").encode()
    t0 = time.monotonic()
    reply = _raw(bot, head + b"{")  # 256 MiB declared, 1 byte sent: answered without waiting for the rest
    assert reply.startswith(b"HTTP/1.0 413") or reply.startswith(b"HTTP/1.1 413"), reply[:60]
    assert time.monotonic() - t0 < A.READ_TIMEOUT_S


def test_malformed_stale_unsigned_and_forged_requests_are_401(start):
    bot = start()
    body = b'{"type": "event_callback"}'
    for headers in ({"x-slack-request-timestamp": "soon", "x-slack-signature": "v0=00"},
                    {"x-slack-request-timestamp": str(int(time.time()) - 3600),
                     "x-slack-signature": sign(body, int(time.time()) - 3600)},
                    {"x-slack-signature": "v0=" + "0" * 64}):
        code, text = bot.post(body, "application/json", signed=False, headers=headers)
        assert code == 401, (headers, code, text)
    code, _ = bot.post(body, "application/json", headers={"x-slack-signature": "v0=" + "1" * 64})
    assert code == 401


def test_a_replayed_signed_command_starts_one_investigation(start, bundle_root):
    bot = start()
    form = {"token": "unused", "team_id": "T0TEAM01", "channel_id": "C0INCIDENT", "channel_name": "incident",
            "user_id": "U0ONCALL", "user_name": "oncall", "command": "/debug", "text": str(bundle_root / "jobs" / "4891784"),
            "api_app_id": "A0APP0001", "response_url": "https://hooks.slack.com/commands/T0TEAM01/1/x",
            "trigger_id": "1.2.3"}
    body = urllib.parse.urlencode(form).encode()
    ts = int(time.time())
    headers = {"x-slack-request-timestamp": str(ts), "x-slack-signature": sign(body, ts)}
    for _ in range(3):
        code, _ = bot.post(body, "application/x-www-form-urlencoded", signed=False, headers=headers)
        assert code == 200
    started = bot.fake.wait(lambda: [c for c in bot.fake.named("chat.postMessage")
                                     if "asked: /debug" in str(c.args.get("text", ""))])
    time.sleep(1)
    started = [c for c in bot.fake.named("chat.postMessage") if "asked: /debug" in str(c.args.get("text", ""))]
    assert len(started) == 1, started


def test_the_gate_alone():
    """The order of the checks, without a server: nothing is read before the size and the timestamp are known."""
    calls = []

    class Body:
        def read(self, n):
            calls.append(n)
            return b"x" * n

    gate = A.SlackGate(lambda env, sr: (sr("200 OK", []), [b"ok"])[1], "s3cr3t", now=lambda: 1_000_000)
    got = {}

    def sr(status, headers):
        got["status"] = status

    gate({"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(A.MAX_BODY + 1), "wsgi.input": Body()}, sr)
    assert got["status"].startswith("413") and calls == []
    gate({"REQUEST_METHOD": "POST", "CONTENT_LENGTH": "3", "HTTP_X_SLACK_REQUEST_TIMESTAMP": "12e5",
          "HTTP_X_SLACK_SIGNATURE": "v0=1", "wsgi.input": Body()}, sr)
    assert got["status"].startswith("401") and calls == []
