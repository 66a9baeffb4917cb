"""The things a sentence can name that a log line either shows or does not: ranks, nodes, Xids, signals, errnos,
exit codes, files and bare numbers. The verifier (agent/graph/verify.py) holds every sentence of the agent's answer
to them: a sentence may say anything in words, but each of these it names must stand in a line it rests on.

Why typed entities and not "the quote is in the line": a citation proves that a line exists, not what a sentence
says about it. "rank 3 got SIGKILL" citing

    [default1]:[rank5]: torch.distributed.elastic.multiprocessing.api: Received Signals.SIGTERM death signal

holds a real quote and says two things the line does not show (rank 3, SIGKILL). And "Xid 79 on gpu-node-99, drain
it" names a node no log of the bundle knows. Both are caught the same way: the sentence's entities, each looked up
among the entities of the lines (and, for free text, of the deterministic facts).

Each kind is read the same way from a sentence and from a line (`entities`), with the few spellings the ecosystem
uses for one thing made equal: `SIGKILL`, `Signal 9 (SIGKILL)`, `signal 9` and torchrun's `exitcode: -9` are one
signal; `ENOSPC`, `[Errno 28]` and "No space left on device" one errno; `exit code 137`, `exitcode: 137` and
`Exited with exit code 137` one exit code; `1,024` and `1024` one number. A bare number is held by a text that has
it with no digit next to it ("600000" is in `Timeout(ms)=600000`, not in `6000001`).
"""

from __future__ import annotations

import errno as _errno
import os
import re
import signal as _signal
from functools import cached_property
from typing import Callable, Iterable, Iterator, NamedTuple

_SIGNALS = {s.name: s.value for s in _signal.Signals if s.name.startswith("SIG") and not s.name.startswith("SIG_")}
_SIGNAL_NAMES = {v: k for k, v in sorted(_SIGNALS.items(), reverse=True)}  # SIGABRT before SIGIOT, ...
_ERRNO_CODES = {name: code for code, name in _errno.errorcode.items()}

_RANK = re.compile(r"(?i)\b(?:global )?rank(s|\(s\))?\s*[#:=]?\s*"
                   r"(\d{1,7}(?:\s*(?:-|–|to)\s*\d{1,7})?(?:\s*(?:,|and|or|&)\s*\d{1,7}(?:\s*(?:-|–)\s*\d{1,7})?)*)")
_NOT_GLOBAL = ("local ", "local-", "node ", "-")  # "local rank 3", "node rank 1": not the rank of the job
_IP = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")
_HOST = re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])")
_NAMED_HOST = re.compile(r"(?i)\b(?:node|host|hostname|server|machine)\s*[:=]?\s*([A-Za-z][\w-]*\d[\w-]*)")
# hyphenated words with a digit that are not machines: GPU and NIC models, encodings, architectures, versions,
# model families and sizes (A100-SXM4-80GB, ConnectX-7, utf-8, x86-64, Llama-2-70b, Qwen2-7B, ZeRO-3)
_NOT_HOST = re.compile(r"(?i)^(?:[abhlvt]\d{2,3}|g[hb]\d+|rtx|sxm\d?|pcie|connectx|x86|utf|sha|fp|bf|int|cuda|nccl|cu|"
                       r"py|v\d|gen\d|ib|rdma|roce|nvlink|ddr|hbm|gpt|llama|bert|t5|qwen|mistral|mixtral|gemma|phi|"
                       r"deepseek|falcon|bloom|opt|resnet|vit|ubuntu|rhel|centos|top|zero)(?=[\d-]|$)"
                       r"|-\d+(?:\.\d+)?[bmk]$")
