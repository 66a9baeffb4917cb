"""What the bot lets in: channel and user allowlists, the path allowlist, per-channel rate limits, de-duplication of
retried events, and uploaded bundles (size cap, downloaded only from Slack, opened with the tool layer's archive
rules). Every refusal is a sentence the user sees, naming the reason.

Why each check exists:
- Paths: a mention names a path on a shared filesystem; anything outside the allowlisted roots is refused, and the
  check is made on the resolved path (symlinks and `..` followed first), so `/shared/jobs/../../etc` or a symlink
  out of a root is refused too.
- Uploads: the size Slack states is checked before downloading and the bytes actually received are counted while
  downloading (a stated size can lie); the bot token is only ever sent to Slack's own file host (or the Web API's
  host, which is what tests point at): a file URL elsewhere is refused. The archive is then opened by
  tools/bundle/open.py (`open_bundle`), with its member, nesting and extracted-bytes budgets.
- Retries: Slack re-sends an event it thinks was not acknowledged (X-Slack-Retry-Num, same event_id); a mention
  also arrives as a `message` event with the same channel and ts. Both are answered once.
- Rate: one investigation costs minutes of CPU and possibly model tokens; a channel gets `rate` per minute.
"""

from __future__ import annotations

import html
import os
import re
import threading
import time
import urllib.parse
import urllib.request
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Config:
    """Everything `debugger slack` is configured with (flags and environment)."""

    bot_token: str
    mode: str = "socket"            # socket | http
    app_token: str | None = None    # socket mode
    signing_secret: str | None = None  # http mode
    roots: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)  # empty: every channel the bot is in
    users: list[str] = field(default_factory=list)     # empty: everyone in those channels
    max_upload_mb: int = 200
    rate: int = 6                   # investigations + questions per channel per minute
    redact_hosts: bool = False
    offline: bool = False           # never run the agent
    model: str | None = None
    budget: int = 200_000
    max_rounds: int = 12
    host: str = "127.0.0.1"
    port: int = 3000

    @property
    def max_upload_bytes(self) -> int:
        return max(1, min(self.max_upload_mb, 10_000)) << 20


class Refused(Exception):
    """A request the bot will not serve; str(e) is the message the user gets."""


class Seen:
    """A bounded, time-limited set of keys (event ids, channel+ts): `first(key)` is True once per key."""

    def __init__(self, size: int = 10_000, ttl_s: float = 3600.0):
        self._d: OrderedDict[str, float] = OrderedDict()
        self._size, self._ttl, self._lock = size, ttl_s, threading.Lock()

    def first(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            while self._d and (len(self._d) >= self._size or now - next(iter(self._d.values())) > self._ttl):
                self._d.popitem(last=False)
            if key in self._d:
                return False
            self._d[key] = now
            return True


class RateLimit:
    """At most `n` per `window_s` per key (a sliding window)."""

    def __init__(self, n: int, window_s: float = 60.0):
        self.n, self.window = max(1, n), window_s
        self._hits: dict[str, deque] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when allowed (and counted), else the seconds until the next one is."""
        now = time.monotonic()
        with self._lock:
            q = self._hits.setdefault(key, deque())
            while q and now - q[0] >= self.window:
                q.popleft()
            if len(q) >= self.n:
                return self.window - (now - q[0])
            q.append(now)
            return 0.0


class Guard:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.roots = [os.path.realpath(r) for r in cfg.roots]
        self.rate = RateLimit(cfg.rate)

    def who(self, channel: str, user: str | None) -> None:
        """Raises Refused when the channel or the user is not allowlisted."""
        if self.cfg.channels and channel not in self.cfg.channels:
            raise Refused(f"this channel ({channel}) is not on the bot's channel allowlist: ask its operator to add "
                          "it with --allow-channel")
        if self.cfg.users and user not in self.cfg.users:
            raise Refused(f"<@{user}> is not on the bot's user allowlist (--allow-user)")

    def spend(self, channel: str) -> None:
        wait = self.rate.take(channel)
        if wait:
            raise Refused(f"rate limit: this channel has asked {self.rate.n} time(s) in the last minute; try again "
                          f"in {int(wait) + 1} s")

    def path(self, raw: str) -> str:
        """The resolved path when it lies under an allowlisted root, else Refused with the reason."""
        if not self.roots:
            raise Refused("paths are not accepted: the bot was started without --allow-root (upload the bundle "
                          "to the thread instead)")
        if "\x00" in raw or not raw.startswith("/"):
            raise Refused(f"`{raw}` is not an absolute path")
        real = os.path.realpath(raw)
        if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.roots):
            raise Refused(f"`{raw}` is outside the allowed roots ({', '.join(self.cfg.roots)})")
        if not os.path.exists(real):
            raise Refused(f"`{raw}` does not exist (on the bot's host)")
        return real


_MENTION = re.compile(r"<[@!#][^>]*>")
_LINK = re.compile(r"<([^|>]+)(?:\|[^>]*)?>")


def parse_text(text: str) -> tuple[str | None, str]:
    """(the first absolute path in a message, the rest as the question). Slack escapes &<> and may wrap a pasted
    path as a link `<…>`; mentions are dropped, backticks and quotes around the path too."""
    t = _MENTION.sub(" ", text or "")
    t = _LINK.sub(lambda m: m.group(1), t)
    t = html.unescape(t)
    path, rest = None, []
    for word in t.split():
        w = word.strip("`'\"")
        if path is None and w.startswith("/"):
            path = w
        else:
            rest.append(word)
    return path, " ".join(rest).strip()


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, i: int) -> str:
    """A file name of ours for an upload (its suffix kept: it tells open_bundle what the file is)."""
    base = _SAFE.sub("_", os.path.basename(name or ""))[-80:].lstrip(".") or "upload.log"
    return f"{i:02d}-{base}"


def download(url: str, dest: Path, token: str, allowed_hosts: set[str], cap: int, timeout: float = 60.0) -> int:
    """GET a private file URL with the bot token into dest; the bytes received are counted against cap. Refused
    when the URL is not on an allowed host (the token must not leave Slack) or the file is larger than cap."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("https", "http") or (u.hostname or "") not in allowed_hosts or \
            (u.scheme == "http" and u.hostname not in ("127.0.0.1", "localhost")):
        raise Refused("the upload's URL is not on Slack's file host: not downloaded")
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    n = 0
    with urllib.request.urlopen(req, timeout=timeout) as r, open(dest, "wb") as fh:  # noqa: S310 - host checked
        while chunk := r.read(1 << 20):
            n += len(chunk)
            if n > cap:
                raise Refused(f"the upload is larger than the cap ({cap >> 20} MiB, --max-upload-mb)")
            fh.write(chunk)
    return n
