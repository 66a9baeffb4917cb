"""`debugger slack`: the slack-bolt app. Handlers are thin: they check who asks and what (intake.py), investigate
(conversations.py, the same pipeline and agent as `debugger ask`) and answer in the thread (post.py,
agent/render/slack_blocks.py; the post-mortem file from agent/render/markdown.py, which loads no rich).

Triggers: an @mention with a path (under --allow-root), a bundle uploaded with an @mention or into a thread the
bot is already investigating, and `/debug PATH` (its answer goes in a thread under a message the bot posts). A
mention in an investigated thread without a path is a follow-up question.

Acknowledgement: bolt acknowledges Events API requests itself and runs the listener on a worker thread
(process_before_response=False), so the HTTP answer never waits for an investigation; `/debug` calls ack() before
any work. Slack's 3-second rule is therefore met whatever the bundle's size. Retried events (X-Slack-Retry-Num,
same event_id) are dropped by a middleware; a mention that also arrives as a `message` event is answered once.

In a thread, in order: one progress message, edited as the work goes (never a stream of posts), ending as the
deterministic headline (status, category, culprit, confidence, trigger line with file:line); then the full report
as Block Kit sections; then the Markdown post-mortem as a file (it holds what the blocks had no room for).

HTTP mode: requests are verified by bolt's RequestVerification middleware (the v0 HMAC-SHA256 signature of
`v0:<timestamp>:<body>` with SLACK_SIGNING_SECRET, and a timestamp within 5 minutes): an unsigned, forged or stale
request gets 401 and reaches no handler. Served by bolt's WSGI adapter on a threading wsgiref server. Socket Mode:
slack_sdk's built-in WebSocket client (no public URL; SLACK_APP_TOKEN, an `xapp-` token with connections:write).
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from pathlib import Path

from trainlog_debugger.agent.graph.session import AgentOptions
from trainlog_debugger.agent.render.markdown import to_markdown
from trainlog_debugger.agent.render import slack_blocks as B
from trainlog_debugger.agent.slack.conversations import Conversations, sqlite_saver
from trainlog_debugger.agent.slack.intake import Config, Guard, Refused, Seen, download, parse_text, safe_name
from trainlog_debugger.agent.slack.post import Poster, with_retries
from trainlog_debugger.tools.bundle.open import BundleError
from trainlog_debugger.tools.redact import redact_secrets

log = logging.getLogger("trainlog_debugger.slack")
PROGRESS_EVERY_S = 3.0  # chat.update is a Tier 3 method (~50 a minute): progress edits at most this often
SLACK_FILE_HOSTS = {"files.slack.com", "files-edu.slack.com", "files-gov.slack.com"}
HELP = ("mention me with a path to a job's logs (`@debugger /shared/jobs/1234/logs`), upload a bundle (.tar.gz, "
        ".zip, .log) with a mention, or use `/debug PATH`; in an investigated thread, mention me with a question")


class NoTokens(logging.Filter):
    """Every log record through tools/redact.py: a token in an exception text or a URL never reaches the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            return True
        record.msg, record.args = redact_secrets(msg), None
        return True


