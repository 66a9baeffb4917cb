"""Claude, the default model: langchain-anthropic's ChatAnthropic over the official `anthropic` SDK, so the
standard SDK environment works unchanged (ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL or ANTHROPIC_API_URL for gateways
and proxies), with its calls under the question's bounds (agent/llm/bounds.py).

`max_retries=0` hands retrying to Bounded: the SDK would otherwise wait out any `retry-after` (120 s twice) before
our loop ever saw the 429.
"""

from __future__ import annotations

from typing import Any

from langchain_anthropic import ChatAnthropic

from trainlog_debugger.agent.llm.bounds import Bounded


class Claude(Bounded, ChatAnthropic):
    """ChatAnthropic whose calls keep the deadline and the retry-after cap."""


def make(name: str, *, max_tokens: int, timeout: float) -> Claude:
    kw: dict[str, Any] = {"model": name, "max_tokens": max_tokens, "timeout": timeout, "max_retries": 0}
    return Claude(**kw)  # by the names its docs use (mypy sees only the fields' aliases)
