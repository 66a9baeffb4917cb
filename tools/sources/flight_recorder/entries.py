"""Flight-recorder entries as data: their citation text, a normalised form of each, and the per-rank summary the
analysis keeps of a dump (tools.sources.flight_recorder.match reads it; the dump itself is dropped).

Entries differ by torch version (2.3 has one `seq_id`, ≥2.5 `collective_seq_id` and `p2p_seq_id`) and by form (the
JSON form gives `process_group` as a list and `pg_status` values as strings): `_norm` reads them all into one shape,
and `Canon` shares equal values across ranks, so 10,000 ranks × 2000 entries fit in memory.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Any

from trainlog_debugger.tools.ranks import MAX_RANKS, plausible_rank

STATES = ("scheduled", "started", "completed")
_P2P = frozenset({"send", "recv"})


def entry_text(entry: Any) -> str:
    """The citation text of an entry: stable one-line JSON (json.dumps(entry, sort_keys=True, default=str))."""
    try:
        return json.dumps(entry, sort_keys=True, default=str)
    except (TypeError, ValueError):  # non-string keys of mixed types cannot be sorted: stringify them first
        return json.dumps(str_keys(entry), sort_keys=True, default=str)


def str_keys(o: Any) -> Any:
    """Keys as strings, and integers too long to print (Python refuses str() of 4,300+ digits) as their size."""
    if isinstance(o, dict):
        return {as_str(k): str_keys(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [str_keys(v) for v in o]
    if isinstance(o, int) and not isinstance(o, bool) and as_int(o) is None:
        return as_str(o)
    return o


_HUGE = 10 ** 20  # as tools.ranks.MAX_DIGITS: a larger integer is no counter, id or ns timestamp


def as_int(x: Any) -> int | None:
    """An int field of a dump, or None: bools, garbage, and integers of more than 20 digits (a dump from a stranger
    may hold 10^5000 where a sequence number belongs) are not numbers to count or size with."""
    if type(x) is int:
        return x if -_HUGE < x < _HUGE else None
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return int(x) if -_HUGE < x < _HUGE else None
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, str) and re.fullmatch(r"\s*-?\d{1,20}\s*", x):
        return int(x)
    if isinstance(x, bytes) and re.fullmatch(rb"\s*-?\d{1,20}\s*", x):
        return int(x)
    return None


def as_str(x: Any, default: str = "") -> str:
    if type(x) is str:
        return x
    if x is None:
        return default
    if isinstance(x, (bytes, bytearray)):
        return bytes(x[:1 << 20]).decode("utf-8", "replace")
    if isinstance(x, int) and not -_HUGE < x < _HUGE:
        return f"<integer of {x.bit_length():,} bits>"
    return str(x)


@lru_cache(maxsize=4096)
def optype(profiling_name: str) -> str:
    """'nccl:all_reduce' → 'all_reduce'; 'nccl:send 0->1' → 'send'."""
    return profiling_name.split(":", 1)[-1].split(" ", 1)[0]


P2P_META = re.compile(r"(send|recv)\s+(\d{1,7})\s*(->|<-)\s*(\d{1,7})\b")
_RANK_NUM = re.compile(r"(?<!\d)-?\d{1,7}(?!\d)")  # a longer number is no rank (tools.ranks.MAX_RANKS)


class Canon:
    """One shared object per distinct value across all dumps (sizes, dtypes, names repeat millions of times), so the
    per-rank summaries stay small and equal values compare by identity."""

    def __init__(self) -> None:
        self.strs: dict[str, str] = {}
        self.d: dict[str, Any] = {}

    def __call__(self, v: Any) -> Any:
        t = type(v)
        if t is str:
            return self.strs.setdefault(v, v)
        if v is None or t is bool or t is int:
            return v
        return self.d.setdefault(f"{t.__name__}:{v!r}", v)   # plain data, depth-bounded by check_plain


@dataclass(slots=True)
class FREntry:
    rank: int
    idx: int                # 1-based index in dump["entries"]: the citation "line"
    pg: str
    desc: str
    pg_id: str | None
    p2p: bool
    seq: int | None
    op: str
    state: str
    retired: bool
    isz: Any
    osz: Any
    idt: Any
    odt: Any
    frames: Any             # kept only while the entry is pending (see summarize)
    created: int | None
    record_id: int | None
    done: bool = False


def _norm(rank: int, idx: int, e: dict, canon: Canon) -> FREntry:
    op = canon(as_str(e.get("profiling_name"), "?"))
    pgt = e.get("process_group")
    pg_id = e.get("pg_id")
    if isinstance(pgt, (list, tuple)) and len(pgt) >= 1:
        pg, desc = as_str(pgt[0]), as_str(pgt[1]) if len(pgt) > 1 else ""
    else:
        pg, desc = as_str(pg_id, "?"), ""
    typ = optype(op)
    if "collective_seq_id" in e or "p2p_seq_id" in e:
        p2p = bool(e["is_p2p"]) if isinstance(e.get("is_p2p"), bool) else typ in _P2P
        seq = as_int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id"))
    else:  # 2.3: one counter, `seq_id`
        p2p, seq = typ in _P2P, as_int(e.get("seq_id"))
    frames = e.get("frames")
    return FREntry(rank, idx, canon(pg), canon(desc), None if pg_id is None else canon(as_str(pg_id)), p2p, seq, op,
               canon(as_str(e.get("state"), "?")), e.get("retired") is True, canon(e.get("input_sizes")),
               canon(e.get("output_sizes")), canon(e.get("input_dtypes")), canon(e.get("output_dtypes")),
               frames if type(frames) is list else None, as_int(e.get("time_created_ns")), as_int(e.get("record_id")))


def _ranks_of(v: Any) -> list[int] | None:
    """pg_config ranks: a string like "[0, 1, 2, 3]" (or a list); empty/garbage → None."""
    if isinstance(v, (str, bytes)):
        out = [int(x) for x in islice(_RANK_NUM.findall(as_str(v)), MAX_RANKS + 1)]
    elif isinstance(v, (list, tuple)):
        out = [i for i in map(as_int, islice(v, MAX_RANKS + 1)) if i is not None]
    else:
        return None
    return sorted(r for r in set(out) if plausible_rank(r)) or None


def pg_config(dump: dict) -> dict[str, tuple[str, list[int] | None]]:
    cfg = dump.get("pg_config")
    out: dict[str, tuple[str, list[int] | None]] = {}
    if isinstance(cfg, dict):
        for key, v in cfg.items():
            if isinstance(v, dict):
                name = as_str(v.get("name")) or as_str(key)
                out[name] = (as_str(v.get("desc")), _ranks_of(v.get("ranks")))
    return out


def _pg_status(dump: dict) -> dict[str, dict[str, int]]:
    st = dump.get("pg_status")
    out: dict[str, dict[str, int]] = {}
    if isinstance(st, dict):
        for pg_id, v in st.items():
            if isinstance(v, dict):
                counters = {as_str(k): as_int(x) for k, x in v.items()}
                out[as_str(pg_id)] = {k: i for k, i in counters.items() if i is not None}
    return out


def compact(v: Any) -> str:
    try:
        return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))
    except (TypeError, ValueError):  # dict keys of mixed types cannot be sorted
        return json.dumps(str_keys(v), sort_keys=True, default=str, separators=(",", ":"))


@dataclass
class RankData:
    """What the analysis keeps of one dump (the dump itself is dropped: 10,000 ranks × 2000 entries must fit)."""

    rank: int
    evs: list[FREntry]
    wrapped: bool                                   # ring buffer lost entries (first record_id > 0, or unknown)
    stateless: bool                                 # no entry ever left 'scheduled' (gloo): `retired` = finished
    cfg: dict[str, tuple[str, list[int] | None]]
    status_by_pg: dict[str, dict[str, int] | None]  # pg name → its pg_status counters (None: unknown, or p2p in it)
    version: str
    newest: FREntry | None


def summarize(rank: int, dump: dict, canon: Canon) -> RankData:
    raw = dump.get("entries")
    entries = raw if isinstance(raw, list) else []
    evs = [_norm(rank, i + 1, e, canon) for i, e in enumerate(entries) if isinstance(e, dict)]
    rids = [e.record_id for e in evs if e.record_id is not None]
    wrapped = bool(evs) and (len(rids) < len(evs) or min(rids) > 0)  # an entry without record_id: unknown
    stateless = bool(evs) and all(e.state == "scheduled" for e in evs) and any(e.retired for e in evs)
    status = _pg_status(dump)
    by_pg: dict[str, list[FREntry]] = defaultdict(list)
    for e in evs:
        by_pg[e.pg].append(e)
    status_by_pg: dict[str, dict[str, int] | None] = {}
    for pg, lst in by_pg.items():
        ids = {e.pg_id for e in lst if e.pg_id is not None}
        has_p2p = any(e.p2p for e in lst)
        status_by_pg[pg] = None if has_p2p or len(ids) != 1 else status.get(next(iter(ids)))  # p2p moves them too
        # done: completed; a later seq of this PG completed here (one stream, in order); pg_status; or retired in
        # a state-less dump
        by_seq: dict[int, list[FREntry]] = defaultdict(list)
        for e in lst:
            if e.p2p:
                e.done = e.state == "completed" or (stateless and e.retired)
            elif e.seq is not None:
                by_seq[e.seq].append(e)
        done_hi = max((s for s, ents in by_seq.items() if all(e.state == "completed" for e in ents)), default=None)
        lc = (status_by_pg[pg] or {}).get("last_completed_collective")
        for s, ents in by_seq.items():
            d = ((done_hi is not None and s <= done_hi) or (lc is not None and s <= lc)
                 or (stateless and all(e.retired for e in ents)))
            for e in ents:
                e.done = d
    for e in evs:
        e.frames = [f for f in e.frames if isinstance(f, dict)] if e.frames and not e.done else None
    return RankData(rank, evs, wrapped, stateless, pg_config(dump), status_by_pg, as_str(dump.get("version"), "?"),
                     evs[-1] if evs else None)
