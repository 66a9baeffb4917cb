"""Rank sets in the text reports: tools.groups.rank_set (`0-4095 except 901`), cut to a width when it is long.

Why a cut here and not in the JSON: the JSON's range set is exact (a script parses it back); a terminal line at 80
columns cannot hold 5,000 holes, so the text says where it cut and how many ranks the set holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainlog_debugger.tools.groups import rank_set


def rank_text(ranks: Iterable[int], width: int = 60) -> str:
    """`rank_set(ranks)`, cut at a comma to at most about `width` characters: `0-9,12,14,… (2,048 ranks)`."""
    rs = sorted({r for r in ranks if isinstance(r, int)})
    s = rank_set(rs)
    if len(s) <= width:
        return s
    cut = s.rfind(",", 0, max(width - 16, 8))
    head = s[:cut] if cut > 0 else s[:max(width - 16, 8)]
    return f"{head},… ({len(rs):,} ranks)"