class Bot:
    def __init__(self, cfg: Config, client, *, conversations: Conversations | None = None):
        self.cfg, self.client = cfg, client
        self.guard = Guard(cfg)
        self.poster = Poster(client, redact_hosts=cfg.redact_hosts)
        self.convs = conversations or Conversations(
            AgentOptions(model=cfg.model, budget_tokens=cfg.budget, max_rounds=cfg.max_rounds,
                         redact_hosts=cfg.redact_hosts), offline=cfg.offline, checkpointer=sqlite_saver(),
            max_extract_bytes=min(cfg.max_upload_bytes * 20, 8 << 30))
        self.events, self.messages = Seen(), Seen()
        base = getattr(client, "base_url", "") or ""
        self.file_hosts = SLACK_FILE_HOSTS | ({h} if (h := _host(base)) else set())

    # --- the three triggers and follow-ups ------------------------------------------------------------------------

    def on_event(self, event: dict, bot_user: str | None) -> None:
        """app_mention, and `message` events carrying files in a thread under investigation."""
        channel, ts, user = event.get("channel", ""), event.get("ts", ""), event.get("user")
        if not channel or not ts or not self.messages.first(f"{channel}:{ts}"):
            return
        mention = event.get("type") == "app_mention" or (bot_user and f"<@{bot_user}>" in (event.get("text") or ""))
        root = event.get("thread_ts") or ts
        conv_id = f"{channel}:{root}"
        files = event.get("files") or []
        if not mention and not (files and self.convs.get(conv_id)):
            return  # chatter in a channel: not for the bot
        try:
            self.guard.who(channel, user)
            path, question = parse_text(event.get("text") or "")
            if files:
                self.guard.spend(channel)
                self._upload(channel, root, files, question or None)
            elif path:
                real = self.guard.path(path)
                self.guard.spend(channel)
                self.investigate(channel, root, [real], path, question or None)
            elif question and (conv := self.convs.get(conv_id)):
                self.guard.spend(channel)
                self.follow_up(channel, root, conv, question)
            elif question and event.get("thread_ts"):
                raise Refused("I no longer hold an investigation for this thread (closed, or the bot restarted): "
                              "mention me with the path again")
            else:
                self.poster.post(channel, root, HELP)
        except Refused as r:
            self.poster.post(channel, root, f":no_entry: {r}")

    def on_command(self, command: dict, ack) -> None:
        """`/debug PATH [question]`: refusals are answered to the asker only (the ack's ephemeral text)."""
        channel, user = command.get("channel_id", ""), command.get("user_id")
        try:
            self.guard.who(channel, user)
            path, question = parse_text(command.get("text") or "")
            if not path:
                raise Refused(f"usage: /debug PATH [question] ({HELP})")
            real = self.guard.path(path)
            self.guard.spend(channel)
        except Refused as r:
            ack(text=f":no_entry: {r}")
            return
        ack(text=f"investigating `{path}`: the answer will be in a thread in this channel")
        root = self.poster.post(channel, None, f"<@{user}> asked: /debug {path}")
        if root:
            self.investigate(channel, root, [real], path, question or None)

    # --- work --------------------------------------------------------------------------------------------------

    def _upload(self, channel: str, root: str, files: list[dict], question: str | None) -> None:
        cap = self.cfg.max_upload_bytes
        stated = sum(int(f.get("size") or 0) for f in files if isinstance(f, dict))
        if stated > cap:
            raise Refused(f"the upload is {stated >> 20} MiB, over the cap of {cap >> 20} MiB (--max-upload-mb)")
        tmp = tempfile.mkdtemp(prefix="debugger-slack-")
        try:
            got = 0
            for i, f in enumerate(files[:20]):
                url = f.get("url_private_download") or f.get("url_private")
                if not url and f.get("id"):
                    info = self.client.files_info(file=f["id"]).get("file") or {}
                    url = info.get("url_private_download") or info.get("url_private")
                if not url:
                    raise Refused("Slack gave no download URL for the upload (does the app have files:read?)")
                got += download(url, Path(tmp) / safe_name(f.get("name") or "", i), self.client.token,
                                self.file_hosts, cap - got)
            names = ", ".join(str(f.get("name") or "upload") for f in files[:3]) + (" …" if len(files) > 3 else "")
            paths = [str(p) for p in sorted(Path(tmp).iterdir())]
        except BaseException:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.investigate(channel, root, paths, names, question, tmpdir=tmp)

    def investigate(self, channel: str, root: str, paths: list[str], label: str, question: str | None,
                    tmpdir: str | None = None) -> None:
        """Progress message → headline (edited in place) → full report → post-mortem file."""
        conv_id = f"{channel}:{root}"
        tag = B.esc(label)
        ts = self.poster.post(channel, root, f":hourglass_flowing_sand: investigating `{tag}`: reading the bundle…")
        last = [time.monotonic()]

        def progress(done: int, total: int) -> None:
            if time.monotonic() - last[0] >= PROGRESS_EVERY_S and total:
                last[0] = time.monotonic()
                self.poster.update(channel, ts, f":hourglass_flowing_sand: investigating `{tag}`: scanned "
                                                f"{min(100, 100 * done // total)}% of the logs…")
        try:
            conv = self.convs.start(conv_id, paths, label, tmpdir=tmpdir, progress=progress)
        except BundleError as e:
            self.poster.update(channel, ts, f":no_entry: could not investigate `{tag}`: {e}")
            return
        except Exception as e:  # noqa: BLE001 - never a traceback in the channel
            log.warning("investigation failed: %s", type(e).__name__)
            self.poster.update(channel, ts, f":x: the investigation failed ({type(e).__name__}); see the bot's log")
            return
        d = conv.diag
        off = self.convs.agent_on()
        self._headline(channel, ts, d, label, off or "agent: investigating…")
        sec = self.convs.ask(conv, question)
        d = self.convs.with_agent(conv, sec)
        self._headline(channel, ts, d, label, _agent_line(sec))
        text = f"Full report: {d.status.value} {d.category}"
        self.poster.post(channel, root, text, B.fit(B.report_parts(d), self.poster.redact))
        self.poster.upload(channel, root, f"postmortem-{_slug(label)}.md", to_markdown(d),
                           f"Post-mortem: {d.status.value} — {d.category}")

    def _headline(self, channel: str, ts: str | None, d, label: str, agent_line: str) -> None:
        self.poster.update(channel, ts, B.verdict_line(d), B.fit(B.headline_parts(d, label, agent_line),
                                                                 self.poster.redact))

    def follow_up(self, channel: str, root: str, conv, question: str) -> None:
        """The agent's answer in the same conversation; without the agent, the part of the report asked for."""
        if (why := self.convs.agent_on()):
            name = B.which_part(question)
            if name is None:
                self.poster.post(channel, root, f"{why}. Without the agent I can show a part of the report: ask "
                                                f"about the {', '.join(B.PARTS)}.")
                return
            self.poster.post(channel, root, f"{name} (deterministic; {why})",
                             B.fit(B.part(conv.diag, name) + [("context", why)], self.poster.redact))
            return
        ts = self.poster.post(channel, root, ":hourglass_flowing_sand: thinking about it…")
        sec = self.convs.ask(conv, question)
        blocks = B.fit(B.agent_parts(sec), self.poster.redact, more="the whole answer is in the attached file")
        self.poster.update(channel, ts, f"agent: {sec.verdict.get('summary') or sec.outcome}", blocks)
        if B.was_cut(blocks):  # what the message had no room for, in a file in the thread
            d = self.convs.with_agent(conv, sec)
            self.poster.upload(channel, root, f"answer-{_slug(question)[:40]}.md", to_markdown(d),
                               f"Answer: {question[:80]}")