_XID = re.compile(r"(?i)\bxids?\s*(?:\([^)]{0,40}\))?\s*[:#]?\s*(\d{1,3})(?!\d)")
_SIGNAL = re.compile(r"(?i)\b(SIG[A-Z]{2,7})\b")
_SIGNAL_NO = re.compile(r"(?i)\bsignal(?:s)?\s*[:=#]?\s*(\d{1,2})(?!\d)")
_ERRNO = re.compile(r"\b(E[A-Z0-9]{2,14})\b")
_ERRNO_NO = re.compile(r"(?i)\berrno\s*[:=#]?\s*(\d{1,3})(?!\d)")
_EXIT = re.compile(r"(?i)\b(?:exit(?:ed)?|return)(?:[\s_-]*(?:with|code|status|value|exit))*\s*[:=]?\s*(-?\d{1,3})(?!\d)")
_FILE = re.compile(r"(?i)(?<![\w.])(?:[\w.-]*/)*([\w-][\w.-]*\.(?:py|log|out|err|txt|jsonl?|ya?ml|cpp|cu|cc|c|h|hpp|so|pt|"
                   r"pth|ckpt|safetensors|gz|tgz|tar|zip|sh|sbatch|conf|cfg|csv|pkl|bin|pickle))(?![\w-])(?::(\d+))?")
_NUMBER = re.compile(r"(?<![\w.:/-])(\d{1,3}(?:,\d{3})+|\d+)((?:[.:]\d+)*)(?!\d)(?!,\d)(?![A-Za-z_]*\d)")


class Entity(NamedTuple):
    kind: str   # rank node xid signal errno exit file number
    value: str  # normalised: "3", "gpu-node-99", "79", "SIGKILL", "ENOSPC", "137", "train.py", "600000"
    said: str   # as the sentence wrote it: "rank 3", "Xid 79", ...


TYPED = ("rank", "xid", "signal", "errno", "exit")  # looked up by value; the rest by their words


def _typed(text: str, kind: str) -> Iterator[tuple[Entity, tuple[int, int]]]:
    """The entities of one typed kind in `text`, each with the span it takes."""
    if kind == "rank":
        for m in _RANK.finditer(text):
            if text[max(0, m.start() - 6):m.start()].lower().endswith(_NOT_GLOBAL):
                continue
            items = list(re.finditer(r"(\d+)(?:\s*(?:-|–|to)\s*(\d+))?", m.group(2)))
            items = items if m.group(1) else items[:1]  # "rank 3 and 600 seconds" names one rank (and a number)
            span = (m.start(), m.start(2) + items[-1].end())
            for it in items:
                yield from ((Entity("rank", str(int(n)), text[span[0]:span[1]]), span) for n in it.groups() if n)
    rx = {"xid": ((_XID, None),), "signal": ((_SIGNAL, _SIGNALS), (_SIGNAL_NO, _SIGNAL_NAMES)),
          "errno": ((_ERRNO, _ERRNO_CODES), (_ERRNO_NO, _errno.errorcode)), "exit": ((_EXIT, None),)}
    for pattern, known in rx.get(kind, ()):
        for m in pattern.finditer(text):
            raw = m.group(1)
            key: str | int = raw.upper() if raw[:1].isalpha() else int(raw)
            if known is None:
                yield Entity(kind, str(key), m.group(0).strip()), m.span()
            elif key in known:
                name = key if isinstance(key, str) else known[key]
                yield Entity(kind, str(name), m.group(0).strip()), m.span()


def entities(text: str) -> list[Entity]:
    """Every entity `text` names, in order of kind, each once. Typed ones first; a number already part of a typed
    entity (the 3 of "rank 3") is not also a bare number."""
    out: list[Entity] = []
    taken: list[tuple[int, int]] = []

    def add(kind: str, value: str, m: re.Match, group: int = 0) -> None:
        out.append(Entity(kind, value, m.group(0).strip()))
        taken.append(m.span(group) if group else m.span())

    for kind in TYPED:
        for e, span in _typed(text, kind):
            out.append(e)
            taken.append(span)
    for m in _FILE.finditer(text):
        name = m.group(1).lower()
        add("file", f"{name}:{m.group(2)}" if m.group(2) else name, m)
    for m in _IP.finditer(text):
        add("node", m.group(0), m)
    for m in _NAMED_HOST.finditer(text):
        if not _inside(m.span(1), taken) and not _NOT_HOST.search(m.group(1)):
            add("node", m.group(1).lower(), m, 1)
    for m in _HOST.finditer(text):
        if any(c.isdigit() for c in m.group(0)) and not _NOT_HOST.search(m.group(0)) and not _inside(m.span(), taken):
            add("node", m.group(0).lower(), m)
    for m in _NUMBER.finditer(text):
        if not _inside(m.span(), taken):
            out.append(Entity("number", m.group(1).replace(",", "") + m.group(2), m.group(0)))
    seen: set[tuple[str, str]] = set()
    return [e for e in out if (e.kind, e.value) not in seen and not seen.add((e.kind, e.value))]


