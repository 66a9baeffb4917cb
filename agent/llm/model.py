"""Which model, built how, what its failures mean to the user, and what a run costs.

`--model` (or DEBUGGER_MODEL) is a `provider:name` spec, LangChain's own spelling (`init_chat_model("openai:...")`):
- a bare Claude id (`claude-sonnet-5-5`, the default) or `anthropic:<id>`: Claude through langchain-anthropic
  (agent/llm/claude.py); ANTHROPIC_API_KEY, and ANTHROPIC_BASE_URL for gateways, as the SDK reads them;
- `openai:<name>`: a model served on-premises behind an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp
  server) through langchain-openai (agent/llm/onprem.py); OPENAI_BASE_URL names the endpoint (required: never a
  public default), OPENAI_API_KEY only if the server wants one. The name may hold colons (Ollama's `qwen2.5:72b`).
The endpoint is an environment variable, not a flag, for the same reason ANTHROPIC_BASE_URL is: a site sets it once
(a module file, the Slack bot's unit) and every `debugger ask`, chat and bot conversation uses it.

The graph only needs a LangChain chat model that can bind tools, which is what lets tests hand it a scripted fake.
Every model made here runs under agent/llm/bounds.py (deadline, retry-after cap, token meter).
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


PROVIDERS = ("anthropic", "openai")
ONPREM = "openai"


def parse(spec: str) -> tuple[str, str]:
    """(provider, model name) of a `--model` spec. A prefix of letters that is no provider is a typo, refused
    (ValueError); anything else without a known prefix is a Claude id, as before."""
    head, sep, rest = spec.partition(":")
    if sep and head in PROVIDERS:
        if not rest.strip():
            raise ValueError(f"--model {spec}: no model name after '{head}:'")
        return head, rest.strip()
    if sep and head.replace("-", "").replace("_", "").isalpha():
        raise ValueError(f"--model {spec}: unknown provider '{head}' (anthropic:ID, openai:NAME with OPENAI_BASE_URL)")
    return "anthropic", spec


def model_name(cli: str | None = None) -> str:
    return cli or os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def missing_key(model: str | None = None) -> str | None:
    """What keeps the agent from running with `model` (the CLI's --model, else DEBUGGER_MODEL, else Claude), or
    None when its credentials are set."""
    provider, _ = parse(model_name(model))
    if provider == ONPREM:
        from trainlog_debugger.agent.llm.onprem import BASE_URL_ENVS
        return None if any(os.environ.get(e) for e in BASE_URL_ENVS) else (
            "no OPENAI_BASE_URL for an openai: model (the endpoint, e.g. http://gpu-head:8000/v1)")
    return None if os.environ.get("ANTHROPIC_API_KEY") else "no ANTHROPIC_API_KEY"


def has_key(model: str | None = None) -> bool:
    return missing_key(model) is None


def make_model(name: str, *, max_tokens: int = MAX_OUTPUT_TOKENS, timeout: float | None = None):
    """The chat model for a `--model` spec, under the question's bounds; key and base URL from the environment."""
    provider, model = parse(name)
    if provider == ONPREM:
        from trainlog_debugger.agent.llm import onprem
        return onprem.make(model, max_tokens=max_tokens, timeout=timeout or onprem.TIMEOUT_S)
    from trainlog_debugger.agent.llm import claude
    return claude.make(model, max_tokens=max_tokens, timeout=timeout or 120.0)


def price(model: str) -> tuple[float, float, bool]:
    """(USD per Mtok in, out, exact?). A model of one's own (openai:) costs nothing per token unless
    DEBUGGER_PRICE_IN / DEBUGGER_PRICE_OUT say otherwise (a paid endpoint)."""
    env_in, env_out = os.environ.get("DEBUGGER_PRICE_IN"), os.environ.get("DEBUGGER_PRICE_OUT")
    if env_in and env_out:
        try:
            return float(env_in), float(env_out), True
        except ValueError:
            pass
    provider, model = parse(model) if ":" in model else ("anthropic", model)
    if provider == ONPREM:
        return 0.0, 0.0, True
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix][0], PRICES[prefix][1], True
    return PRICES[DEFAULT_MODEL][0], PRICES[DEFAULT_MODEL][1], False


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float:
    pin, pout, _ = price(model)
    return round((tokens_in * pin + tokens_out * pout) / 1e6, 4)


