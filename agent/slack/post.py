"""Everything the bot says goes through `Poster`: the one place that redacts (secrets always, host names with
--redact-hosts) every string of every message, update and uploaded file before it leaves, and that always answers
in the thread's root. A post that Slack refuses is logged as one line (the method and Slack's error code), never
with the payload or the token.

Slack Web API methods used (docs.slack.dev/reference/methods): chat.postMessage (`thread_ts` = the root's ts),
chat.update (the progress message is edited, never re-posted), and files.uploadV2 as slack_sdk implements it
(`files_upload_v2`: files.getUploadURLExternal, a POST of the bytes to the returned URL, then
files.completeUploadExternal with `channel_id` and `thread_ts`).

Rate limits (docs.slack.dev/apis/web-api/rate-limits): Slack answers HTTP 429 with `Retry-After: <seconds>` and
does not act on the call, so the call is safe to repeat. `with_retries(client)` gives the WebClient slack_sdk's
RateLimitErrorRetryHandler (it sleeps Retry-After, then repeats the call; RATE_LIMIT_RETRIES times) and its
ServerErrorRetryHandler (500/503), beside the ConnectionErrorRetryHandler it has by default: every Web API call
the bot makes, chat.update and the two upload calls included, survives a burst of 429s. One request escapes the
WebClient's handlers: files_upload_v2 POSTs the bytes to the upload URL with urllib, where a 429 is an HTTPError;
`upload` repeats the whole upload on it (and on a 429 the handlers gave up on), waiting Retry-After, capped at
MAX_WAIT_S. Without these, a 429 lost the verdict and the report messages.
"""

from __future__ import annotations

import logging
import time

from trainlog_debugger.agent.render import slack_blocks as B
from trainlog_debugger.tools.redact import Redactor

log = logging.getLogger("trainlog_debugger.slack")
RATE_LIMIT_RETRIES = 5  # 429s in a row a call survives
MAX_WAIT_S = 60.0       # the longest Retry-After the bot's own upload retry waits


def with_retries(client):
    """`client` (a slack_sdk WebClient) with the rate-limit and server-error retry handlers, each added once."""
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
    have = {type(h) for h in client.retry_handlers}
    for h in (RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES), ServerErrorRetryHandler()):
        if type(h) not in have:
            client.retry_handlers.append(h)
    return client


def _walk(obj, fn):
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, list):
        return [_walk(x, fn) for x in obj]
    if isinstance(obj, dict):
        return {k: (_walk(v, fn) if k in ("text", "elements", "fields") or isinstance(v, (list, dict)) else v)
                for k, v in obj.items()}
    return obj


class Poster:
    def __init__(self, client, *, redact_hosts: bool = False, known_hosts=()):
        self.client = client
        self.redactor = Redactor(hosts=redact_hosts, known_hosts=sorted(known_hosts))

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def _payload(self, text: str, blocks: list[dict] | None) -> dict:
        kw = {"text": B.fallback(self.redact(text))}
        if blocks:
            kw["blocks"] = _walk(blocks, self.redact)
        return kw

    def post(self, channel: str, thread_ts: str | None, text: str, blocks: list[dict] | None = None) -> str | None:
        """A new message (in the thread when thread_ts); its ts, None when Slack refused it."""
        try:
            r = self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, unfurl_links=False,
                                             unfurl_media=False, **self._payload(text, blocks))
            return r.get("ts")
        except Exception as e:  # noqa: BLE001 - a failed post must not end the handler
            log.warning("chat.postMessage failed: %s", _why(e))
            return None

    def update(self, channel: str, ts: str | None, text: str, blocks: list[dict] | None = None) -> None:
        """Edit the progress message; without one (its post failed), post instead."""
        if ts is None:
            return
        try:
            self.client.chat_update(channel=channel, ts=ts, **self._payload(text, blocks or []))
        except Exception as e:  # noqa: BLE001
            log.warning("chat.update failed: %s", _why(e))

    def upload(self, channel: str, thread_ts: str, filename: str, content: str, title: str) -> bool:
        """The file in the thread; a 429 on any of its three requests is waited out and the upload repeated."""
        content = self.redact(content)
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, filename=filename, title=title,
                                            content=content)
                return True
            except Exception as e:  # noqa: BLE001
                wait = _retry_after(e)
                if wait is None or attempt == RATE_LIMIT_RETRIES:
                    log.warning("files.uploadV2 failed: %s", _why(e))
                    return False
                log.info("files.uploadV2 rate-limited: retrying in %.0f s", wait)
                time.sleep(wait)
        return False


def _retry_after(e: Exception) -> float | None:
    """Seconds to wait before repeating a call that was rate-limited (HTTP 429 from the Web API or the upload URL;
    Slack's `ratelimited` error), capped at MAX_WAIT_S; None when `e` is no rate limit."""
    resp = getattr(e, "response", None)
    status = getattr(e, "code", None) or getattr(resp, "status_code", None)
    error = None
    try:
        error = resp["error"] if resp is not None else None
    except Exception:  # noqa: BLE001
        pass
    if status != 429 and error != "ratelimited":
        return None
    headers = getattr(e, "headers", None) or getattr(resp, "headers", None) or {}
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return min(max(float(value), 0.0), MAX_WAIT_S) if value is not None else 1.0
    except ValueError:
        return 1.0


def _why(e: Exception) -> str:
    """Slack's error code (`not_in_channel`, `invalid_blocks`), or the exception's type: never the payload."""
    resp = getattr(e, "response", None)
    try:
        return str(resp["error"]) if resp is not None else type(e).__name__
    except Exception:  # noqa: BLE001
        return type(e).__name__
