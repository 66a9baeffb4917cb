"""Rank lists as people write them: `0-3,7` for [0, 1, 2, 3, 7], and back (srun task lists, report rows)."""

from __future__ import annotations


def ranks_str(ranks, cap: int = 12) -> str:
    """Compact rank ranges: [0,1,2,3,7] → '0-3,7'; long lists are cut and say how many ranks they hold."""
    if not ranks:
        return "-"
    rs = sorted(set(ranks))
    parts, start, prev = [], rs[0], rs[0]
    for r in rs[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    if len(parts) > cap:
        return ",".join(parts[:cap]) + f",… ({len(rs)} ranks)"
    return ",".join(parts)


def parse_ranges(spec: str, limit: int = 100_000) -> list[int]:
    """'8-12,14-15' → [8, 9, 10, 11, 12, 14, 15]; malformed parts are ignored, huge ranges refused."""
    out: list[int] = []
    for part in spec.split(","):
        a, sep, b = part.strip().partition("-")
        if sep and a.isdecimal() and b.isdecimal() and 0 <= int(b) - int(a) < limit:
            out.extend(range(int(a), int(b) + 1))
        elif not sep and a.isdecimal():
            out.append(int(a))
    return out
