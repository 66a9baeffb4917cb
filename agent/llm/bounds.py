"""The time a question may take and what it spent: a deadline over every model call, `retry-after` honoured only up
to a cap, and a token meter that survives a failure.

Why our own retry loop and not the SDKs': anthropic (2.x) and openai honour `retry-after` in full, however long,
and retry twice by default (`_calculate_retry_timeout`: "retry_after > 0 → min(retry_after, 4_294_967)"). A 429 or
529 that says

    HTTP/1.1 429 Too Many Requests
    retry-after: 120

kept `debugger ask` silent for four minutes before it printed the fallback. So the clients are made with
`max_retries=0` (agent/llm/claude.py, onprem.py) and `Bounded._generate` retries here: a wait the server asks for
(`retry-after-ms`, then `retry-after` in seconds or as an HTTP date) is honoured when it is at most RETRY_AFTER_MAX
seconds and ends before the deadline; beyond either, the question ends at once with RetryAfterTooLong or
DeadlineExceeded (agent/llm/model.py turns each into one line for the user) and the deterministic report stands.
A failure with no `retry-after` (a dropped connection, a 500) waits the SDK's own backoff (0.5 s doubling, 8 s at
most). Each request's own timeout is cut to the time left, so a hung endpoint cannot outlive the deadline either.

Why a callback for the meter and the deadline: `Run` is a LangChain callback handler on the chat model itself
(`model.callbacks`), so it sees every call of every model the graph is given (ChatAnthropic, ChatOpenAI, the tests'
scripted fakes), counts the `usage_metadata` of each answered call as it arrives, and refuses a call that would
start past the deadline (`raise_error`). The graph's state holds the same counts, but only a checkpointer keeps
them when a node raises, and a one-shot `ask --json` has none: tokens spent before an API error were reported as 0.
"""

from __future__ import annotations

import email.utils
import os
import random
import sys
import time
from typing import Any, ClassVar

from langchain_core.callbacks import BaseCallbackHandler

DEADLINE_ENV, DEADLINE_S = "DEBUGGER_DEADLINE", 600.0  # one question, all its model calls and retries, in seconds
RETRY_AFTER_ENV, RETRY_AFTER_MAX = "DEBUGGER_RETRY_AFTER_MAX", 30.0  # the longest `retry-after` we wait out
RETRIES = 2  # as the SDKs' default
REQUEST_TIMEOUT_S = 120.0  # one call, when the client names none
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}  # the SDKs' retryable set (529: Anthropic's "overloaded")


class DeadlineExceeded(RuntimeError):
    def __init__(self, deadline_s: float, asked: float | None = None):
        super().__init__(f"deadline of {deadline_s:.0f} s reached")
        self.deadline_s, self.asked = deadline_s, asked


class RetryAfterTooLong(RuntimeError):
    def __init__(self, asked: float, cap: float):
        super().__init__(f"retry-after {asked:.0f} s is over the {cap:.0f} s cap")
        self.asked, self.cap = asked, cap


def _seconds(env: str, default: float) -> float:
    try:
        v = float(os.environ.get(env, ""))
        return v if v > 0 else default
    except ValueError:
        return default


class Run(BaseCallbackHandler):
    """One question's clock and meter. `begin(model)` makes (or restarts) the one on a model."""

    raise_error = True  # a refused start must stop the call, not be logged and ignored

    def __init__(self, deadline_s: float | None = None, retry_after_max: float | None = None):
        self.deadline_s = deadline_s or _seconds(DEADLINE_ENV, DEADLINE_S)
        self.retry_after_max = retry_after_max or _seconds(RETRY_AFTER_ENV, RETRY_AFTER_MAX)
        self.restart()

    def restart(self) -> None:
        self.started = time.monotonic()
        self.tokens_in = self.tokens_out = self.calls = 0
        self.waited = 0.0

    def left(self) -> float:
        return self.deadline_s - (time.monotonic() - self.started)

    def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:
        if self.left() <= 0:
            raise DeadlineExceeded(self.deadline_s)

    def on_llm_end(self, response: Any, **kw: Any) -> None:
        for gens in getattr(response, "generations", None) or []:
            for g in gens:
                usage = getattr(getattr(g, "message", None), "usage_metadata", None) or {}
                self.tokens_in += int(usage.get("input_tokens", 0) or 0)
                self.tokens_out += int(usage.get("output_tokens", 0) or 0)
        self.calls += 1


