"""Everything the bot says goes through `Poster`: the one place that redacts (secrets always, host names with
--redact-hosts) every string of every message, update and uploaded file before it leaves, and that always answers
in the thread's root. A post that Slack refuses is logged as one line (the method and Slack's error code), never
with the payload or the token.

Slack Web API methods used (docs.slack.dev/reference/methods): chat.postMessage (`thread_ts` = the root's ts),
chat.update (the progress message is edited, never re-posted), and files.uploadV2 as slack_sdk implements it
(`files_upload_v2`: files.getUploadURLExternal, a POST of the bytes to the returned URL, then
files.completeUploadExternal with `channel_id` and `thread_ts`).
"""

from __future__ import annotations

import logging

from trainlog_debugger.agent.render import slack_blocks as B
from trainlog_debugger.tools.redact import Redactor

log = logging.getLogger("trainlog_debugger.slack")


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
        try:
            self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, filename=filename, title=title,
                                        content=self.redact(content))
            return True
        except Exception as e:  # noqa: BLE001
            log.warning("files.uploadV2 failed: %s", _why(e))
            return False


def _why(e: Exception) -> str:
    """Slack's error code (`not_in_channel`, `invalid_blocks`), or the exception's type: never the payload."""
    resp = getattr(e, "response", None)
    try:
        return str(resp["error"]) if resp is not None else type(e).__name__
    except Exception:  # noqa: BLE001
        return type(e).__name__
