"""A local stand-in for an OpenAI-compatible server (vLLM's `vllm serve`, Ollama, llama.cpp's `llama-server`):
POST /v1/chat/completions on loopback, for end-to-end tests of `debugger ask --model openai:NAME` with
OPENAI_BASE_URL pointing here, exactly as a site would point it at its own GPU node.

Replies follow the Chat Completions format those servers copy from OpenAI's API reference: a `chat.completion`
object whose `choices[0].message` holds `content` and `tool_calls` (each `{"id", "type": "function", "function":
{"name", "arguments": "<JSON text>"}}`), `finish_reason` "tool_calls" or "stop", and `usage` with
`prompt_tokens` / `completion_tokens`; errors as `{"error": {"message", "type", "param", "code"}}` with the real
status codes, headers such as `retry-after` included. `respond(body, n)` decides: the parsed body and its index.
Every raw body and header set is kept for assertions (tools offered, tool results sent back, no secret sent).
"""

from __future__ import annotations

import json

from trainlog_debugger.eval.loopback import Loopback


def completion(content: str | None = None, *calls: dict, model: str = "qwen2.5-72b", usage=(900, 120)) -> dict:
    msg: dict = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = list(calls)
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": 1764300000, "model": model,
            "choices": [{"index": 0, "message": msg, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def call(name: str, args: dict, i: int) -> dict:
    return {"id": f"call_standin_{i:02d}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def error(status: int, kind: str, msg: str, headers: dict | None = None) -> tuple:
    return status, {"error": {"message": msg, "type": kind, "param": None, "code": None}}, headers or {}


class OpenAIStandIn(Loopback):
    """`with OpenAIStandIn(respond) as s:` → s.base_url for OPENAI_BASE_URL (…/v1); s.bodies, s.headers."""

    def __init__(self, respond):
        super().__init__(respond, route=lambda path: path.rstrip("/") == "/v1/chat/completions",
                         not_found=lambda path: error(404, "not_found", f"no route {path}"))
        self.base_url = f"{self.url}/v1"


def tool_messages(body: dict) -> list[dict]:
    """The `role: tool` messages after the last assistant turn of a request."""
    msgs = body.get("messages") or []
    last = max((i for i, m in enumerate(msgs) if m["role"] == "assistant"), default=-1)
    return [m for m in msgs[last + 1:] if m["role"] == "tool"]
