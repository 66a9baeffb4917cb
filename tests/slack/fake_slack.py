"""A fake Slack Web API on loopback (http.server in a thread) for the bot's tests: slack_sdk's WebClient is pointed
at it with `base_url`, exactly as at a real workspace. It answers like Slack (`{"ok": true, "ts": …, "channel": …}`,
`{"ok": false, "error": "invalid_blocks"}`), enforces the Block Kit limits Slack enforces (50 blocks, 3,000
characters per section text, 150 per header), serves the upload URL of files.getUploadURLExternal and private file
downloads (which must carry the bot token), and records every call for assertions. `rate_limit({method: n})` makes
the next n calls of a method (or "upload", the POST of a file's bytes) answer as Slack does past a rate limit: HTTP
429, `Retry-After: <seconds>`, `{"ok": false, "error": "ratelimited"}`, the call not acted on.

Formats: docs.slack.dev/reference/methods/chat.postMessage, chat.update, files.getUploadURLExternal,
files.completeUploadExternal, files.info, auth.test (field names as the reference documents them).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOT_USER, BOT_ID, TEAM = "UBOT0001", "BBOT0001", "T0TEAM01"


@dataclass
class Call:
    method: str
    args: dict
    auth: str
    result: dict | None = None  # what the fake answered


def blocks_problem(blocks) -> str | None:
    """What Slack would reject in these blocks (it answers invalid_blocks), None when they are valid."""
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if len(blocks) > 50:
        return f"{len(blocks)} blocks"
    for b in blocks:
        t = (b.get("text") or {}).get("text", "")
        if b["type"] == "section" and not 1 <= len(t) <= 3000:
            return f"section text of {len(t)} characters"
        if b["type"] == "header" and len(t) > 150:
            return f"header of {len(t)} characters"
        if b["type"] == "context" and any(len(e.get("text", "")) > 3000 for e in b["elements"]):
            return "context text over 3000"
    return None


class FakeSlack:
    def __init__(self, token: str):
        self.token = token
        self.calls: list[Call] = []
        self.uploads: dict[str, bytes] = {}     # file id → bytes received at the upload URL
        self.files: dict[str, bytes] = {}       # private files the bot may download (a user's uploads)
        self.downloads: list[tuple[str, str]] = []  # (path, Authorization header)
        self.messages: dict[tuple[str, str], dict] = {}  # (channel, ts) → latest args (updates applied)
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self._limits: dict[str, list] = {}  # method → [calls still to refuse, Retry-After]
        self.limited: list[str] = []         # the methods answered 429, in order
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _reply(self, status: int, payload, ctype="application/json", headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", ctype)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                name = self.path.rsplit("/", 1)[-1]
                outer.downloads.append((self.path, self.headers.get("authorization", "")))
                if self.headers.get("authorization") != f"Bearer {outer.token}" or name not in outer.files:
                    return self._reply(404, b"not found", "text/plain")
                self._reply(200, outer.files[name], "application/octet-stream")

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                auth = self.headers.get("authorization", "")
                method = "upload" if self.path.startswith("/upload/") else \
                    self.path.split("/api/", 1)[-1].split("?")[0]
                if (wait := outer._limited(method)) is not None:
                    with outer._lock:
                        outer.limited.append(method)
                    return self._reply(429, {"ok": False, "error": "ratelimited"}, headers={"Retry-After": wait})
                if self.path.startswith("/upload/"):
                    outer.uploads[self.path.rsplit("/", 1)[-1]] = raw
                    return self._reply(200, b"OK - " + str(len(raw)).encode(), "text/plain")
                if "json" in (self.headers.get("content-type") or ""):
                    args = json.loads(raw or b"{}")
                else:
                    args = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
                call = Call(method, args, auth)
                with outer._lock:
                    outer.calls.append(call)
                    call.result = (outer.answer(method, args) if auth == f"Bearer {outer.token}"
                                   else {"ok": False, "error": "invalid_auth"})
                self._reply(200, call.result)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, method: str, a: dict) -> dict:
        if method == "auth.test":
            return {"ok": True, "url": "https://example.slack.com/", "team": "Example", "user": "debugger",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}
        if method in ("chat.postMessage", "chat.update"):
            if a.get("blocks") and (why := blocks_problem(a["blocks"])):
                return {"ok": False, "error": "invalid_blocks", "errors": [why]}
            ch = a.get("channel")
            ts = a.get("ts") if method == "chat.update" else f"1717171717.{next(self._ts):06d}"
            if method == "chat.update" and (ch, ts) not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            self.messages[(ch, ts)] = {**self.messages.get((ch, ts), {}), **a}
            return {"ok": True, "channel": ch, "ts": ts, "message": {"type": "message", "text": a.get("text", ""),
                                                                     "user": BOT_USER, "ts": ts}}
        if method == "files.getUploadURLExternal":
            fid = f"F{next(self._ts):08d}"
            return {"ok": True, "upload_url": f"{self.url}/upload/{fid}", "file_id": fid}
        if method == "files.completeUploadExternal":
            files = json.loads(a.get("files") or "[]") if isinstance(a.get("files"), str) else a.get("files") or []
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in files]}
        if method == "files.info":
            name = a.get("file", "")
            return {"ok": True, "file": {"id": name, "name": name, "size": len(self.files.get(name, b"")),
                                         "url_private_download": f"{self.url}/files-pri/{TEAM}-{name}/download/{name}"}}
        return {"ok": False, "error": "unknown_method"}

    def rate_limit(self, counts: dict[str, int], retry_after: int = 1) -> None:
        """The next counts[method] calls of each method answer 429 with `Retry-After: retry_after`."""
        with self._lock:
            self._limits.update({m: [n, retry_after] for m, n in counts.items()})

    def _limited(self, method: str) -> str | None:
        with self._lock:
            left = self._limits.get(method)
            if not left or left[0] <= 0:
                return None
            left[0] -= 1
            return str(left[1])

    def refused(self) -> list[Call]:
        """Calls the fake answered with ok: false (what Slack would have rejected)."""
        with self._lock:
            return [c for c in self.calls if c.result is not None and not c.result.get("ok")]

    def named(self, *methods: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method in methods]

    def wait(self, cond, timeout: float = 120.0):
        """Poll until cond() is truthy (the bot answers on worker threads, after the HTTP ack)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = cond()
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out; calls: {[c.method for c in self.calls]}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
