"""Which Claude, built how, what its failures mean to the user, and what a run costs.

The model is `langchain_anthropic.ChatAnthropic` over the official `anthropic` SDK, so the standard SDK
environment works unchanged: ANTHROPIC_API_KEY, and ANTHROPIC_BASE_URL for gateways and proxies (ChatAnthropic
reads ANTHROPIC_API_URL, then ANTHROPIC_BASE_URL). The graph only needs a LangChain chat model that can bind tools,
which is what lets tests hand it a scripted fake.
"""

from __future__ import annotations

import os

DEFAULT_MODEL = "claude-sonnet-5-5"  # the newest Sonnet the anthropic SDK lists (not a deprecated id)
MODEL_ENV = "DEBUGGER_MODEL"
MAX_OUTPUT_TOKENS = 4096

# USD per million tokens (input, output), Anthropic's list prices (platform.claude.com model pages, 2026-11),
# by model-id prefix, longest first. A model not listed is priced as the current Sonnet and the report marks the
# figure as an estimate. DEBUGGER_PRICE_IN / DEBUGGER_PRICE_OUT override both.
PRICES = {
    "claude-sonnet-5-5": (2.0, 10.0), "claude-sonnet-5": (2.0, 10.0), "claude-sonnet-4": (3.0, 15.0),
    "claude-opus-5-5": (4.0, 20.0), "claude-opus-5": (5.0, 25.0), "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0), "claude-opus-4-6": (5.0, 25.0), "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0), "claude-opus-4": (15.0, 75.0),
    "claude-haiku-4-5": (1.0, 5.0), "claude-fable-5-2": (8.0, 40.0), "claude-fable-5-1": (10.0, 50.0),
}


def model_name(cli: str | None = None) -> str:
    return cli or os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def has_key() -> bool:
    return bool(os.environ.get("ANTHROPIC_API_KEY"))


def make_model(name: str, *, max_tokens: int = MAX_OUTPUT_TOKENS, timeout: float = 120.0, max_retries: int = 2):
    """ChatAnthropic for `name`; key and base URL from the environment as the SDK reads them."""
    from langchain_anthropic import ChatAnthropic
    return ChatAnthropic(model=name, max_tokens=max_tokens, timeout=timeout, max_retries=max_retries)


def price(model: str) -> tuple[float, float, bool]:
    """(USD per Mtok in, out, exact?)"""
    env_in, env_out = os.environ.get("DEBUGGER_PRICE_IN"), os.environ.get("DEBUGGER_PRICE_OUT")
    if env_in and env_out:
        try:
            return float(env_in), float(env_out), True
        except ValueError:
            pass
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix][0], PRICES[prefix][1], True
    return PRICES[DEFAULT_MODEL][0], PRICES[DEFAULT_MODEL][1], False


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float:
    pin, pout, _ = price(model)
    return round((tokens_in * pin + tokens_out * pout) / 1e6, 4)


def describe_api_error(e: BaseException) -> str | None:
    """One line that names what happened with the API, or None when `e` is not an API/transport failure. Used to
    fall back to the deterministic report with a clear notice (never a traceback)."""
    try:
        import anthropic
    except Exception:  # pragma: no cover - anthropic is a dependency
        return None
    chain, seen = [e], set()
    while chain[-1].__cause__ is not None and id(chain[-1]) not in seen:
        seen.add(id(chain[-1]))
        chain.append(chain[-1].__cause__)
    for x in chain:
        if isinstance(x, anthropic.AuthenticationError):
            return "the Anthropic API refused the key (401): check ANTHROPIC_API_KEY"
        if isinstance(x, anthropic.PermissionDeniedError):
            return "the Anthropic API denied access (403): the key lacks access to this model"
        if isinstance(x, anthropic.NotFoundError):
            return "the Anthropic API does not know this model (404): pick another with --model or DEBUGGER_MODEL"
        if isinstance(x, anthropic.RateLimitError):
            return "the Anthropic API is rate-limiting this key (429): retry later"
        if isinstance(x, anthropic.APIStatusError):
            code = x.status_code
            if code == 529 or "overloaded" in str(x).lower():
                return f"the Anthropic API is overloaded ({code}): retry later"
            return f"the Anthropic API answered {code}: {str(x)[:160]}"
        if isinstance(x, anthropic.APITimeoutError):
            return "the Anthropic API did not answer in time"
        if isinstance(x, anthropic.APIConnectionError):
            base = os.environ.get("ANTHROPIC_BASE_URL") or os.environ.get("ANTHROPIC_API_URL") or "api.anthropic.com"
            return f"the Anthropic API is unreachable ({base})"
    return None