def _agent_line(sec) -> str:
    if sec.outcome in ("offline", "api_error", "error"):
        return B.not_run(sec)
    return f"agent: {sec.outcome} ({len([c for c in sec.claims if c.verified])} verified claim(s)); full report below"


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[-60:] or "bundle"


def _host(url: str) -> str | None:
    from urllib.parse import urlsplit
    return urlsplit(url).hostname


def build_app(cfg: Config, client=None):
    """(bolt App, Bot). `client`: a slack_sdk WebClient (tests point its base_url at a fake Web API); by default
    one with SLACK_BOT_TOKEN. The App verifies the token with auth.test at start."""
    from slack_bolt import App, BoltResponse
    from slack_sdk import WebClient
    client = with_retries(client or WebClient(token=cfg.bot_token))
    app = App(client=client, signing_secret=cfg.signing_secret or "",
              request_verification_enabled=cfg.mode == "http", process_before_response=False)
    bot = Bot(cfg, client)

    @app.middleware
    def drop_retries(body, next):  # noqa: A002 - bolt injects arguments by name
        eid = body.get("event_id") if isinstance(body, dict) else None
        if eid and not bot.events.first(str(eid)):
            log.info("retried event %s ignored", eid)
            return BoltResponse(status=200, body="")
        return next()

    @app.event("app_mention")
    def mention(event, context):
        _guarded(bot.on_event, event, context.get("bot_user_id"))

    @app.event("message")
    def message(event, context):
        if event.get("subtype") in (None, "file_share", "thread_broadcast") and not event.get("bot_id"):
            _guarded(bot.on_event, event, context.get("bot_user_id"))

    @app.command("/debug")
    def debug(ack, command):
        try:
            bot.on_command(command, ack)
        except Exception as e:  # noqa: BLE001
            log.warning("/debug failed: %s", type(e).__name__)

    return app, bot


def _guarded(fn, *args) -> None:
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - a listener must not die with a traceback holding event text
        log.warning("handler failed: %s", type(e).__name__)


