"""Pure statistics for step times: slow outliers among ranks (robust z), level shifts in a series (change points).

Why robust and why two bars: step times are heavy-tailed (checkpoints, evaluation, one rank's hiccup), so a mean and
standard deviation would be dragged by the very spikes we must ignore. An outlier needs a robust z (median and MAD)
above Z_MAX AND a real gap (≥ MIN_GAP slower than the median): with a tiny MAD noise alone would score a huge z.
A change point needs a ≥ MIN_SHIFT level shift held for ≥ MIN_RUN points on each side (a burst is not a
regression). No I/O, no knowledge of log formats: tests feed these plain lists.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from itertools import accumulate

__all__ = ["robust_outliers", "change_points", "slowdown", "Z_MAX", "MIN_GAP", "MIN_SHIFT", "MIN_RUN"]

Z_MAX, MIN_GAP = 3.5, 0.10      # outlier: robust z above Z_MAX and at least MIN_GAP slower than the group median
MIN_SHIFT, MIN_RUN = 0.20, 5    # change point: ≥ 20 % level shift, ≥ 5 points each side
NAN = float("nan")


def slowdown(before: float, after: float, higher_is_slower: bool) -> float:
    """Relative change from `before` to `after`, positive when it got slower (+0.6 = 60 % slower)."""
    return (after - before) / before if higher_is_slower else (before - after) / before


def robust_outliers(values: dict[int, float], *, higher_is_slower: bool = True, z_max: float = Z_MAX,
                    min_gap: float = MIN_GAP) -> list[tuple[int, float, float, float]]:
    """[(key, z, gap, median)] for the values that are slow outliers: robust z = |x − median| / (1.4826·MAD) above
    `z_max` (inf when MAD is 0 and x differs) AND at least `min_gap` slower than the median (relative)."""
    if len(values) < 3:
        return []
    xs = list(values.values())
    med = statistics.median(xs)
    mad = statistics.median([abs(x - med) for x in xs])
    if med == 0:
        return []
    out = []
    for k, x in values.items():
        gap = (x - med) / abs(med) if higher_is_slower else (med - x) / abs(med)
        if gap < min_gap:
            continue
        z = abs(x - med) / (1.4826 * mad) if mad > 0 else math.inf
        if z > z_max:
            out.append((k, z, gap, med))
    return sorted(out, key=lambda t: -t[2])


def _running_median(x: Sequence[float], w: int = 5) -> list[float]:
    h, n = w // 2, len(x)
    return [sorted(x[max(0, i - h):min(n, i + h + 1)])[(min(n, i + h + 1) - max(0, i - h)) // 2] for i in range(n)]


def _best_split(x: Sequence[float], lo: int, hi: int, min_run: int) -> int | None:
    """The split of x[lo:hi] that minimises the two segments' summed squared error (prefix sums, one pass)."""
    seg = x[lo:hi]
    m = len(seg)
    if m < 2 * min_run:
        return None
    mu = sum(seg) / m
    c = [v - mu for v in seg]
    s = list(accumulate(c, initial=0.0))
    q = list(accumulate((v * v for v in c), initial=0.0))
    tot, totq = s[m], q[m]
    best, best_k = math.inf, None
    for k in range(min_run, m - min_run + 1):
        s1, s2 = s[k], tot - s[k]
        sse = q[k] - s1 * s1 / k + (totq - q[k]) - s2 * s2 / (m - k)
        if sse < best:
            best, best_k = sse, k
    return None if best_k is None else lo + best_k


def _level(a: Sequence[float], b: Sequence[float], min_shift: float, min_run: int) -> tuple[bool, float, float, float]:
    """(accepted, median a, median b, relative shift b vs a): ≥ min_shift apart, each side ≥ min_run points of
    which ≥ 80 % lie on its own side of the midpoint (a sustained change, not a burst)."""
    if len(a) < min_run or len(b) < min_run:
        return False, NAN, NAN, 0.0
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= 0:
        return False, ma, mb, 0.0
    rel = (mb - ma) / ma
    if abs(rel) < min_shift:
        return False, ma, mb, rel
    mid = (ma + mb) / 2
    up = mb > ma
    fa = sum(1 for v in a if (v < mid) == up) / len(a)
    fb = sum(1 for v in b if (v > mid) == up) / len(b)
    return fa >= 0.8 and fb >= 0.8, ma, mb, rel


