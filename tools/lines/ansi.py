"""Terminal escapes (ECMA-48, "ANSI") in captured output: one definition for every reader that takes them out.

Why one place: colour and cursor codes reach logs from colored loggers, rich, tqdm and notebook tracebacks, and each
reader that strips them (rank attribution, format detection, notebooks, the rank diff's masks, hardware tables, the
agent's tool output) had its own slightly different regex, so one reader saw `\\x1b[1;31m` gone where another kept
half of a cursor move. A CSI sequence is ESC `[`, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F and one
final byte 0x40-0x7E (colours end in `m`, cursor moves in `A`-`H`, erases in `J`/`K`); an OSC sequence (a terminal
title, a hyperlink) is ESC `]` up to BEL or ST (ESC `\\`).
"""

from __future__ import annotations

import re

_CSI = r"\x1b\[[0-?]*[ -/]*[@-~]"
_OSC = r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"

ANSI = re.compile(f"{_CSI}|{_OSC}")
ANSI_BYTES = re.compile(f"{_CSI}|{_OSC}".encode())


def strip_ansi(s: str) -> str:
    """`s` without its terminal escapes (the common case, none, costs one `in`)."""
    return ANSI.sub("", s) if "\x1b" in s else s
