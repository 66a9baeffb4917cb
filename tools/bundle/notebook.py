"""Structured files read as the console they hold, line for line with the file: a Jupyter notebook's outputs, and
a JSON-lines log's escaped strings.

Why: a run started from a notebook (Colab, Kaggle, a cluster's JupyterHub, Accelerate's `notebook_launcher`) keeps
its console in the cells' outputs: the stream text a cell printed (`"name": "stderr"`, `"text": [...]`), the
traceback of the error that stopped it (`"output_type": "error"`, `"traceback": [...]`) and what a cell returned
(`"text/plain": [...]`). Users attach the .ipynb itself. Its code cells quote the very messages we look for
(`raise RuntimeError("NCCL error ...")`), so the file is not read as it is: only the strings of those output
lists are.

How, without a JSON parse of the whole file: nbformat writes notebooks pretty-printed (`json.dump(..., indent=1)`,
nbformat/v4/nbjson.py; Jupyter, JupyterLab, VS Code and Colab's download all do), one list element a line. Each
line of the file becomes one line of output: an output string decoded (JSON escapes, ANSI colours out, its own
line breaks as two spaces), every other line empty. So `notebook.ipynb:123` in a report is line 123 of the file as
an editor shows it, and a citation re-reads through the same conversion. A notebook written on one line (minified)
has no such lines: it reads as empty, and the walk says why (tools/bundle/walk.py).
"""

from __future__ import annotations

import json
import re

from trainlog_debugger.tools.lines import LINE_BREAK
from trainlog_debugger.tools.lines.ansi import strip_ansi

# a line that opens a list under a key (`"text": [`, `"traceback": [`, `"text/plain": [`, `"outputs": [`)
_OPEN_LIST = re.compile(rb'\s*"((?:[^"\\]|\\.){1,64})":\s*\[\s*$')
_CLOSE_LIST = re.compile(rb"\s*\],?\s*$")
_OPEN_ANONYMOUS = re.compile(rb"\s*\[\s*$")
_PRINTED_KEY = re.compile(rb'\s*"(?:text|traceback|text/plain)":\s*"')
# a list element that is a string, and a key whose value is a string on the same line
_STRING = re.compile(rb'\s*("(?:[^"\\]|\\.)*")\s*,?\s*$')
_KEY_STRING = re.compile(rb'\s*"((?:[^"\\]|\\.){1,64})":\s*("(?:[^"\\]|\\.)*")\s*,?\s*$')
# the output lists whose strings are what the run printed (nbformat v4: stream `text`, error `traceback`,
# execute_result / display_data `text/plain`); v3's `text` in outputs is the same
_PRINTED = (b"text", b"traceback", b"text/plain")
LINE_MAX = 4 << 20  # a longer line (an image as base64) is dropped, not held: memory stays bounded

NOTEBOOK_HEAD = re.compile(rb'^\s*\{\s*"(?:cells|metadata|nbformat|worksheets)"\s*:|"nbformat"\s*:\s*\d', re.M)


def looks_like_notebook(head: bytes) -> bool:
    """Whether a file's first bytes are an nbformat notebook's JSON (a `.ipynb` that is not is program source or
    junk, and is skipped as before)."""
    return _OPENS_OBJECT.match(head) is not None and NOTEBOOK_HEAD.search(head) is not None


def _text(literal: bytes) -> str | None:
    try:
        s = json.loads(literal)
    except ValueError:
        return None
    if not isinstance(s, str):
        return None
    s = strip_ansi(s)
    return s.rstrip("\n").replace("\r\n", "  ").replace("\n", "  ").replace("\r", "  ")


class NotebookLines:
    """The per-line conversion, fed one line of the file at a time (without its b"\\n"): what a stream converter
    (tools.bundle.source) writes for it. Its state is the stack of open lists (keys), nothing else."""

    def __init__(self) -> None:
        self.stack: list[bytes] = []

    def line(self, raw: bytes) -> bytes:
        if len(raw) > LINE_MAX:
            return b""
        m = _OPEN_LIST.match(raw)
        if m is not None:
            self.stack.append(m.group(1))
            return b""
        if _CLOSE_LIST.match(raw):
            if self.stack:
                self.stack.pop()
            return b""
        if _OPEN_ANONYMOUS.match(raw):  # a list inside a list (a plot's `"z": [` rows): its `],` closes it, not ours
            self.stack.append(b"")
            return b""
        in_outputs = b"outputs" in self.stack
        if not in_outputs:
            return b""
        m = _STRING.match(raw)
        if m is not None and self.stack and self.stack[-1] in _PRINTED:
            s = _text(m.group(1))
            return s.encode("utf-8", "replace") if s else b""  # a lone surrogate (a split emoji) shown as ?
        m = _KEY_STRING.match(raw) if _PRINTED_KEY.match(raw) else None  # the key first: an image's base64 is not read
        if m is not None and m.group(1) in _PRINTED:  # `"text": "one string"` (a writer that does not split lines)
            s = _text(m.group(2))
            return s.encode("utf-8", "replace") if s else b""
        return b""


