"""How every text report meets the screen (issue 29): one discipline for `ask`, `scan`, `nccl`, `grep`, `steps`,
`diff`, `fr` and `ais`.

On a terminal nothing is wider than the terminal:
- a sentence (`why:`, a note, a recommendation) is wrapped at word boundaries with a hanging indent;
- a summary beside its citation (`trigger: ...  [file:line]`) is cut (`…`) with the citation counted, so the
  citation is always whole and on the same line;
- a raw log line (the proof) is wrapped, never cut, with a hanging indent under its `file:line`; a line so long
  that it would fill the screen shows the window around its decisive words (the part a catalog pattern matched),
  with the cut said;
- `file:line` is never split (it holds no space; only a token wider than the whole terminal is folded).
Piped output (a file, `less`, `grep`) is never cut and never wrapped: one line per line, as before.

Why one module: each renderer used to pick its own width (`short(text, 140)`, `no_wrap=True, overflow=ellipsis`),
so at 80 columns some lines overflowed and the terminal broke them mid-token, and in a pipe some were still cut.
"""

from __future__ import annotations

import textwrap

MAX_PROOF_ROWS = 8  # a raw line wrapped over more rows than this shows the window around its decisive words
MIN_ROOM = 24       # a summary gets at least this many columns; with less its citation goes under it


def width(console) -> int | None:
    """The columns to fit, or None for piped output (never cut, never wrapped)."""
    return console.width if console.is_terminal else None


def wrap(text: str, cols: int | None, hang: int | None = None) -> list[str]:
    """`text` as the rows a terminal of `cols` columns shows, wrapped at spaces with a hanging indent (`hang`
    columns; default: the text's own indent + 2). `cols` None: the text as it is, one row."""
    text = text.replace("\r", "␍")
    if cols is None or len(text) <= cols:
        return [text]
    lead = len(text) - len(text.lstrip(" "))
    hang = lead + 2 if hang is None else hang
    hang = min(hang, max(cols // 3, 2))
    return textwrap.wrap(text, width=cols, subsequent_indent=" " * hang, break_long_words=True,
                         break_on_hyphens=False, replace_whitespace=False, drop_whitespace=True) or [text]


def sentence(console, text: str, style: str | None = None, hang: int | None = None) -> None:
    """A sentence, wrapped to the terminal with a hanging indent (`why: ...`, `missing: ...`)."""
    for row in wrap(text, width(console), hang):
        console.print(row, markup=False, highlight=False, style=style, soft_wrap=True)


def fitted(console, prefix: str, summary: str, suffix: str = "", style: str | None = None) -> None:
    """`prefix` + `summary` + `suffix` on one row: the summary cut (`…`) so that the row fits with its suffix (a
    `[file:line]`) whole; when fewer than MIN_ROOM columns are left for it, the summary is wrapped and the suffix
    goes on a row of its own under it. Piped: the whole row."""
    cols = width(console)
    row = f"{prefix}{summary}{suffix}"
    if cols is None or len(row) <= cols:
        console.print(row, markup=False, highlight=False, style=style, soft_wrap=True)
        return
    room = cols - len(prefix) - len(suffix)
    if room >= MIN_ROOM:
        console.print(f"{prefix}{summary[:room - 1]}…{suffix}", markup=False, highlight=False, style=style,
                      soft_wrap=True)
        return
    sentence(console, prefix + summary, style)
    if suffix.strip():
        sentence(console, " " * (len(prefix) - len(prefix.lstrip(" ")) + 4) + suffix.strip(), style)


def proof(console, prefix: str, text: str, style: str | None = "dim", *, rows: int = MAX_PROOF_ROWS) -> None:
    """A raw log line under its `prefix` (`  file:line  `): wrapped with a hanging indent, never cut; past `rows`
    rows only the window around its decisive words is shown, the cut marked `…` and said. Piped: whole."""
    text = text.strip()
    cols = width(console)
    if cols is not None:
        hang = min(len(prefix) - len(prefix.lstrip(" ")) + 4, cols // 3)
        room = max(cols - hang, 20)
        if len(prefix) + len(text) > rows * room:  # past `rows` rows: the decisive part, the cut said
            text = _window(text, rows * room - len(prefix) - 2 * len(" …[1,000,000 chars]"))
    for row in wrap(prefix + text, cols, None if cols is None else min(len(prefix) - len(prefix.lstrip(" ")) + 4,
                                                                       cols // 3)):
        console.print(row, markup=False, highlight=False, style=style, soft_wrap=True)


def _window(text: str, keep: int) -> str:
    """`keep` characters of a long line around its decisive words (where a catalog pattern matches, else its
    end: a log line says what happened last), with `…` where it was cut and how much."""
    keep = max(keep, 80)
    at = decisive_at(text)
    start = max(0, min(at - keep // 3, len(text) - keep))
    end = min(len(text), start + keep)
    head = f"…[{start:,} chars] " if start else ""
    tail = f" …[{len(text) - end:,} chars]" if end < len(text) else ""
    return head + text[start:end] + tail


def decisive_at(text: str) -> int:
    """Where in a line its decisive words start: the earliest match of a specific catalog pattern (not a
    catch-all), else the end of the line."""
    from trainlog_debugger.tools.sources import patterns
    best = None
    for p in patterns():
        if p.fallback:
            continue
        m = p.search(text)
        if m is not None and (best is None or m.start() < best):
            best = m.start()
    return best if best is not None else max(len(text) - 1, 0)
