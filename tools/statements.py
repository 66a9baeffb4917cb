"""Each statement checked against the lines it cites, before it is shown (issue 29).

Why: a sentence written from a rule's template can say more than its line. A launcher line `Sending process 4193
closing signal SIGHUP` was told as "launcher sent SIGTERM", a `retrying 4/5` line was cited for "retries ran out
(5/5)", a line with no rank gave "CUDA error on rank None". Rules should write the right words, and they are fixed
where they do not; this is the last check, in one place, on every chain step, timeline entry and alternative:

- **signals**: the signals a statement names (`SIGTERM`, `SIGTERM/SIGINT/SIGHUP`) must be the ones its lines hold,
  by name or by number where the line says it is a signal (`Received 1 death signal`, `killed by signal 9`,
  torchrun's `exitcode: -9`). Alternatives are narrowed to the one the line holds; a contradiction is replaced;
- **retry figures**: an `(a/b)` figure of a sentence about retries must be one its lines print, else it is left
  out (the sentence then says what the line supports);
- **no `None`**: a rank, node or count the code did not know is left out, never printed as Python's `None`.

A statement whose lines name no signal or figure is not touched: there is nothing to check it against. What was
changed is returned, so the caller can say it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainlog_debugger.tools.lines.signals import NAME, line_signals

__all__ = ["checked_statement"]

_GROUP = re.compile(NAME.pattern + r"(?:\s*/\s*" + NAME.pattern + r")*")
_FIGURE = re.compile(r"\b\d{1,6}/\d{1,6}\b")
_PAREN_FIGURE = re.compile(r"\s*\((\d{1,6}/\d{1,6})\)")
_NONE = re.compile(r"(?: on| of| from)? (?:rank|node|ranks|rank\(s\))\s+None\b|\bNone\b(?= ranks?\b)")


def checked_statement(text: str, lines: Iterable[str]) -> tuple[str, list[str]]:
    """(the statement as its lines support it, what was changed). See the module's docstring."""
    lines = [ln for ln in lines if ln]
    changes: list[str] = []
    held = list(dict.fromkeys(s for ln in lines for s in line_signals(ln)))
    if held:
        def fix(m: re.Match) -> str:
            said = [s.strip() for s in m.group(0).split("/")]
            keep = [s for s in said if s in held] or held
            new = "/".join(keep)
            if new != m.group(0):
                changes.append(f"{m.group(0)} → {new} (what the line holds)")
            return new
        text = _GROUP.sub(fix, text)
    if "retr" in text.lower():
        figures = {m.group(0) for ln in lines for m in _FIGURE.finditer(ln)}

        def fig(m: re.Match) -> str:
            if m.group(1) in figures:
                return m.group(0)
            changes.append(f"{m.group(1)} left out (no cited line prints it)")
            return ""
        text = _PAREN_FIGURE.sub(fig, text)
    if "None" in text:
        new = _NONE.sub("", text)
        if new != text:
            changes.append("an unknown rank or node left out (was printed as None)")
            text = new
    return text, changes
