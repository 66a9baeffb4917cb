"""Redaction: take secrets out of log text before it leaves the machine (to an LLM, to Slack, into a report).

Training logs carry secrets by accident: env dumps (`HF_TOKEN=...`), launcher command lines (`--hf-token ...`),
pip index URLs with a password, HTTP headers a client logged, a service-account JSON, a PEM key a setup script
echoed. `Redactor.redact` replaces the secret *value* with `[REDACTED]` and keeps the name or the token's
prefix, so the reader still sees that an HF token was set (often the very thing a diagnosis needs).

Optionally (`hosts=True`) host names and IPs are masked too, consistently (`node-17` -> `host-1` everywhere, for
the Redactor's lifetime), so an LLM can still reason "the same node failed twice"; `unmask` puts them back in its
answer. Secrets are never kept, so they are never restored.

Near misses matter as much as hits: a debugger that blanks `max_new_tokens=512`, `TOKENIZERS_PARALLELISM=false`,
`missing_keys=[...]` or a timestamp hides the evidence it was asked to read. So a NAME=value pair is a secret
only when the NAME ends in a secret word, and values that cannot be secrets (numbers for count-like names,
booleans, placeholders like `<HUB_TOKEN>` or `$HF_TOKEN`) are left alone.

Everything here is a pure function of the text (and of the Redactor's host map): no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import re
from collections.abc import Iterable

__all__ = ["Redactor", "redact_secrets", "redact_tree", "SECRET_MARK"]

SECRET_MARK = "[REDACTED]"

# --- secrets -------------------------------------------------------------------------------------------------------

# A NAME is a secret's name when it ENDS in one of these (case-insensitive): `HF_TOKEN`, `apiKey`, `x-api-key`,
# `aws_secret_access_key`, `AWS_ACCESS_KEY_ID`, `Authorization`. `TOKENIZERS_PARALLELISM` or `HF_TOKEN_PATH` do not.
# `pass` only as a word of its own (`pass=`, `DB_PASS`), not the end of one (`compass`, `bypass`)
_SUFFIX = (r"(?:tokens?|keys?|key[_-]id|secrets?|passwords?|passwd|(?<![a-z])pass|pwd|credentials?|auth|"
           r"authorization|cookies?)")
_NAME = rf"(?i:(?:[A-Za-z_][\w.-]*?)?{_SUFFIX})"


def _value(g: str, first_excl: str = "") -> str:
    """The value after a secret's name: quoted (up to the same quote) or a bare word, with an optional auth scheme.

    A bare value stops at separators that end a value in logs (`,;&)]}`, whitespace, quotes, a backslash from
    escaped JSON) and cannot start with a bracket: `missing_keys=['a.b']`, `pad_token: <pad>` are structures,
    not secrets.
    """
    return (
        rf"(?P<{g}_vq>\\?[\"'`])?"
        rf"(?P<{g}_scheme>(?i:bearer|basic|token|digest|negotiate)[ \t]+)?"
        rf"(?P<{g}_val>(?({g}_vq)(?:(?!(?P={g}_vq))[^\r\n])+"
        rf"|[^\s\"'`,;&()\[\]{{}}<>\\{first_excl}][^\s\"'`,;&)\]}}\\]*))"
    )


_PEM_HEAD = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

# Token shapes recognisable without a name. The prefix is kept (it says what kind of token it was).
_SHAPES = (
    r"\bsk-ant-[\w-]{20,}"
    r"|\bsk-(?=[\w-]*\d)[\w-]{20,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_\w{22,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bxapp-[A-Za-z0-9-]{10,}"
    r"|\bhf_[A-Za-z0-9]{30,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bAIza[\w-]{35}(?![\w-])"
    r"|\bglpat-[\w-]{20,}"
    r"|\bpypi-[\w-]{50,}"
    r"|\bnpm_[A-Za-z0-9]{36}\b"
    r"|\beyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]*"  # JWT: header.payload.signature (signature may be empty)
)
_SHAPE_PREFIX = re.compile(r"sk-ant-|sk-|gh[pousr]_|github_pat_|xox[abprs]-|xapp-|hf_|AKIA|ASIA|AIza|glpat-|pypi-|npm_")
_SHAPE_RE = re.compile(_SHAPES)

# One combined pass. At each position the first alternative that matches wins, so the order is deliberate:
# PEM blocks and URL passwords before names, names (which consume their value) before bare token shapes.
_SECRET_RE = re.compile(
    "|".join(
        [
            # PEM private key: the whole body, up to its END line (kept), or the base64 lines of a truncated one.
            rf"(?P<pem>{_PEM_HEAD}(?P<pem_body>(?s:.*?)(?={_PEM_END})|(?:\r?\n[ \t]*[A-Za-z0-9+/=]{{16,}}[ \t]*)+))",
            # scheme://user:password@host -> the user stays. The scheme is bounded: `a-a-a-...` must not go quadratic.
            r"(?P<url>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/@'\"]*:(?P<url_val>[^\s/@'\"]+)(?=@))",
            # CLI flags: --hf-token abc, --api-key=abc. A value starting with '-' is the next flag.
            rf"(?P<cli>(?<![\w-])--(?P<cli_name>{_NAME})(?:=|[ \t]+){_value('cli', '-')})",
            # NAME=value, NAME: value, "name": "value", environ['NAME'] = 'v', Megatron's `name ....... value`.
            # An unquoted name needs a blank after ':' (not `host:port`, not `a::b`).
            rf"(?P<kv>(?<![\w.-])(?P<kv_name>{_NAME})(?P<kv_nq>\\?[\"'])?\]?"
            r"(?:[ \t]*=(?!=)[ \t]*|(?(kv_nq)[ \t]*:[ \t]*|:(?:[ \t]+|(?=\\?[\"'])))|[ \t]+\.{3,}[ \t]+|\t+)"
            rf"{_value('kv')})",
            # Bearer <token> anywhere (a digit is required: 'Bearer authentication failed' is prose).
            r"(?P<bearer>(?i:\bbearer)[ \t]+(?P<bearer_val>(?=[\w.~+/=-]*\d)[\w.~+/=-]{12,}))",
            # wandb login <key>
            r"(?P<wandb>\bwandb[ \t]+login[ \t]+(?:--?[\w-]+(?:=\S+)?[ \t]+)*"
            r"(?P<wandb_val>[0-9a-f]{40}|[\w-]{40,})(?![\w-]))",
            # .netrc: `machine h login u password p`, or a `password p` line of its multi-line form.
            r"(?P<netrc>(?:\bmachine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+|(?<![^\n])[ \t]*)"
            r"password[ \t]+(?P<netrc_val>\S+))",
            # Signed URLs: the signature is a credential (S3/GCS presigned, Azure SAS).
            r"(?P<qs>(?<=[?&])(?i:x-amz-signature|x-goog-signature|sig|signature)=(?P<qs_val>[^\s&#'\"]+))",
            rf"(?P<shape>{_SHAPES})",
        ]
    )
)

# The pre-check before _SECRET_RE: a string holding none of these (searched in its lower-cased copy) cannot hold a
# match of any alternative above, so it skips the big regex, which tries every alternative at every position: ~45 µs
# a line of a scan report, against ~2.5 µs for this (36 k distinct strings in a 4,096-rank scan: 1.6 s -> 0.09 s).
# Why each is necessary: a PEM head ends in `PRIVATE KEY` ("key"); a CLI flag or a NAME=value needs a name ending in
# a _SUFFIX word, matched case-insensitively ("token", "key", "secret", "passw" for passwords?/passwd, "pwd",
# "credential", "auth" for auth/authorization); .netrc needs `password`; a Bearer token `bearer`; wandb `wandb`; a
# signed URL `sig=` or `signature=`; a token shape the prefix _SHAPE_PREFIX keeps (its pattern is letters, `_`, `-`
# and classes of lower-case letters, so lower-casing it keeps its meaning), or `eyJ` for a JWT. A URL password needs
# `://` and `@`, tested apart (an `s3://` path is no hint). Lower-casing keeps containment only on ASCII text: re's
# IGNORECASE folds `ſ` to `s` and the Kelvin sign to `k`, str.lower does not, so other text takes the full path.
# An alternative added to _SECRET_RE must add its literal here; tests/test_redact.py runs both paths on corpora.
_HINT_RE = re.compile(
    r"token|key|secret|pass|pwd|credential|auth|cookie|bearer|sig=|signature=|wandb|eyj|" + _SHAPE_PREFIX.pattern.lower()
)


def _may_hold_secret(text: str) -> bool:
    """False only when `text` provably holds no match of _SECRET_RE (see _HINT_RE): true of most lines a report
    quotes, which then cost a lower-cased copy and one literal search instead of the full pattern."""
    if not text.isascii() or ("://" in text and "@" in text):
        return True
    return _HINT_RE.search(text.lower()) is not None


# Names whose value is a password-like secret: numbers are not exempt there (`PASSWORD=123456` is a password).
_PASSWORDISH = re.compile(r"(?i)(?:passwords?|passwd|(?<![a-z])pass|pwd|secrets?|credentials?|auth|authorization|"
                          r"cookies?)$")
# The shell's working directory, in every env dump: a path, not a password.
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd"})
_NULLISH = frozenset(
    {"", "0", "1", "true", "false", "none", "null", "nil", "yes", "no", "on", "off", "undefined", "unset", "n/a"}
)
# Placeholders a program prints instead of the secret: <HUB_TOKEN>, [SEP], ***, $HF_TOKEN, ${HF_TOKEN:-}, %KEY%.
_PLACEHOLDER = re.compile(r"\*+|x{3,}|X{3,}|\.{3}|…|<[^<>]*>|\[[^\[\]]*\]|\$\{[^}]*\}|\$\w+|%\w+%")
# For count-like names (max_tokens, num_keys): a number, however written.
_NUMBER = re.compile(r"[+-]?\d{1,15}(?:\.\d+)?(?:[eE][+-]?\d+)?[kKmMbBgGtT]?")
# For key/token names: a lowercase identifier is a name, not a random secret (`key: model.layers.0.weight`,
# `pad_token = tokenizer.eos_token`, `sort_key=step`). A dotless word with a digit may be hex, so it is not exempt.
_IDENT = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)+|[a-z_]{1,32}")


def _benign(name: str, value: str) -> bool:
    """True when `value` cannot be a secret, though its name says it might be."""
    v = value.strip()
    if v.lower() in _NULLISH or v == SECRET_MARK or _PLACEHOLDER.fullmatch(v):
        return True
    n = name.strip("\"'").lower()
    if n.rsplit(".", 1)[-1] in _NOT_SECRET_NAMES:
        return True
    if _SHAPE_RE.search(v) or _PASSWORDISH.search(n):
        return False
    # `keys: /default_pg/0//cpu//0/1` (a c10d store-timeout line names the store keys it waited for): a path of
    # store keys, not a key (issue 30: masking it changed a proof); `for key: store_based_barrier_key:1` (the
    # store-barrier timeout): a lowercase name and a counter
    if n.endswith(("key", "keys")) and _STORE_KEYS.fullmatch(v):
        return True
    return bool(_NUMBER.fullmatch(v) or _IDENT.fullmatch(v))


_STORE_KEYS = re.compile(r"/[\w./-]*|[a-z_]{3,}(?::\d{1,9})+")


def _pem_body(body: str) -> str:
    """The mark in place of a key's body, keeping its line breaks so line numbers after it still hold."""
    breaks = re.findall(r"\r\n|\r|\n", body)
    if not breaks:
        return SECRET_MARK
    return breaks[0] + SECRET_MARK + "".join(breaks[1:])