def run_of(model) -> Run | None:
    """The Run on a chat model (its own `callbacks`), or None."""
    return next((c for c in (getattr(model, "callbacks", None) or []) if isinstance(c, Run)), None)


def begin(model, deadline_s: float | None = None) -> Run | None:
    """Restart the clock and the meter for a new question; attach a Run to a model that has none. None for an
    object that is not a LangChain chat model (it keeps no callbacks)."""
    run = run_of(model)
    if run is None:
        if not hasattr(model, "callbacks"):
            return None
        run = Run(deadline_s)
        try:
            model.callbacks = [*(model.callbacks or []), run]
        except (AttributeError, TypeError, ValueError):
            return None
    elif deadline_s:
        run.deadline_s = deadline_s
    run.restart()
    return run


def spent(model) -> tuple[int, int] | None:
    """(input, output) tokens of the question in progress, every answered call counted; None without a Run."""
    run = run_of(model)
    return None if run is None else (run.tokens_in, run.tokens_out)


def retry_after(e: BaseException) -> float | None:
    """Seconds the server asked for, from the failed response's headers (`retry-after-ms`, then `retry-after` as
    seconds or an HTTP date), on `e` or what it was raised from; None when it asked nothing."""
    x: BaseException | None = e
    for _ in range(5):
        if x is None:
            break
        headers = getattr(getattr(x, "response", None), "headers", None)
        if headers is not None:
            for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
                raw = headers.get(name)
                if raw is None:
                    continue
                try:
                    return max(0.0, float(raw) / scale)
                except ValueError:
                    pass
                date = email.utils.parsedate_tz(raw) if name == "retry-after" else None
                if date is not None:
                    return max(0.0, email.utils.mktime_tz(date) - time.time())
        x = x.__cause__
    return None


def retryable(e: BaseException) -> bool:
    """What the SDKs would retry: a timeout or a dropped connection, or one of RETRY_STATUS, unless the server
    said `x-should-retry: false`."""
    x: BaseException | None = e
    for _ in range(5):
        if x is None:
            return False
        resp = getattr(x, "response", None)
        code = getattr(x, "status_code", None) or getattr(resp, "status_code", None)
        if code is not None:
            said = (getattr(resp, "headers", None) or {}).get("x-should-retry")
            return said != "false" and (said == "true" or int(code) in RETRY_STATUS)
        if isinstance(x, _connection_errors()):
            return True
        x = x.__cause__
    return False


def _connection_errors() -> tuple[type, ...]:
    """APIConnectionError of each SDK already loaded (APITimeoutError is one; LangChain's wrappers subclass them):
    asking must not import openai for a Claude user."""
    return tuple(m.APIConnectionError for m in (sys.modules.get("anthropic"), sys.modules.get("openai"))
                 if m is not None and hasattr(m, "APIConnectionError"))


def backoff(attempt: int) -> float:
    """The SDKs' own: 0.5 s doubling, at most 8 s, less up to a quarter of jitter."""
    return min(0.5 * 2 ** attempt, 8.0) * (1 - 0.25 * random.random())


class Bounded:
    """Mixed in before a LangChain chat model class: its `_generate` under the Run's deadline and retry rules.
    The SDK client must be made with max_retries=0, or it would wait out `retry-after` itself first."""

    retries: ClassVar[int] = RETRIES

    def _request_timeout(self) -> float:
        """The client's own timeout (ChatAnthropic's `default_request_timeout`, ChatOpenAI's `request_timeout`)."""
        for attr in ("default_request_timeout", "request_timeout"):
            v = getattr(self, attr, None)
            if isinstance(v, (int, float)) and v > 0:
                return float(v)
        return REQUEST_TIMEOUT_S

    def _generate(self, messages, stop=None, run_manager=None, **kw: Any):
        run = run_of(self) or begin(self) or Run()
        attempt = 0
        while True:
            left = run.left()
            if left <= 0:
                raise DeadlineExceeded(run.deadline_s)
            try:
                return super()._generate(messages, stop=stop, run_manager=run_manager,  # type: ignore[misc]
                                         **{**kw, "timeout": max(1.0, min(self._request_timeout(), left))})
            except Exception as e:
                if attempt >= self.retries or not retryable(e):
                    raise
                asked = retry_after(e)
                if asked is not None and asked > run.retry_after_max:
                    raise RetryAfterTooLong(asked, run.retry_after_max) from e
                wait = backoff(attempt) if asked is None else asked
                if wait >= run.left():
                    raise DeadlineExceeded(run.deadline_s, asked) from e
                time.sleep(wait)
                run.waited += wait
                attempt += 1