def _inside(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in taken)


class Haystack:
    """What a set of texts shows: their typed entities (indexed on first use), and the texts themselves for nodes,
    files and numbers (looked up as words, so a node or a number in any spelling of a line counts). `ranks`/`nodes`
    add what is known of a line beyond its words (the rank its file or prefix gives it)."""

    def __init__(self, text: str = "", ranks: Iterable[int | str] = (), nodes: Iterable[str] = ()):
        self.text = text
        self.ranks = {str(r) for r in ranks}
        self.nodes = {n.lower() for n in nodes}
        self._index: dict[str, set[str]] = {}

    @classmethod
    def of(cls, texts: Iterable[str], ranks: Iterable[int] = (), nodes: Iterable[str] = ()) -> Haystack:
        return cls("\n".join(t for t in texts if t), ranks, nodes)

    def _values(self, kind: str) -> set[str]:
        """The values of one typed kind the text names, read on the first lookup of that kind: a sentence that
        names no Xid never costs a pass over the megabytes of a large bundle's facts."""
        if kind not in self._index:
            found = {e.value for e, _ in _typed(self.text, kind)}
            if kind == "signal":  # torchrun's `exitcode: -9` is SIGKILL
                found |= {_SIGNAL_NAMES[-int(v)] for v in self._values("exit") if v.startswith("-")
                          and -int(v) in _SIGNAL_NAMES}
            self._index[kind] = found
        return self._index[kind]

    @cached_property
    def lowered(self) -> str:
        return self.text.lower()

    def holds(self, e: Entity) -> bool:
        if e.kind == "node":
            return e.value in self.nodes or _word(e.value, self.lowered)
        if e.kind == "file":
            return _word(e.value, self.lowered)
        if e.kind == "number":
            return _number(e.value, self.text)
        if e.kind == "rank":
            return e.value in self.ranks or e.value in self._values("rank")
        if e.value in self._values(e.kind):
            return True
        if e.kind == "errno":  # "No space left on device" shows ENOSPC
            return os.strerror(_ERRNO_CODES[e.value]).lower() in self.lowered
        return False


def _found(value: str, text: str, joins: Callable[[str], bool]) -> bool:
    """`value` in `text` with no joining character right before or after it: `gpu-node-9` is not in `gpu-node-99`,
    `600000` not in `6000001`. A find loop, not a regex with lookbehinds: a literal search runs at memory speed over
    the megabytes of a 1,024-rank report."""
    i, n = text.find(value), len(value)
    while i >= 0:
        before, after = text[i - 1:i], text[i + n:i + n + 1]
        if not (before and joins(before)) and not (after and joins(after)):
            return True
        i = text.find(value, i + 1)
    return False


def _in_word(c: str) -> bool:
    return c.isalnum() or c in "_-"


def _word(value: str, lowered: str) -> bool:
    """A node or file name among the words of a lowercased text."""
    return _found(value.lower(), lowered, _in_word)


def _number(value: str, text: str) -> bool:
    alts = {value, f"{int(value):,}"} if value.isdigit() else {value}
    return any(_found(a, text, str.isdigit) for a in alts)


def names(es: Iterable[Entity]) -> str:
    """The entities as a reader would say them: "rank 3, SIGKILL"."""
    return ", ".join(dict.fromkeys(e.said if e.kind not in ("rank",) else f"rank {e.value}" for e in es))
