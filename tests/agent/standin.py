"""A local stand-in for Anthropic's Messages API (POST /v1/messages), for end-to-end tests of `debugger ask` with a
key: the CLI runs with ANTHROPIC_BASE_URL pointing here, exactly as a user behind a gateway would.

Replies follow the API's real format (a `message` object with `content` blocks of type `text` / `tool_use`,
`stop_reason`, `usage`; errors as `{"type": "error", "error": {"type": ..., "message": ...}}` with the real status
codes). What to answer is decided by a `respond(body, n)` callable: the parsed request body and its index; it
returns the message, or (status, payload) or (status, payload, headers) for an error such as a 429 with its
`retry-after`.
Every request body is kept, raw, for assertions (tools offered, tool results sent back, secrets never sent).
"""

from __future__ import annotations

from trainlog_debugger.eval.loopback import Loopback


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


class StandIn(Loopback):
    """`with StandIn(respond) as s:` → s.url for ANTHROPIC_BASE_URL; s.bodies: the raw request bodies."""

    def __init__(self, respond):
        super().__init__(respond, route=lambda path: path.startswith("/v1/messages"),
                         not_found=lambda path: error(404, "not_found_error", f"no route {path}"),
                         headers={"request-id": "req_standin"})


def last_tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of the request's last user turn."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1]["role"] != "user" or isinstance(msgs[-1]["content"], str):
        return []
    return [b for b in msgs[-1]["content"] if b.get("type") == "tool_result"]


def plant_secrets(case, dest, secret: str, password: str):
    """A copy of `case`'s bundle at `dest` with a launch environment dump planted in the culprit's file just before
    its trigger line (an HF token and a password in a URL): what the model would see if anything were sent
    unredacted. Returns the copy's path."""
    import shutil

    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    shutil.copytree(case, dest, ignore=shutil.ignore_patterns("truth.yaml"))
    with open_bundle(dest) as b:
        trig = run(b).diagnosis.chain[0].evidence[0]
    p = dest / trig.file
    lines = p.read_text().splitlines()
    lines[trig.line - 1:trig.line - 1] = [f"export HF_TOKEN={secret}",
                                          f"pip index: https://builder:{password}@pypi.internal.example.com/simple"]
    p.write_text("\n".join(lines) + "\n")
    return dest
