"""A JSON API served on 127.0.0.1: the one HTTP stand-in behind the scripted eval models (eval/llm.py) and the
tests' Messages-API and OpenAI-compatible stand-ins (tests/agent/standin*.py).

Why a real socket and not a mocked client: the point of these stand-ins is that the real SDK client (anthropic's,
openai's, through LangChain) builds, sends and parses the requests exactly as it will against the vendor, base URL,
retries and headers included. `respond(body, n)` gets the parsed request body and its index and returns the reply
payload, or `(status, payload)` or `(status, payload, headers)`; a path `route` refuses gets `not_found(path)`.
Every raw body and its headers are kept for assertions (what was offered, what was sent back, that no secret left).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Any  # a payload dict, or (status, payload) or (status, payload, headers)


class Loopback:
    """`with Loopback(respond) as s:` → `s.url` (http://127.0.0.1:PORT); `s.bodies`, `s.headers`: what was sent."""

    def __init__(self, respond: Callable[[dict, int], Reply], *, route: Callable[[str], bool] = lambda p: True,
                 not_found: Callable[[str], tuple] = lambda p: (404, {"error": f"no route {p}"}),
                 headers: dict[str, str] | None = None):
        self.respond = respond
        self.bodies: list[bytes] = []
        self.headers: list[dict] = []
        outer, fixed = self, dict(headers or {})

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.bodies.append(raw)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                got = outer.respond(json.loads(raw), len(outer.bodies) - 1) if route(self.path) \
                    else not_found(self.path)
                status, payload, *extra = got if isinstance(got, tuple) else (200, got)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for k, v in {**fixed, **(extra[0] if extra else {})}.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "Loopback":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def requests(self) -> list[dict]:
        return [json.loads(b) for b in self.bodies]
