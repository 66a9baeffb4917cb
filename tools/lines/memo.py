"""One bounded memo for the per-line caches (attributions made, stripped lines, line templates).

Why one: each cache is a dict keyed by what a line holds, filled on a miss and cleared whole when full, so a
process that reads a million distinct lines keeps at most `cap` of them; three modules wrote that same dance.
Cleared, not evicted one by one: the lines of a bundle repeat in runs (a rank's lines, a cascade's copies), and
an LRU's bookkeeping per hit would cost more than the misses it saves.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["remember"]


def remember(cache: dict[K, V], key: K, make: Callable[[K], V], cap: int) -> V:
    """`cache[key]`, made with `make(key)` on a miss; the cache is emptied first when it holds `cap` entries."""
    got = cache.get(key)
    if got is None:
        if len(cache) >= cap:
            cache.clear()
        got = cache[key] = make(key)
    return got