def describe_api_error(e: BaseException) -> str | None:
    """One line that names what happened with the model's API, or None when `e` is not an API/transport failure
    nor one of our bounds. Used to fall back to the deterministic report with a clear notice (never a traceback).
    The same words for either vendor, each naming its own endpoint and variables."""
    from trainlog_debugger.agent.llm.bounds import DeadlineExceeded, RetryAfterTooLong
    chain, seen = [e], set()
    while chain[-1].__cause__ is not None and id(chain[-1]) not in seen:
        seen.add(id(chain[-1]))
        chain.append(chain[-1].__cause__)
    over = next((x for x in chain if isinstance(x, RetryAfterTooLong)), None)
    dead = next((x for x in chain if isinstance(x, DeadlineExceeded)), None)
    line = next((t for x in chain if (t := _describe_one(x))), None)
    if over is not None:
        return (f"{line or 'the API asked to wait'}; it asked to retry after {over.asked:.0f} s, over the "
                f"{over.cap:.0f} s cap ({RETRY_AFTER_HINT})")
    if dead is not None:
        why = f"the agent's deadline of {dead.deadline_s:.0f} s ({DEADLINE_HINT}) passed before an answer"
        return why + (f" ({line})" if line else "") + (f"; the API asked to retry after {dead.asked:.0f} s"
                                                       if dead.asked else "")
    return line


RETRY_AFTER_HINT = "DEBUGGER_RETRY_AFTER_MAX"
DEADLINE_HINT = "DEBUGGER_DEADLINE"


def error_outcome(e: BaseException) -> str:
    """`agent.outcome` of a question that raised: deadline (our bound), api_error (the API), error (anything else)."""
    from trainlog_debugger.agent.llm.bounds import DeadlineExceeded
    x: BaseException | None = e
    while x is not None:
        if isinstance(x, DeadlineExceeded):
            return "deadline"
        x = x.__cause__
    return "api_error" if describe_api_error(e) else "error"


def _describe_one(x: BaseException) -> str | None:
    """The line for one SDK exception (anthropic's or openai's; LangChain's wrappers subclass them), else None."""
    mro = type(x).__mro__
    sdks = {c.__module__.split(".")[0] for c in mro} & {"anthropic", "openai"}
    if not sdks:
        return None
    onprem, names = "openai" in sdks, {c.__name__ for c in mro}
    if onprem:
        from trainlog_debugger.agent.llm.onprem import base_url
        who, key_env = f"the model endpoint ({base_url() or 'OPENAI_BASE_URL unset'})", "OPENAI_API_KEY"
        model_hint = "the endpoint does not serve this model: check the name after openai: (GET /v1/models)"
    else:
        who, key_env = "the Anthropic API", "ANTHROPIC_API_KEY"
        model_hint = "the Anthropic API does not know this model"
    code = getattr(x, "status_code", None)
    if code == 401:
        return f"{who} refused the key (401): check {key_env}"
    if code == 403:
        return f"{who} denied access (403): the key lacks access to this model"
    if code == 404:
        return f"{model_hint} (404): pick another with --model or DEBUGGER_MODEL"
    if code == 429:
        return f"{who} is rate-limiting this key (429): retry later"
    if code is not None:
        if code == 529 or "overloaded" in str(x).lower():
            return f"{who} is overloaded ({code}): retry later"
        return f"{who} answered {code}: {' '.join(str(x).split())[:160]}"
    if "APITimeoutError" in names:
        return f"{who} did not answer in time"
    if "APIConnectionError" in names:
        if onprem:
            return f"{who} is unreachable"
        base = os.environ.get("ANTHROPIC_BASE_URL") or os.environ.get("ANTHROPIC_API_URL") or "api.anthropic.com"
        return f"the Anthropic API is unreachable ({base})"
    return None
