"""A model served inside the cluster behind an OpenAI-compatible endpoint (vLLM `vllm serve`, Ollama, llama.cpp's
`llama-server`), through LangChain's provider integration (langchain-openai), for sites whose logs may not leave:
`--model openai:qwen2.5-72b` with `OPENAI_BASE_URL=http://gpu-head:8000/v1`.

What the endpoint gets is the Chat Completions API, the one every such server implements:

    POST /v1/chat/completions
    {"model": "qwen2.5-72b", "messages": [{"role": "system", ...}, {"role": "user", ...}],
     "tools": [{"type": "function", "function": {"name": "grep", "parameters": {...}}}], "max_tokens": 4096}

and its tool calls come back as `choices[0].message.tool_calls[].function.arguments` (a JSON string), which
LangChain reads into the same `tool_calls` the graph routes for Claude: the same tools, system prompt, verifier and
redaction, since all of them sit above the model. The tools are declared once in Anthropic's shape
(`input_schema`); `bind_tools` converts them, dropping Anthropic-only keys such as `cache_control`, and the same
keys are taken off message content blocks here (a strict server answers 400 to an unknown field).

Choices made for such servers: BaseChatOpenAI and not ChatOpenAI, because ChatOpenAI renames `max_tokens` to
`max_completion_tokens`, which older vLLM, Ollama and llama.cpp builds do not read; the Responses API is never used
(`use_responses_api=False`: those servers implement Chat Completions); no API key is needed (servers started
without `--api-key` accept any), so a placeholder is sent when OPENAI_API_KEY is unset; retries and the deadline
are Bounded's, as for Claude. The base URL is never defaulted to a public endpoint: without OPENAI_BASE_URL (or
LangChain's OPENAI_API_BASE) the agent does not run (agent/llm/model.py), so a forgotten variable cannot send a
cluster's logs to a vendor.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_openai.chat_models.base import BaseChatOpenAI
from pydantic import SecretStr

from trainlog_debugger.agent.llm.bounds import Bounded

BASE_URL_ENVS = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
NO_KEY = "not-needed"  # what vLLM/Ollama/llama.cpp accept when started without a key
ANTHROPIC_ONLY = ("cache_control", "citations")
TIMEOUT_S = 300.0  # one call: a 70B model on a few GPUs writes ~20 tokens/s, so 4,096 tokens take ~200 s


def base_url() -> str | None:
    return next((os.environ[e] for e in BASE_URL_ENVS if os.environ.get(e)), None)


def _plain(m: BaseMessage) -> BaseMessage:
    if not isinstance(m.content, list):
        return m
    blocks = [{k: v for k, v in b.items() if k not in ANTHROPIC_ONLY} if isinstance(b, dict) else b
              for b in m.content]
    return m.model_copy(update={"content": blocks})


class OnPrem(Bounded, BaseChatOpenAI):
    """A Chat Completions endpoint under the question's bounds."""

    def _get_request_payload(self, input_, *, stop=None, **kw: Any) -> dict:
        msgs = [_plain(m) for m in self._convert_input(input_).to_messages()]
        return super()._get_request_payload(msgs, stop=stop, **kw)


def make(name: str, *, max_tokens: int, timeout: float = TIMEOUT_S) -> OnPrem:
    kw: dict[str, Any] = {"model": name, "base_url": base_url(), "max_tokens": max_tokens, "timeout": timeout,
                          "api_key": SecretStr(os.environ.get("OPENAI_API_KEY") or NO_KEY), "max_retries": 0,
                          "use_responses_api": False, "stream_usage": False}
    return OnPrem(**kw)  # by the names its docs use (mypy sees only the fields' aliases)
