"""Rank lists as people write them: `0-3,7` for [0, 1, 2, 3, 7], and back (srun task lists, report rows); and the
bounds every number read from a log passes before it sizes anything.

Why bounds live here: a world size, a rank, an NCCL `nranks` or a sequence number is text in a file that may come
from a crashed job or a stranger. `range(world_size)` over a claimed 10^9 allocates gigabytes; `int()` of a
5,000-digit rank raises (Python's 4,300-digit limit). So a number is read as an int only when it has at most
MAX_DIGITS digits, and a rank or a rank count only when it is below MAX_RANKS (the largest jobs run ~10^5 GPUs); a
claim over the ceiling is an *implausible claim*: kept as text, reported with its line, never used for sizing.
"""

from __future__ import annotations

import re

MAX_RANKS = 1_000_000  # ranks per job: a sane ceiling for any count that sizes a per-rank list
MAX_DIGITS = 20  # fits uint64 (ns timestamps have 19 digits): longer digit strings are no counter's output


def bounded_int(text, ceiling: int | None = None) -> int | None:
    """`text` as an int when it is a plain decimal of at most MAX_DIGITS digits (and below `ceiling`, if given);
    None otherwise, never an exception: the caller reports the implausible value instead of sizing with it."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        v = text
    else:
        t = text.strip() if isinstance(text, str) else ""
        digits = t[1:] if t[:1] in "+-" else t
        if not digits.isdecimal() or len(digits) > MAX_DIGITS or not digits.isascii():
            return None
        v = int(t)
    if abs(v) >= 10 ** MAX_DIGITS or (ceiling is not None and v >= ceiling):
        return None
    return v


def plausible_rank(v) -> bool:
    """A rank (or a rank count) that may size a per-rank structure: an int in [0, MAX_RANKS]."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_RANKS




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
    """'8-12,14-15' → [8, 9, 10, 11, 12, 14, 15]; malformed parts are ignored, huge ranges refused, and the whole
    list holds at most `limit` ranks (a task list of many small ranges is bounded as well as one huge range)."""
    out: list[int] = []
    for part in spec.split(",")[:limit]:
        a, sep, b = part.strip().partition("-")
        lo, hi = bounded_int(a, MAX_RANKS), bounded_int(b, MAX_RANKS) if sep else None
        if sep and lo is not None and hi is not None and 0 <= hi - lo < limit - len(out):
            out.extend(range(lo, hi + 1))
        elif not sep and lo is not None and lo >= 0 and len(out) < limit:
            out.append(lo)
    return out


MAX_HOSTS = 16_384  # hosts a hostlist may expand to: more than any job's allocation


def expand_hostlist(spec: str, limit: int = MAX_HOSTS) -> list[str]:
    """Slurm's hostlist notation, as SLURM_JOB_NODELIST and sinfo print it: 'gpu-h[031-032],cpu7' → ['gpu-h031',
    'gpu-h032', 'cpu7'] (zero padding kept, one bracket per name); at most `limit` names, malformed parts left out."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[\]\s]*)\[([\d,\-]{1,4096})\]([^,\[\]\s]*)|([^,\[\]\s]+)", spec[:65536]):
        if m.group(4):
            out.append(m.group(4))
            continue
        head, body, tail = m.group(1), m.group(2), m.group(3)
        for part in body.split(","):
            a, sep, b = part.partition("-")
            if not a.isdigit() or (sep and not b.isdigit()):
                continue
            lo, hi = int(a), int(b) if sep else int(a)
            if hi < lo or hi - lo >= limit - len(out):
                continue
            out.extend(f"{head}{n:0{len(a)}d}{tail}" for n in range(lo, hi + 1))
        if len(out) >= limit:
            break
    return out[:limit]