# --- hosts ---------------------------------------------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# Four octets, not part of a longer dotted number (`1.2.3.4.5`) and not a 3-part version (`2.21.5`).
_V4 = rf"(?<![\w.-]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w-])(?!\.\d)"
# Candidate IPv6 (validated in code): hex groups and colons, not inside `a::b::c`, not a call `c10::add(`.
_V6 = r"(?<![\w:.-])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:(<-])(?!\.\d)"
_IP_RE = re.compile(rf"(?P<v4>{_V4})|(?P<v6>{_V6})")
_NEVER_MASK = frozenset({"localhost", "localhost.localdomain", "127.0.0.1", "0.0.0.0", "::1", "::"})
_HOSTNAME = r"[A-Za-z0-9][\w.-]*"
# Where logs name a host without being told which names are hosts.
_DISCOVER = re.compile(
    "|".join(
        [
            rf"(?<![\w.-])(?P<nccl>{_HOSTNAME}):\d+:\d+[ \t]+\[\d+\]",  # NCCL prefix: host:pid:tid [dev]
            rf"\bsrun:[ \t]+error:[ \t]+(?P<srun>{_HOSTNAME}):[ \t]+task",
            rf"\*\*\*[ \t]+(?:JOB|STEP)[ \t]+[\w.+]+[ \t]+ON[ \t]+(?P<slurm>{_HOSTNAME})[ \t]+CANCELLED",
            # torchrun's failure report: `  host      : node-17.cluster`
            rf"(?<![^\n])[ \t]*host[ \t]*:[ \t]*(?P<torchrun>{_HOSTNAME})[ \t]*(?=\r?\n|$)",
            rf"(?i:master[-_]addr|rdzv[-_]endpoint)[\"']?[ \t]*[=: ][ \t]*[\"']?(?P<master>{_HOSTNAME})",
        ]
    )
)
# A placeholder this module writes (and unmask reads back). Masks are always bounded by non-[\w-] characters.
_PLACEHOLDER_RE = re.compile(r"(?<![\w-])(?:host|ip)-\d+(?![\w-])")


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return True