def change_points(x: Sequence[float], *, min_shift: float = MIN_SHIFT, min_run: int = MIN_RUN,
                  depth: int = 4, max_points: int = 2000) -> list[tuple[int, float, float]]:
    """Level shifts of `x`: [(k, median before, median after)], k = first index of the new level. Candidates come
    from binary segmentation (best single split, recursively, `depth` levels) on a running median; candidates that
    do not hold against their neighbours (see _level) are dropped, weakest first; each kept split is then moved to
    the exact step on the raw values and checked there again. Series longer than `max_points` are searched and
    pruned on block medians first."""
    n = len(x)
    if n < 2 * min_run:
        return []
    h = (min_run + 1) // 2      # a kept split has ≥ h points at/above the higher median and ≥ h at/below the lower
    srt = sorted(x)
    if srt[h - 1] > 0 and srt[-h] < srt[h - 1] * (1 + min_shift):
        return []
    blk = max(1, math.ceil(n / max_points))
    base = [sorted(x[i:i + blk])[(min(n, i + blk) - i) // 2] for i in range(0, n, blk)] if blk > 1 else x
    run = max(2, math.ceil(min_run / blk)) if blk > 1 else min_run
    sm = _running_median(base) if len(base) >= 3 * run else list(base)
    cands: set[int] = set()

    def rec(lo: int, hi: int, d: int) -> None:
        k = _best_split(sm, lo, hi, run) if d > 0 else None
        if k is not None:
            cands.add(k)
            rec(lo, k, d - 1)
            rec(k, hi, d - 1)

    rec(0, len(sm), depth)
    cps = _prune(base, sorted(cands), min_shift, run)
    if blk > 1:         # back to raw indices: the exact step, then the same test on the raw values
        cps = [_refine(x, 0, min(n - 1, k * blk), n, blk) for k in cps]
        cps = _prune(x, sorted(set(cps)), min_shift, min_run)
    out = []
    bounds = [0] + cps + [n]
    for j, k in enumerate(cps):
        k = _refine(x, bounds[j], k, bounds[j + 2], 3)
        bounds[j + 1] = k
        _, ma, mb, _ = _level(x[bounds[j]:k], x[k:bounds[j + 2]], min_shift, min_run)
        out.append((k, ma, mb))
    return out


def _prune(x: Sequence[float], cps: list[int], min_shift: float, min_run: int) -> list[int]:
    """Drop the split that fails _level against its neighbours by the most, until all hold."""
    n = len(x)
    while cps:
        bounds = [0] + cps + [n]
        worst = None
        for j, k in enumerate(cps):
            ok, _, _, rel = _level(x[bounds[j]:k], x[k:bounds[j + 2]], min_shift, min_run)
            if not ok and (worst is None or abs(rel) < worst[0]):
                worst = (abs(rel), k)
        if worst is None:
            break
        cps.remove(worst[1])
    return cps


def _refine(x: Sequence[float], lo: int, k: int, hi: int, w: int) -> int:
    """The exact step near k: the split within ±w that misplaces the fewest points of the window around it."""
    a, b = x[max(lo, k - 3 * w):k], x[k:min(hi, k + 3 * w)]
    if not a or not b:
        return k
    ma, mb = statistics.median(a), statistics.median(b)
    mid, up = (ma + mb) / 2, mb > ma
    w0, w1 = max(lo + 1, k - 3 * w), min(hi - 1, k + 3 * w)
    best, best_i = None, k
    for i in range(max(w0, k - w), min(w1, k + w) + 1):
        err = sum(1 for v in x[w0:i] if (v > mid) == up) + sum(1 for v in x[i:w1] if (v < mid) == up)
        key = (err, abs(i - k))
        if best is None or key < best:
            best, best_i = key, i
    return best_i