# -- JSON lines --------------------------------------------------------------------------------------------------
# A structured logger (python-json-logger, structlog, loguru's `serialize`, Docker's json-file driver, Fluent Bit)
# writes one JSON object a line, and a traceback is one string field: `"exc_info": "Traceback (most recent call
# last):\n  File ...\nRuntimeError: CUDA error: an illegal memory access was encountered\n"`. As it is on disk, the
# exception's class follows the two characters `\n`, so no word boundary opens it and no message pattern matches.
# Such a file is read with its strings' escapes decoded in place: a line break as LINE_BREAK (JSON strings hold no
# raw ones, so the file's lines stay its lines; the traceback reader splits a line on it: tools/sources/generic.py
# final_exception), a tab as a space, `\"` and `\\` as the characters, an ASCII `\u00XX` as its character, an ANSI
# colour as nothing.

_ESCAPE = re.compile(rb'\\(?:u001[bB]\[[0-9;?]{0,32}[A-Za-z]|u00([2-7][0-9a-fA-F])|([nrt])|(["\\/]))')
_JSON_LINE = re.compile(rb"[ \t]*\{[^\n]*\}[ \t]*,?\r?$", re.M)


_BREAK = LINE_BREAK.encode()


def _unescaped(m: re.Match) -> bytes:
    if m.group(3) is not None:
        return m.group(3)
    if m.group(2) is not None:
        return b" " if m.group(2) == b"t" else _BREAK if m.group(2) == b"n" else b""
    if m.group(1) is not None:
        return bytes([int(m.group(1), 16)])
    return b""  # an ANSI escape


# Docker's json-file driver writes each line a process printed as `{"log":"<line>\n","stream":"stderr","time":"..."}`
# (moby daemon/logger/jsonfilelog, keys in that order): the line itself is what the process printed, read as such
# (the record's own `\n` and its envelope go; the process's lines carry their own times and prefixes)
_DOCKER_TAIL = re.compile(rb'", ?"stream": ?"(?:stdout|stderr)", ?"time": ?"[^"\n]{0,64}"\}')


def unescape_json_strings(data: bytes) -> bytes:
    """`data` (whole lines of a JSON-lines file) with its strings' escapes decoded in place (see above), Docker's
    envelope taken off its records. Why not a callback per escape first: a line break, a tab and a quote are most of
    a log's escapes, and C-level replaces decode them at memory speed; the callback runs only where a `\\` or a
    `\\u` is left."""
    if b'{"log":' in data:  # (a raw `{"log":"` opens a record: inside a string its quotes would be escaped)
        data = _DOCKER_TAIL.sub(b"", data.replace(b'{"log":"', b"").replace(b'{"log": "', b"")).replace(b"\\n\n", b"\n")
    if b"\\" not in data:
        return data
    if b"\\\\" not in data:  # no escaped backslash: each `\x` below is one escape, replaced without a callback
        data = data.replace(b"\\n", _BREAK).replace(b"\\t", b" ").replace(b"\\r", b"").replace(b'\\"', b'"') \
            .replace(b"\\/", b"/")
        if b"\\" not in data:
            return data
    return _ESCAPE.sub(_unescaped, data)


_OPENS_OBJECT = re.compile(rb"[ \t\r\n]{0,256}\{")


# a log record's keys (Docker's `log`, a logger's `message`/`msg`/`level`/`levelname`/`severity`, a traceback's
# `exc_info`/`stack_trace`/`traceback`): a dataset's records (`messages`, `text`, `prompt`) are not a log, and their
# strings are not read decoded (a quoted traceback in a chat sample is no failure of the job)
_LOG_KEY = re.compile(rb'"(?:log|message|msg|level|levelname|severity|exc_info|exception|stack_trace|traceback|'
                      rb'textPayload)"\s*:')


def looks_like_json_lines(head: bytes) -> bool:
    """Whether a file's head is a JSON-lines log: at least two lines, nine in ten of its non-blank complete lines one
    JSON object each (by their braces; no parse), and a log record's key among them (_LOG_KEY)."""
    if _OPENS_OBJECT.match(head) is None:  # most files: one look (a log line opens with a stamp, a prefix, a word)
        return False
    if _LOG_KEY.search(head) is None:
        return False
    body = head[: head.rfind(b"\n") + 1]
    lines = [x for x in body.split(b"\n") if x.strip()]
    if len(lines) < 2:
        return False
    return len(_JSON_LINE.findall(body)) * 10 >= len(lines) * 9