def _plausible_v6(s: str) -> bool:
    """Conservative: a valid address with `::` or 8 groups, 2+ groups, and a hex letter or a 3+ char group.

    Keeps `12:34:56` (no `::`, not 8 groups), MACs (6 groups) and `x[1::2]` (short digit groups) as they are.
    """
    if s in _NEVER_MASK or not _is_ip(s):
        return False
    groups = [g for g in s.split(":") if g]
    if len(groups) < 2 or ("::" not in s and len(groups) != 8):
        return False
    return any(len(g) >= 3 or re.search(r"[A-Fa-f]", g) for g in groups)


def _trie_regex(words: Iterable[str]) -> str:
    """One alternation for many names, shared prefixes factored out (fast on hundreds of nodes); longer first."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        alts = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:  # a name ends here: the longer continuation is tried first, then the end
            return body + "?" if len(alts) > 1 else "(?:" + body + ")?"
        return body

    return build(trie)


# A line that is nothing but base64 (a PEM key's body seen one line at a time, as a grep hit or a window that cut
# the BEGIN line off; a key pasted into a log). Such a line is never evidence of anything else, so it goes whole.
# Digits AND letters required, so a row of dashes or a long word is not taken for one.
# The prefix a log puts before it: up to four `[...]:` labels (`[default1]:[rank5]:`), or a `host:pid:tid [n] ` /
# `12:00:01 INFO:`-like head of at most 60 characters ending in `: `.
_B64_LINE = re.compile(r"(?m)^([ \t]*(?:\[[^\]\n]{0,40}\]:?[ \t]*){0,4}(?:[\w.:/ -]{1,60}?:[ \t]+)?)"
                       r"(?=[A-Za-z0-9+/]*\d)(?=[A-Za-z0-9+/]*[A-Za-z])"
                       r"[A-Za-z0-9+/]{40,}={0,2}[ \t]*$")


class Redactor:
    """Redacts secrets (always) and masks hosts/IPs (with hosts=True), consistently across calls.

    One Redactor per conversation/report: the host map lives as long as it does, so `host-3` means the same node in
    every piece of text it produced, and `unmask` can translate an answer back.
    """

    def __init__(self, *, hosts: bool = False, known_hosts: Iterable[str] = ()) -> None:
        self._hosts = hosts
        self._secrets = 0
        self._forward: dict[str, str] = {}  # real -> placeholder
        self._reverse: dict[str, str] = {}  # placeholder -> real
        self._next = {"host": 1, "ip": 1}
        self._reserved: set[str] = set()  # placeholders spelled literally in some text: never issued
        self._names: set[str] = set()
        self._host_re: re.Pattern[str] | None = None
        for h in known_hosts:
            self._add_name(h.strip(), known=True)

    @property
    def secrets_found(self) -> int:
        """How many secret values were replaced so far (all redact calls together)."""
        return self._secrets

    def redact(self, text: str) -> str:
        """The text with secret values replaced by SECRET_MARK, and hosts/IPs masked when hosts=True."""
        out = _SECRET_RE.sub(self._secret_sub, text) if _may_hold_secret(text) else text
        if len(out) >= 40:
            out = _B64_LINE.sub(self._b64_sub, out)
        if self._hosts:
            out = self._mask_hosts(out)
        return out

    def unmask(self, text: str) -> str:
        """Puts real host names/IPs back where this Redactor's placeholders stand (secrets stay redacted)."""
        if not self._reverse:
            return text
        return _PLACEHOLDER_RE.sub(lambda m: self._reverse.get(m.group(), m.group()), text)

    # --- secrets ---

    def _b64_sub(self, m: re.Match[str]) -> str:
        self._secrets += 1
        return m.group(1) + SECRET_MARK

    def _secret_sub(self, m: re.Match[str]) -> str:
        kind = m.lastgroup  # the outer group of the alternative that matched (it closes last)
        whole = m.group()
        if kind == "pem":
            if m.group("pem_body").strip() == SECRET_MARK:  # already redacted: redacting twice changes nothing
                return whole
            s, e = m.span("pem_body")
            self._secrets += 1
            return whole[: s - m.start()] + _pem_body(m.group("pem_body")) + whole[e - m.start():]
        if kind == "shape":
            self._secrets += 1
            p = _SHAPE_PREFIX.match(whole)
            return (p.group() if p else "") + SECRET_MARK
        group = f"{kind}_val"
        if kind in ("cli", "kv"):
            if _benign(m.group(f"{kind}_name"), m.group(group)):
                return whole
        elif m.group(group) == SECRET_MARK:
            return whole
        s, e = m.span(group)
        self._secrets += 1
        return whole[: s - m.start()] + SECRET_MARK + whole[e - m.start():]

    # --- hosts ---

    def _add_name(self, name: str, *, known: bool = False) -> None:
        """Registers a host name to mask whole-word; placeholders already issued and never-mask names are skipped."""
        if len(name) < 2 or name.lower() in _NEVER_MASK or name in self._reverse or name in self._names:
            return
        if not known and (_is_ip(name) or not re.search(r"[A-Za-z]", name)):
            return  # discovered IPs are caught by the IP patterns; a bare number is no host name
        self._names.add(name)
        self._host_re = None

    def _mask_hosts(self, text: str) -> str:
        for m in _PLACEHOLDER_RE.finditer(text):
            if m.group() not in self._reverse:
                self._reserved.add(m.group())
        for m in _DISCOVER.finditer(text):
            self._add_name(next(g for g in m.groups() if g).rstrip(".-"))
        if self._host_re is None:
            names = _trie_regex(sorted(self._names))
            ips = _IP_RE.pattern
            self._host_re = re.compile(rf"(?P<name>(?<![\w-])(?:{names})(?![\w-]))|{ips}" if names else ips)
        return self._host_re.sub(self._host_sub, text)

    def _host_sub(self, m: re.Match[str]) -> str:
        s = m.group()
        if m.lastgroup == "v4" and s in _NEVER_MASK:
            return s
        if m.lastgroup == "v6" and not _plausible_v6(s):
            return s
        return self._placeholder(s)

    def _placeholder(self, real: str) -> str:
        ph = self._forward.get(real)
        if ph is None:
            kind = "ip" if _is_ip(real) else "host"
            n = self._next[kind]
            while f"{kind}-{n}" in self._reserved:
                n += 1
            ph = f"{kind}-{n}"
            self._next[kind] = n + 1
            self._forward[real] = ph
            self._reverse[ph] = real
        return ph


