"""A local stand-in for Anthropic's Messages API (POST /v1/messages), for end-to-end tests of `debugger ask` with a
key: the CLI runs with ANTHROPIC_BASE_URL pointing here, exactly as a user behind a gateway would.

Replies follow the API's real format (a `message` object with `content` blocks of type `text` / `tool_use`,
`stop_reason`, `usage`; errors as `{"type": "error", "error": {"type": ..., "message": ...}}` with the real status
codes). What to answer is decided by a `respond(body, n)` callable: the parsed request body and its index.
Every request body is kept, raw, for assertions (tools offered, tool results sent back, secrets never sent).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def message(*blocks: dict, stop: str | None = None, model: str = "claude-sonnet-5-5", usage=(1200, 150)) -> dict:
    stop = stop or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return {"id": "msg_standin", "type": "message", "role": "assistant", "model": model, "content": list(blocks),
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_use(name: str, inp: dict, i: int) -> dict:
    return {"type": "tool_use", "id": f"toolu_standin_{i:02d}", "name": name, "input": inp}


def error(status: int, kind: str, msg: str) -> tuple[int, dict]:
    return status, {"type": "error", "error": {"type": kind, "message": msg}}


class StandIn:
    """`with StandIn(respond) as s:` → s.url for ANTHROPIC_BASE_URL; s.bodies: the raw request bodies."""

    def __init__(self, respond):
        self.respond = respond
        self.bodies: list[bytes] = []
        self.headers: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.bodies.append(raw)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.startswith("/v1/messages"):
                    status, payload = error(404, "not_found_error", f"no route {self.path}")
                else:
                    got = outer.respond(json.loads(raw), len(outer.bodies) - 1)
                    status, payload = got if isinstance(got, tuple) else (200, got)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("request-id", "req_standin")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def requests(self) -> list[dict]:
        return [json.loads(b) for b in self.bodies]


def last_tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of the request's last user turn."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1]["role"] != "user" or isinstance(msgs[-1]["content"], str):
        return []
    return [b for b in msgs[-1]["content"] if b.get("type") == "tool_result"]
