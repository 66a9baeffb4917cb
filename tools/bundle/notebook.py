"""A Jupyter notebook read as the log its outputs are, line for line with the file.

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

# a line that opens a list under a key (`"text": [`, `"traceback": [`, `"text/plain": [`, `"outputs": [`)
_OPEN_LIST = re.compile(rb'\s*"((?:[^"\\]|\\.){1,64})":\s*\[\s*$')
_CLOSE_LIST = re.compile(rb"\s*\],?\s*$")
# a list element that is a string, and a key whose value is a string on the same line
_STRING = re.compile(rb'\s*("(?:[^"\\]|\\.)*")\s*,?\s*$')
_KEY_STRING = re.compile(rb'\s*"((?:[^"\\]|\\.){1,64})":\s*("(?:[^"\\]|\\.)*")\s*,?\s*$')
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# the output lists whose strings are what the run printed (nbformat v4: stream `text`, error `traceback`,
# execute_result / display_data `text/plain`); v3's `text` in outputs is the same
_PRINTED = (b"text", b"traceback", b"text/plain")
LINE_MAX = 4 << 20  # a longer line (an image as base64) is dropped, not held: memory stays bounded

NOTEBOOK_HEAD = re.compile(rb'^\s*\{\s*"(?:cells|metadata|nbformat|worksheets)"\s*:|"nbformat"\s*:\s*\d', re.M)


def looks_like_notebook(head: bytes) -> bool:
    """Whether a file's first bytes are an nbformat notebook's JSON (a `.ipynb` that is not is program source or
    junk, and is skipped as before)."""
    return head.lstrip()[:1] == b"{" and NOTEBOOK_HEAD.search(head) is not None


def _text(literal: bytes) -> str | None:
    try:
        s = json.loads(literal)
    except ValueError:
        return None
    if not isinstance(s, str):
        return None
    s = _ANSI.sub("", s) if "\x1b" in s else s
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
        in_outputs = b"outputs" in self.stack
        if not in_outputs:
            return b""
        m = _STRING.match(raw)
        if m is not None and self.stack and self.stack[-1] in _PRINTED:
            s = _text(m.group(1))
            return s.encode("utf-8", "surrogateescape") if s else b""
        m = _KEY_STRING.match(raw)
        if m is not None and m.group(1) in _PRINTED:  # `"text": "one string"` (a writer that does not split lines)
            s = _text(m.group(2))
            return s.encode("utf-8", "surrogateescape") if s else b""
        return b""