def redact_secrets(text: str) -> str:
    """Secrets only, with a throwaway Redactor: for one-off text (a Slack message, a report)."""
    return Redactor().redact(text)


_TREE_DEPTH = 64  # reports nest a few levels; deeper is a cycle or hostile data, left as it is
# Leaves with nothing to redact, by exact type: the plain-data fast path of redact_tree tests `type(x) in` this.
_PLAIN_LEAVES = frozenset({int, float, bool, type(None), bytes})


def redact_tree(obj, redactor: Redactor | None = None):
    """A copy of a report with every string in it redacted: dataclasses, pydantic models, dicts (keys too), lists,
    tuples and sets, walked to any depth a report has. Objects with nothing to redact are returned as they are (no
    copy); anything else (numbers, stamps' parts, unknown objects) passes through.

    Why one walk over the report, not a pass per renderer: every output a report can be pasted from (terminal,
    --json, --markdown, --html) is drawn from the same objects, so redacting them once, before any renderer runs,
    covers renderers written later too; and redacting whole values before a renderer crops or wraps them means a
    cut token can never slip past the patterns half-shown.

    Plain dicts and lists (all of `scan --json`: 700 k nodes, 830 k strings on 4,096 ranks) take a fast path that
    handles their strings and numbers inline and copies a container only from its first changed item; it visits
    the same strings in the same order as the general walk (key before value, depth-first), so a host-masking
    Redactor numbers its placeholders the same way."""
    r = redactor or Redactor()
    memo: dict[str, str] = {}  # each distinct string is redacted once (a report repeats its lines and names)
    leaves = _PLAIN_LEAVES
    init_fields: dict[type, tuple[str, ...]] = {}  # a dataclass's fields set by __init__, per class

    def text(v: str) -> str:
        """The redacted string, or `v` itself (not an equal copy seen earlier) when there is nothing to redact."""
        out = memo.get(v)
        if out is None:
            out = memo[v] = r.redact(v)
        return v if out == v else out

    def plain_dict(v: dict, depth: int) -> dict:
        """`v` itself when nothing in it changes, else what dict(walked items) would be (a later equal key wins)."""
        new = None
        for k, x in v.items():
            if type(k) is str:  # text(k), inlined: most strings were seen before, with nothing to redact
                nk = memo.get(k)
                nk = k if nk == k else text(k) if nk is None else nk
            else:
                nk = walk(k, depth)
            t = type(x)
            if t is str:
                nx = memo.get(x)
                nx = x if nx == x else text(x) if nx is None else nx
            else:
                nx = x if t in leaves else walk(x, depth)
            if new is not None:
                new[nk] = nx
            elif nk is not k or nx is not x:  # the first change: copy the unchanged items before it
                new = {}
                for k0, x0 in v.items():
                    if k0 is k:
                        break
                    new[k0] = x0
                new[nk] = nx
        return v if new is None else new

    def plain_list(v: list, depth: int) -> list:
        """`v` itself when nothing in it changes, else a new list of the walked items."""
        new = None
        for i, x in enumerate(v):
            t = type(x)
            nx = text(x) if t is str else x if t in leaves else walk(x, depth)
            if new is not None:
                new.append(nx)
            elif nx is not x:
                new = v[:i]
                new.append(nx)
        return v if new is None else new

    def changed_fields(v, names, depth: int) -> dict:
        """The fields of a model or dataclass whose walked value is not the value itself."""
        upd = {}
        for name in names:
            cur = getattr(v, name, None)
            new = cur if type(cur) in leaves else walk(cur, depth)
            if new is not cur:
                upd[name] = new
        return upd

    def walk(v, depth: int):
        t = type(v)
        if t is str:
            return text(v)
        if t in leaves:
            return v
        if isinstance(v, str):  # a str enum (Role) or other subclass
            return text(v)
        if v is None or isinstance(v, (int, float, bool, bytes)) or depth > _TREE_DEPTH:
            return v
        depth += 1
        if t is dict:
            return plain_dict(v, depth)
        if t is list:
            return plain_list(v, depth)
        if isinstance(v, dict):
            items = [(walk(k, depth), walk(x, depth)) for k, x in v.items()]
            if all(a is k and b is x for (a, b), (k, x) in zip(items, v.items())):
                return v
            try:
                return type(v)(items)
            except TypeError:
                return dict(items)
        if isinstance(v, (list, tuple, set, frozenset)):
            items = [x if type(x) in leaves else walk(x, depth) for x in v]
            if all(a is b for a, b in zip(items, v)):
                return v
            if isinstance(v, tuple) and hasattr(v, "_fields"):  # a NamedTuple
                return type(v)(*items)
            return type(v)(items)
        fields = getattr(t, "model_fields", None)  # pydantic
        if isinstance(fields, dict) and hasattr(v, "model_copy"):
            upd = changed_fields(v, fields, depth)
            return v.model_copy(update=upd) if upd else v
        if isinstance(v, type):
            return v
        names = init_fields.get(t)
        if names is None:  # () for a type that is no dataclass
            names = init_fields[t] = (tuple(f.name for f in dataclasses.fields(v) if f.init)
                                      if dataclasses.is_dataclass(v) else ())
        if names:
            upd = changed_fields(v, names, depth)
            if not upd:
                return v
            try:
                return dataclasses.replace(v, **upd)
            except (TypeError, ValueError):  # an __init__ that takes other arguments: set the fields on a copy
                c = copy.copy(v)
                for k, x in upd.items():
                    object.__setattr__(c, k, x)
                return c
        return v

    return walk(obj, 0)