MAX_BODY = 1 << 20        # Slack's events and slash commands are a few KiB; anything larger is refused unread
MAX_CONNECTIONS = 32      # connections served at once; past it a request gets 503 (each connection is a thread)
READ_TIMEOUT_S = 10       # a client that sends nothing for this long is dropped
REPLAY_WINDOW_S = 300     # Slack's own: a request older than 5 minutes is refused; a signature seen twice in it too


def serve_http(app, host: str, port: int, signing_secret: str | None = None):
    """A threading WSGI server at /slack/events (events and /debug) with bolt's WSGI adapter behind a gate
    (`SlackGate`); returned unstarted (`serve_forever()`), so tests can run it on port 0 in a thread.
    `signing_secret`: the app's (default: the one bolt was built with)."""
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from slack_bolt.adapter.wsgi import SlackRequestHandler

    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

        def process_request(self, request, client_address):
            if not slots.acquire(blocking=False):  # bounded: 200 idle connections held 200 threads (issue 30)
                try:
                    request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                    b"Connection: close\r\n\r\n")
                except OSError:
                    pass
                self.shutdown_request(request)
                return
            super().process_request(request, client_address)

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                slots.release()

    class Quiet(WSGIRequestHandler):
        timeout = READ_TIMEOUT_S  # the socket's: a connection that sends nothing is closed, its thread freed

        def log_message(self, fmt, *args):  # access lines carry no tokens, but say nothing useful either
            log.debug("http: " + fmt, *args)

    secret = signing_secret if signing_secret is not None else getattr(app, "_signing_secret", None) or ""
    gate = SlackGate(SlackRequestHandler(app), secret)
    return make_server(host, port, gate, server_class=Server, handler_class=Quiet)


class SlackGate:
    """WSGI in front of bolt: what Slack signs is checked before anything is parsed (issue 30: unsigned bodies were
    read whole and parsed first; six 256 MiB posts held 1.58 GB). In order: the size Content-Length declares
    (413 over MAX_BODY, 411 without one, never read), the timestamp (401 unless a number within REPLAY_WINDOW_S:
    a non-numeric one was a 500 with a traceback), the body read up to its declared size, the v0 HMAC-SHA256
    signature (401), and a signature seen before within the window (a replayed `/debug` started a new
    investigation each time: 200, ignored). Only then does bolt see the request, with the body it was signed
    with."""

    def __init__(self, inner, secret: str, *, now=time.time):
        import threading
        self.inner, self.secret, self.now = inner, secret.encode(), now
        self.seen: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        import hashlib
        import hmac
        import io

        def refuse(code: str, why: str):
            log.info("http request refused: %s (%s)", code, why)
            start_response(code, [("Content-Type", "text/plain"), ("Content-Length", str(len(why)))])
            return [why.encode()]

        length = environ.get("CONTENT_LENGTH") or ""
        if environ.get("REQUEST_METHOD") == "POST":
            if not length.isdigit():
                return refuse("411 Length Required", "a Content-Length is required")
            if int(length) > MAX_BODY:
                return refuse("413 Payload Too Large", f"at most {MAX_BODY} bytes")
        ts = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP") or ""
        sig = environ.get("HTTP_X_SLACK_SIGNATURE") or ""
        if not (ts.isascii() and ts.isdigit() and len(ts) <= 12) or abs(self.now() - int(ts)) > REPLAY_WINDOW_S:
            return refuse("401 Unauthorized", "missing, malformed or stale X-Slack-Request-Timestamp")
        if not sig.startswith("v0=") or len(sig) > 80:
            return refuse("401 Unauthorized", "missing or malformed X-Slack-Signature")
        body = environ["wsgi.input"].read(int(length or 0)) if length else b""
        want = "v0=" + hmac.new(self.secret, b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
        if not self.secret or not hmac.compare_digest(want, sig):
            return refuse("401 Unauthorized", "invalid signature")
        with self.lock:
            cutoff = self.now() - REPLAY_WINDOW_S
            for k in [k for k, t in self.seen.items() if t < cutoff]:
                del self.seen[k]
            if sig in self.seen:
                start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "0")])
                return [b""]
            self.seen[sig] = self.now()
        environ = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
        return self.inner(environ, start_response)


def socket_handler(app, app_token: str):
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    return SocketModeHandler(app, app_token)
