"""PyTorch flight-recorder (FR) dumps → which collective hung, which rank never joined, which rank disagreed.

On a watchdog timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`) every rank writes one dump, `{prefix}{global_rank}`, prefix
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE` (alias `TORCH_FR_DUMP_TEMP_FILE`), default names `nccl_trace_rank_<N>` (≤2.8) and
`comm_lib_trace_rank_<N>` (≥2.9). Format: ../shared/FORMATS.md §10.2.

Reading (`load_dump`). A dump is a pickle, and unpickling runs whatever the stream asks for, so it is read with a
RESTRICTED unpickler: `find_class` and `persistent_load` refuse everything, which leaves only the opcodes that build
plain containers, numbers, strings, bytes, bools and None (a REDUCE/BUILD/NEWOBJ needs a callable that only
`find_class` could supply). Nothing the stream names is ever imported. The result is then walked once more and must
contain only those plain types, at most MAX_DEPTH deep (the second lock: an EXT opcode served from copyreg's
extension cache would bypass find_class; and the depth bound protects everything downstream that recurses). Input is capped (MAX_DUMP_BYTES). A refused or unreadable dump raises
`DumpRefused` with ONE line ("refused: the pickle asks for posix.system; flight-recorder dumps only contain plain
data": `os.system` pickles as `posix.system` on Linux) and is listed as skipped, never a traceback. The JSON form
(`torch._C._distributed_c10d._dump_nccl_trace_json` / `_dump_fr_trace_json`) is read too; it has no `frames`, gives
`process_group` as a list and `pg_status` values as strings.

Citations. For a binary dump a "line" is an ENTRY: `Evidence.file` = the dump's bundle-relative path,
`Evidence.line` = the 1-based index of the entry in the dump's `entries` list, `Evidence.text` = `entry_text(entry)`
= `json.dumps(entry, sort_keys=True, default=str)` (one line, stable: tuples become lists, bytes their repr).
`verify_entry(path, line, text)` re-reads the dump and checks that rendering.

Analysis (`analyze`), per process group (PG = `process_group[0]`, the pg_name, the same on every rank; members =
GLOBAL ranks from `pg_config[pg_name]["ranks"]`, a string like "[0, 1, 2, 3]"; where pg_config does not list a PG
the members are the ranks that have entries for it, and the report says so). Collectives are matched across ranks by
`collective_seq_id` (2.3: `seq_id`), point-to-point ops separately (pending send/recv pairs, by peer):
- done: state `completed`; or a later seq of the same PG completed on that rank (one stream, in order); or
  `pg_status[pg_id].last_completed_collective >= seq` (≥2.5, PGs with no p2p on that rank); or, in a dump where
  no entry ever left `scheduled` (gloo: no device events), `retired`.
- stuck seq = the lowest seq that some member recorded and did not finish.
- missing ranks = members with a dump and no entry for that seq whose buffer covers it: their newest entry for the PG
  is older (never joined), or there is a gap, or they have no entry for the PG and their ring buffer never wrapped
  (first record_id 0); `pg_status.last_enqueued_collective < seq` confirms. A rank whose OLDEST entry for the PG is
  newer than the seq lost it to the ring buffer: `not_recorded`, never "missing".
- mismatches (FR's own `type_of_mismatch` names) for every seq that several ranks recorded: profiling_name
  (COLLECTIVE_TYPE_MISMATCH), input/output sizes (SIZE_OR_SYNTAX_MISMATCH; not for ops whose sizes differ by design:
  all_to_all*, *_v, scatter inputs, gather outputs), dtypes (COLLECTIVE_DTYPE_MISMATCH), and the state at the stuck
  seq (COLLECTIVE_STATE_MISMATCH, blaming only ranks that are BEHIND the majority). Culprit = the minority value's
  ranks; a tie names nobody.
- culprits = missing ranks (or, when more members are missing than joined, the few that joined alone: an extra
  collective), plus the minority ranks of each mismatch. Ranks with no dump at all are listed, never guessed.

Scale: each dump is loaded, reduced to compact per-rank records (equal values shared across ranks, stack frames kept
only for unfinished entries) and dropped; the few dumps a finding cites are read again for the texts. 128 ranks ×
2000 entries (62 MB of pickles): ~100 MB of memory, ~14 s on the 2-core VM (unpickling ~1/3, the plain-type walk
~1/3, the reduction ~1/3).

Compared with PyTorch's analyzer (`python -m torch.distributed.flight_recorder.fr_trace DIR --prefix
nccl_trace_rank_`, torch 2.13.0+cpu) on the dumps `python tests/test_frdump.py --write-cases DIR` writes:
- never joined, 4 and 128 ranks: same verdict. It prints "Not all ranks joining collective, sequence number: 5 ...
  missing ranks: {3}"; we give missing_ranks [3], culprit 3.
- type / size / dtype mismatch: same seq and same type_of_mismatch. It blames every rank that differs from the
  FIRST rank it reads ("Culprit rank 2; Error type: COLLECTIVE_TYPE_MISMATCH"); we blame the minority. Same
  answer unless rank 0 is the odd one out: then it names ranks 1, 2 and 3, and we name rank 0.
- its state check treats ranks in different states at one seq (the usual picture of a hang: some `started`, some
  `scheduled`) as a mismatch and blames whoever differs from the first rank. We record it and blame only ranks
  BEHIND the majority.
- all completed: it reports nothing and neither do we. Two PGs stuck: both tools report both. We also name the PG
  whose stuck entry is oldest (`first_stuck`).
- ring-buffer truncation (case ring_truncation: ranks 0-1 also run a busy second PG, so their buffers wrapped):
  it keeps only records newer than the newest FIRST record_id of any rank (record ids count all of a rank's PGs, so
  they do not line up across ranks). That drops every record of ranks 2-3, and it reports "missing ranks: {2, 3}"
  at #4, #5 and #6. We decide per PG by seq: only rank 3 is missing, at #6. In case truncated_past_stuck (#3
  fell out of rank 3's buffer) it drops #3 entirely and reports ranks 0-2 missing from #4 and #5. We report #3 stuck,
  ranks 0-2 in it and rank 3 `not_recorded`: never "missing".
- a rank with no dump: it stops with "Missing dump files from ranks {3}"; with --allow-incomplete-ranks it says
  "We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks ({3})". We list
  3 under no_dump_ranks, and note that every dumped rank reached the stuck seq.
- JSON form: it cannot read it (`pickle.load` only, and `int("2.json")` fails on the name); we can.
- real torch 2.13 gloo dumps (tests/fixtures/fr/gloo-2.13): it crashes (KeyError: ('0', 0)), because on 2 of the 4
  ranks pg_config holds one PG with an EMPTY name and no ranks. We fall back to the entries and find that rank 3
  never joined all_reduce #5.
- a malicious pickle: it executes it (`pickle.load`: the test's `touch` ran before it crashed); we refuse it.
"""

from __future__ import annotations

import gc
import io
import json
import operator
import os
import pickle
import re
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import chain, compress
from pathlib import Path
from typing import Any, BinaryIO

from tools.model import Evidence, Finding, Role

MAX_DUMP_BYTES = 256 << 20      # a real dump is KBs to tens of MB (buffer 2000-20000 entries)
MAX_DEPTH = 64                  # dumps nest 5 levels deep; anything deeper is not one
MAX_MISMATCHES = 10             # per PG, earliest first (FR's own --mismatch_cap default)
MAX_CITED = 5                   # evidence lines per finding per role (culprit / majority)
KIND = "fr_dump"
STATES = ("scheduled", "started", "completed")
_RANK = {s: i for i, s in enumerate(STATES)}
_P2P = frozenset({"send", "recv"})
# Ops whose per-rank sizes legitimately differ (FR's Op.match exempts the same ones).
_NO_INPUT_SIZE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "scatter", "all_gather_v",
                            "reduce_scatter_v", "coalesced"})
_NO_OUTPUT_SIZE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "gather", "all_gather_v",
                             "reduce_scatter_v", "coalesced"})
_NO_INPUT_DTYPE = frozenset({"scatter", "broadcast", "_broadcast_oop", "coalesced"})
_NO_OUTPUT_DTYPE = frozenset({"gather", "coalesced"})


class DumpRefused(Exception):
    """A dump we will not (or cannot) read. `str(exc)` is one line, fit for a `skipped` reason."""


# ---- reading -------------------------------------------------------------------------------------------------------


def _one_line(s: str, n: int = 200) -> str:
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", s).strip()
    return s if len(s) <= n else s[: n - 1] + "…"


class _PlainUnpickler(pickle.Unpickler):
    """Admits only what plain opcodes build. Every global (GLOBAL, STACK_GLOBAL, INST, EXT*) goes through
    find_class, every persistent id through persistent_load: both refuse, so no callable ever reaches the stack."""

    def find_class(self, module: str, name: str):  # noqa: D102
        raise DumpRefused(f"refused: the pickle asks for {_one_line(f'{module}.{name}', 120)}; "
                          "flight-recorder dumps only contain plain data")

    def persistent_load(self, pid: Any):  # noqa: D102
        raise DumpRefused("refused: the pickle asks for a persistent object; flight-recorder dumps only contain "
                          "plain data")


_LEAVES = frozenset({str, bytes, bytearray, int, float, bool, type(None)})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_CONTAINERS = _SEQUENCES | {dict}


def _check_plain(obj: Any) -> None:
    """Level by level (no recursion limit to trip; the per-node work runs in C): only plain types, at most
    MAX_DEPTH deep. The restricted unpickler already makes anything else impossible; this is the second lock, and
    the depth bound protects everything downstream that recurses (json, repr)."""
    level, depth = [obj], 0
    is_dict = partial(operator.is_, dict)
    while level:
        depth += 1
        types = list(map(type, level))
        kinds = set(types)
        if not kinds <= _LEAVES | _CONTAINERS:
            bad = next(iter(kinds - _LEAVES - _CONTAINERS))
            raise DumpRefused(f"refused: the dump holds a {bad.__name__}; flight-recorder dumps only contain "
                              "plain data")
        if kinds <= _LEAVES:
            return
        if depth > MAX_DEPTH:
            raise DumpRefused(f"refused: nested more than {MAX_DEPTH} levels deep; not a flight-recorder dump")
        dicts = list(compress(level, map(is_dict, types)))
        seqs = compress(level, map(_SEQUENCES.__contains__, types))
        level = list(chain(chain.from_iterable(dicts), chain.from_iterable(map(dict.values, dicts)),
                           chain.from_iterable(seqs)))


@contextmanager
def _no_gc():
    """Unpickling builds millions of small containers: the cyclic GC would double the time (torch's own loader
    disables it too)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_dump(data: bytes) -> dict:
    """Parse one dump (pickle or JSON form) into plain Python data. Raises DumpRefused (one line) for anything
    else: a pickle that names any global, too big, corrupt, or not a flight-recorder dict."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpRefused(f"refused: {len(data) / (1 << 20):.0f} MiB is over the {MAX_DUMP_BYTES >> 20} MiB cap "
                          "for a flight-recorder dump")
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        raise DumpRefused("empty file (no flight-recorder data)")
    try:
        with _no_gc():
            if head[:1] in (b"{", b"["):
                obj = json.loads(data.decode("utf-8-sig"))
            else:
                obj = _PlainUnpickler(io.BytesIO(data)).load()
            _check_plain(obj)
    except DumpRefused:
        raise
    except RecursionError:
        raise DumpRefused("refused: nested too deep; not a flight-recorder dump") from None
    except MemoryError:
        raise DumpRefused("refused: too large to load") from None
    except UnicodeDecodeError as exc:
        raise DumpRefused(f"not valid UTF-8 JSON ({_one_line(str(exc), 120)})") from None
    except json.JSONDecodeError as exc:
        raise DumpRefused(f"corrupt JSON ({_one_line(str(exc), 120)})") from None
    except Exception as exc:  # anything the unpickler raises on a broken stream
        raise DumpRefused(f"corrupt or truncated pickle ({type(exc).__name__}: {_one_line(str(exc), 120)})") from None
    if not isinstance(obj, dict):
        raise DumpRefused(f"not a flight-recorder dump (top level is a {type(obj).__name__}, expected a dict)")
    if "entries" not in obj and "pg_config" not in obj:
        raise DumpRefused("not a flight-recorder dump (no 'entries' and no 'pg_config')")
    return obj


def entry_text(entry: Any) -> str:
    """The citation text of an entry: stable one-line JSON (json.dumps(entry, sort_keys=True, default=str))."""
    try:
        return json.dumps(entry, sort_keys=True, default=str)
    except (TypeError, ValueError):  # non-string keys of mixed types cannot be sorted: stringify them first
        return json.dumps(_str_keys(entry), sort_keys=True, default=str)


def _str_keys(o: Any) -> Any:
    if isinstance(o, dict):
        return {str(k): _str_keys(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_str_keys(v) for v in o]
    return o


def _read_capped(f: BinaryIO) -> bytes:
    data = f.read(MAX_DUMP_BYTES + 1)
    if len(data) > MAX_DUMP_BYTES:
        raise DumpRefused(f"refused: over the {MAX_DUMP_BYTES >> 20} MiB cap for a flight-recorder dump")
    return data


def _open_path(path: str | os.PathLike) -> BinaryIO:
    import gzip
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def verify_entry(path: Any, line: int, text: str) -> bool:
    """True when entry `line` (1-based) of the dump at `path` renders to `text` (see entry_text). `path` is a file
    path (gzip read transparently) or anything with `.open()` returning a binary stream (a tools.bundle.Source).
    Never raises: an unreadable or refused dump, or a line out of range, is False."""
    try:
        opener = path.open if hasattr(path, "open") and not isinstance(path, (str, os.PathLike)) else (
            lambda: _open_path(path))
        with opener() as f:
            dump = load_dump(_read_capped(f))
        entries = dump.get("entries")
        if not isinstance(entries, list) or not isinstance(line, int) or not 1 <= line <= len(entries):
            return False
        return entry_text(entries[line - 1]) == text
    except Exception:
        return False


_TRAILING = re.compile(r"(\d+)$")


def rank_from_name(rel: str) -> int | None:
    """Global rank from a dump's name: torch writes `{prefix}{rank}`; FR's loader takes the trailing digits.
    `nccl_trace_rank_3`, `comm_lib_trace_rank_12.json`, `my_prefix7`, `a.tgz!dumps/trace_rank_3.pkl.gz` → 3, 12, 7, 3."""
    name = re.split(r"[/\\!]", rel)[-1]
    name = re.sub(r"(?:\.(?:pkl|pickle|json|bin))?(?:\.(?:gz|bz2|xz|zst))?$", "", name, flags=re.I)
    name = re.sub(r"~\d+$", "", name)  # bundle's suffix for a name seen twice in one tar
    m = _TRAILING.search(name)
    return int(m.group(1)) if m else None


# ---- normalised entries ------------------------------------------------------------------------------------------


def _int(x: Any) -> int | None:
    if type(x) is int:
        return x
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, str) and re.fullmatch(r"\s*-?\d{1,20}\s*", x):
        return int(x)
    if isinstance(x, bytes) and re.fullmatch(rb"\s*-?\d{1,20}\s*", x):
        return int(x)
    return None


def _str(x: Any, default: str = "") -> str:
    if type(x) is str:
        return x
    if x is None:
        return default
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8", "replace")
    return str(x)


@lru_cache(maxsize=4096)
def optype(profiling_name: str) -> str:
    """'nccl:all_reduce' → 'all_reduce'; 'nccl:send 0->1' → 'send'."""
    return profiling_name.split(":", 1)[-1].split(" ", 1)[0]


_P2P_META = re.compile(r"(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)")


class _Canon:
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
        return self.d.setdefault(f"{t.__name__}:{v!r}", v)   # plain data, depth-bounded by _check_plain


@dataclass(slots=True)
class _Ev:
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
    frames: Any             # kept only while the entry is pending (see _summarize)
    created: int | None
    record_id: int | None
    done: bool = False


def _norm(rank: int, idx: int, e: dict, canon: _Canon) -> _Ev:
    op = canon(_str(e.get("profiling_name"), "?"))
    pgt = e.get("process_group")
    pg_id = e.get("pg_id")
    if isinstance(pgt, (list, tuple)) and len(pgt) >= 1:
        pg, desc = _str(pgt[0]), _str(pgt[1]) if len(pgt) > 1 else ""
    else:
        pg, desc = _str(pg_id, "?"), ""
    typ = optype(op)
    if "collective_seq_id" in e or "p2p_seq_id" in e:
        p2p = bool(e["is_p2p"]) if isinstance(e.get("is_p2p"), bool) else typ in _P2P
        seq = _int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id"))
    else:  # 2.3: one counter, `seq_id`
        p2p, seq = typ in _P2P, _int(e.get("seq_id"))
    frames = e.get("frames")
    return _Ev(rank, idx, canon(pg), canon(desc), None if pg_id is None else canon(_str(pg_id)), p2p, seq, op,
               canon(_str(e.get("state"), "?")), e.get("retired") is True, canon(e.get("input_sizes")),
               canon(e.get("output_sizes")), canon(e.get("input_dtypes")), canon(e.get("output_dtypes")),
               frames if type(frames) is list else None, _int(e.get("time_created_ns")), _int(e.get("record_id")))


def _ranks_of(v: Any) -> list[int] | None:
    """pg_config ranks: a string like "[0, 1, 2, 3]" (or a list); empty/garbage → None."""
    if isinstance(v, (str, bytes)):
        out = [int(x) for x in re.findall(r"-?\d+", _str(v))]
    elif isinstance(v, (list, tuple)):
        out = [i for i in map(_int, v) if i is not None]
    else:
        return None
    return sorted(set(out)) or None


def _pg_config(dump: dict) -> dict[str, tuple[str, list[int] | None]]:
    cfg = dump.get("pg_config")
    out: dict[str, tuple[str, list[int] | None]] = {}
    if isinstance(cfg, dict):
        for key, v in cfg.items():
            if isinstance(v, dict):
                name = _str(v.get("name")) or _str(key)
                out[name] = (_str(v.get("desc")), _ranks_of(v.get("ranks")))
    return out


def _pg_status(dump: dict) -> dict[str, dict[str, int]]:
    st = dump.get("pg_status")
    out: dict[str, dict[str, int]] = {}
    if isinstance(st, dict):
        for pg_id, v in st.items():
            if isinstance(v, dict):
                counters = {_str(k): _int(x) for k, x in v.items()}
                out[_str(pg_id)] = {k: i for k, i in counters.items() if i is not None}
    return out


def _compact(v: Any) -> str:
    try:
        return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))
    except (TypeError, ValueError):  # dict keys of mixed types cannot be sorted
        return json.dumps(_str_keys(v), sort_keys=True, default=str, separators=(",", ":"))


@dataclass
class _RankData:
    """What the analysis keeps of one dump (the dump itself is dropped: 10,000 ranks × 2000 entries must fit)."""

    rank: int
    evs: list[_Ev]
    wrapped: bool                                   # ring buffer lost entries (first record_id > 0, or unknown)
    stateless: bool                                 # no entry ever left 'scheduled' (gloo): `retired` = finished
    cfg: dict[str, tuple[str, list[int] | None]]
    status_by_pg: dict[str, dict[str, int] | None]  # pg name → its pg_status counters (None: unknown, or p2p in it)
    version: str
    newest: _Ev | None


def _summarize(rank: int, dump: dict, canon: _Canon) -> _RankData:
    entries = dump.get("entries") if isinstance(dump.get("entries"), list) else []
    evs = [_norm(rank, i + 1, e, canon) for i, e in enumerate(entries) if isinstance(e, dict)]
    rids = [e.record_id for e in evs]
    wrapped = bool(rids) and (None in rids or min(rids) > 0)
    stateless = bool(evs) and all(e.state == "scheduled" for e in evs) and any(e.retired for e in evs)
    status = _pg_status(dump)
    by_pg: dict[str, list[_Ev]] = defaultdict(list)
    for e in evs:
        by_pg[e.pg].append(e)
    status_by_pg: dict[str, dict[str, int] | None] = {}
    for pg, lst in by_pg.items():
        ids = {e.pg_id for e in lst if e.pg_id is not None}
        has_p2p = any(e.p2p for e in lst)
        status_by_pg[pg] = None if has_p2p or len(ids) != 1 else status.get(next(iter(ids)))  # p2p moves them too
        # done: completed; a later seq of this PG completed here (one stream, in order); pg_status; or retired in
        # a state-less dump
        by_seq: dict[int, list[_Ev]] = defaultdict(list)
        for e in lst:
            if e.p2p:
                e.done = e.state == "completed" or (stateless and e.retired)
            elif e.seq is not None:
                by_seq[e.seq].append(e)
        done_hi = max((s for s, l in by_seq.items() if all(e.state == "completed" for e in l)), default=None)
        lc = (status_by_pg[pg] or {}).get("last_completed_collective")
        for s, l in by_seq.items():
            d = ((done_hi is not None and s <= done_hi) or (lc is not None and s <= lc)
                 or (stateless and all(e.retired for e in l)))
            for e in l:
                e.done = d
    for e in evs:
        e.frames = [f for f in e.frames if isinstance(f, dict)] if e.frames and not e.done else None
    return _RankData(rank, evs, wrapped, stateless, _pg_config(dump), status_by_pg, _str(dump.get("version"), "?"),
                     evs[-1] if evs else None)


# ---- results -----------------------------------------------------------------------------------------------------


@dataclass
class Mismatch:
    """Ranks that disagree at one seq. `found`: compact JSON of each value → the ranks that recorded it."""

    seq: int
    kind: str                   # 'collective' | 'p2p'
    type_of_mismatch: str       # FR's MatchState name: COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, ...
    field: str                  # profiling_name, input_sizes, output_sizes, input_dtypes, output_dtypes, state
    expected: str | None        # the majority value; None on a tie
    found: dict[str, list[int]]
    culprit_ranks: list[int]
    entries: dict[int, int] = field(default_factory=dict)   # rank → 1-based entry index (citation)


@dataclass
class FRGroup:
    pg: str                                 # pg_name (process_group[0]); `name@ranks` when split groups share it
    desc: str                               # pg_desc, e.g. 'default_pg'
    members: list[int]                      # global ranks
    stuck_seq: int | None                   # None: nothing pending in this PG
    op: str | None                          # profiling_name at the stuck seq (majority)
    state_by_rank: dict[int, str]           # completed|started|scheduled|missing|not_recorded|no_dump (|idle: p2p)
    missing_ranks: list[int]
    mismatches: list[Mismatch]
    frames: list[dict]                      # [{"ranks": [...], "frames": [{name, filename, line}, ...]}]
    culprits: list[int]
    seq_kind: str = "collective"            # 'p2p' when the only pending ops are send/recv
    culprit_reasons: dict[int, list[str]] = field(default_factory=dict)
    no_dump_ranks: list[int] = field(default_factory=list)
    not_recorded_ranks: list[int] = field(default_factory=list)
    last_seen: dict[int, dict] = field(default_factory=dict)   # missing ranks: newest entry they have in this PG
    stuck_variants: list[dict] = field(default_factory=list)   # ranks that recorded the stuck seq, grouped by
    #                                                            (state, op, sizes, dtypes): the table's rows
    p2p_pending: list[dict] = field(default_factory=list)
    members_from: str = "pg_config"         # or 'entries' (pg_config lists no ranks for this PG)
    stuck_created_ns: int | None = None     # earliest time_created_ns of the stuck entry across ranks
    last_done_seq: int | None = None        # highest seq below the stuck one (all done); the newest when none stuck
    entries: dict[int, int] = field(default_factory=dict)      # rank → 1-based entry index of its stuck entry
    notes: list[str] = field(default_factory=list)


@dataclass
class FRReport:
    dumps: dict[int, str]                   # rank → bundle-relative path of its dump
    skipped: list[dict[str, str]]           # {"file", "reason"}
    groups: list[FRGroup]
    expected_ranks: list[int]               # members of every PG seen, and every rank with a dump
    no_dump_ranks: list[int]
    culprits: list[int]
    first_stuck: str | None = None          # pg whose stuck entry is the oldest: where the hang most likely began
    versions: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def findings(self) -> list[Finding]:
        """One Finding per verdict, each citing dump entries (file = dump path, line = 1-based entry index,
        text = entry_text(entry)). Built while the dumps could still be read (analyze / analyze_bundle)."""
        return list(getattr(self, "_findings", []))

    def to_json(self) -> dict:
        from tools.jsonable import to_jsonable
        return to_jsonable(self)


def _rw(ranks: list[int]) -> str:
    """'rank 3' / 'ranks 0-2,5'."""
    return f"rank{'s' if len(set(ranks)) != 1 else ''} {_rs(ranks)}"


def _rs(ranks: list[int]) -> str:
    """[0,1,2,3,7] → '0-3,7'."""
    rs = sorted(set(ranks))
    if not rs:
        return "-"
    parts, start, prev = [], rs[0], rs[0]
    for r in rs[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


# ---- analysis ----------------------------------------------------------------------------------------------------


def _minority(values: dict[int, str]) -> tuple[str | None, dict[str, list[int]], list[int]]:
    """rank → value: (majority value or None on a tie, value → ranks (most common first), minority ranks)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for r, v in sorted(values.items()):
        groups[v].append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    if not ordered:
        return None, {}, []
    if len(ordered) > 1 and len(ordered[0][1]) == len(ordered[1][1]):
        return None, dict(ordered), []
    return ordered[0][0], dict(ordered), sorted(r for _, rs in ordered[1:] for r in rs)


def _natural(s: str) -> tuple:
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", s) if t)


def analyze(dumps: dict[int, dict], names: dict[int, str] | None = None) -> FRReport:
    """Analyse loaded dumps (global rank → load_dump() result). `names` maps ranks to their bundle-relative paths,
    used as Evidence.file (default `nccl_trace_rank_<N>`)."""
    canon = _Canon()
    with _no_gc():
        data = {r: _summarize(r, d, canon) for r, d in sorted(dumps.items())}
        return _analyze(data, names, dumps.get)


def _analyze(data: dict[int, _RankData], names: dict[int, str] | None, fetch) -> FRReport:
    names = {r: (names or {}).get(r) or f"nccl_trace_rank_{r}" for r in data}
    notes: list[str] = []
    versions: dict[str, list[int]] = defaultdict(list)
    for r, d in data.items():
        versions[d.version].append(r)
    if len(versions) > 1:
        notes.append("dumps disagree on the FR version: " + "; ".join(f"{v} on {_rw(rs)}" for v, rs in versions.items()))

    # PG identity: pg_name, split further when pg_config gives one name several rank sets (split_group).
    names_seen: dict[str, None] = {}
    for d in data.values():
        for e in d.evs:
            names_seen.setdefault(e.pg, None)
    keyed: dict[tuple[str, tuple[int, ...] | None], dict[int, list[_Ev]]] = {}
    descs: dict[tuple, Counter] = defaultdict(Counter)
    by_rank_pg = {r: _by_pg(d.evs) for r, d in data.items()}
    for pg in sorted(names_seen, key=_natural):
        sets = sorted({tuple(d.cfg[pg][1]) for d in data.values() if pg in d.cfg and d.cfg[pg][1]})
        for r, d in data.items():
            mine = by_rank_pg[r].get(pg, [])
            own = d.cfg.get(pg, ("", None))[1]
            if len(sets) <= 1:
                key = (pg, sets[0] if sets else None)
            else:
                key = (pg, tuple(own) if own else next((s for s in sets if r in s), sets[0]))
            slot = keyed.setdefault(key, {})
            if mine:
                slot[r] = mine
                descs[key].update(e.desc for e in mine)
            elif own and r in own and tuple(own) == key[1]:
                slot.setdefault(r, [])

    groups = []
    for (pg, members_cfg), per_rank in keyed.items():
        with_entries = sorted(r for r, l in per_rank.items() if l)
        if not with_entries:
            continue
        split = len({k[1] for k in keyed if k[0] == pg}) > 1
        members = sorted(set(members_cfg or ()) | set(with_entries))
        desc = descs[(pg, members_cfg)].most_common(1)[0][0] if descs[(pg, members_cfg)] else ""
        g = _analyze_group(f"{pg}@{_rs(members)}" if split else pg, pg, desc, members, per_rank, data)
        if not members_cfg:
            g.members_from = "entries"
            g.notes.append("pg_config lists no ranks for this PG: members are the ranks with entries for it, so a "
                           "member that never used it cannot be seen missing")
        elif set(with_entries) - set(members_cfg):
            g.notes.append(f"{_rw(sorted(set(with_entries) - set(members_cfg)))}: entries for this PG but not in its "
                           "pg_config ranks")
        groups.append(g)

    expected = sorted(set(data) | {r for g in groups for r in g.members})
    stuck = [g for g in groups if g.stuck_seq is not None]
    first = min(stuck, key=lambda g: (g.stuck_created_ns is None, g.stuck_created_ns or 0)) if stuck else None
    if len(stuck) > 1 and first is not None and first.stuck_created_ns is not None:
        notes.append(f"{len(stuck)} PGs are stuck; the oldest stuck entry is in PG {first.pg}: the others may be "
                     "waiting on it")
    rep = FRReport(dumps=names, skipped=[], groups=groups, expected_ranks=expected,
                   no_dump_ranks=sorted(set(expected) - set(data)), culprits=sorted({r for g in groups for r in g.culprits}),
                   first_stuck=first.pg if first else None, versions=dict(versions), notes=notes)
    rep._findings = _findings(rep, fetch)   # not a dataclass field: kept out of JSON
    return rep


def _by_pg(evs: list[_Ev]) -> dict[str, list[_Ev]]:
    out: dict[str, list[_Ev]] = defaultdict(list)
    for e in evs:
        out[e.pg].append(e)
    return out


def _analyze_group(label: str, pg: str, desc: str, members: list[int], per_rank: dict[int, list[_Ev]],
                   data: dict[int, _RankData]) -> FRGroup:
    coll: dict[int, dict[int, list[_Ev]]] = {}
    p2p: dict[int, list[_Ev]] = {}
    for r, lst in per_rank.items():
        c: dict[int, list[_Ev]] = defaultdict(list)
        for e in lst:
            if e.p2p:
                p2p.setdefault(r, []).append(e)
            elif e.seq is not None:
                c[e.seq].append(e)
        coll[r] = dict(c)
    status = {r: data[r].status_by_pg.get(pg) for r in per_rank}

    g = FRGroup(pg=label, desc=desc, members=members, stuck_seq=None, op=None, state_by_rank={}, missing_ranks=[],
                mismatches=[], frames=[], culprits=[])
    g.no_dump_ranks = [r for r in members if r not in data]

    # mismatches: every seq that two or more ranks recorded, earliest first
    all_seqs = sorted({s for c in coll.values() for s in c})
    cut = 0
    for s in all_seqs:
        at = {r: c[s] for r, c in coll.items() if s in c}
        if len(at) < 2:
            continue
        for m in _compare(s, at):
            if len(g.mismatches) < MAX_MISMATCHES:
                g.mismatches.append(m)
            else:
                cut += 1
    if cut:
        g.notes.append(f"showing {MAX_MISMATCHES} of {MAX_MISMATCHES + cut} mismatches (earliest first)")

    stuck = next((s for s in all_seqs if any(s in c and not all(e.done for e in c[s]) for c in coll.values())), None)
    if stuck is not None:
        _stuck_collective(g, stuck, coll, status, data, set(p2p))
    elif all_seqs:
        g.last_done_seq = all_seqs[-1]
    g.p2p_pending = _p2p_pending(members, p2p, data, g)
    if stuck is None and g.p2p_pending:
        first = min(g.p2p_pending, key=lambda p: (p["created_ns"] is None, p["created_ns"] or 0, p["rank"]))
        g.stuck_seq, g.op, g.seq_kind = first["seq"], first["op"], "p2p"
        g.stuck_created_ns = first["created_ns"]
        for p in g.p2p_pending:
            if p["seq"] == first["seq"] and p["op"] == first["op"]:
                g.entries[p["rank"]] = p["entry"]
        for r in members:
            g.state_by_rank[r] = "no_dump" if r not in data else next(
                (p["state"] for p in g.p2p_pending if p["rank"] == r), "idle")   # idle: nothing pending here
    for m in g.mismatches:
        for r in m.culprit_ranks:
            g.culprit_reasons.setdefault(r, []).append(f"{m.type_of_mismatch.lower()}@{m.seq}")
    for p in g.p2p_pending:
        if p["peer_state"] == "missing":
            g.culprit_reasons.setdefault(p["peer"], []).append(f"p2p_never_posted@{p['rank']}:{p['seq']}")
    g.culprits = sorted(g.culprit_reasons)
    return g


def _compare(s: int, at: dict[int, list[_Ev]]) -> list[Mismatch]:
    # fast path: values are canonical objects (_Canon), so equal values are the same object
    sigs = {tuple((e.op, id(e.isz), id(e.osz), id(e.idt), id(e.odt)) for e in l) for l in at.values()}
    if len(sigs) == 1:
        return []
    out = []
    entries = {r: l[-1].idx for r, l in at.items()}
    maj, found, minority = _minority({r: " + ".join(e.op for e in l) for r, l in at.items()})
    if len(found) > 1:
        return [Mismatch(s, "collective", "COLLECTIVE_TYPE_MISMATCH", "profiling_name", maj, found, minority, entries)]
    typ = optype(next(iter(at.values()))[0].op)
    checks = [("input_sizes", "isz", "SIZE_OR_SYNTAX_MISMATCH", _NO_INPUT_SIZE),
              ("output_sizes", "osz", "SIZE_OR_SYNTAX_MISMATCH", _NO_OUTPUT_SIZE),
              ("input_dtypes", "idt", "COLLECTIVE_DTYPE_MISMATCH", _NO_INPUT_DTYPE),
              ("output_dtypes", "odt", "COLLECTIVE_DTYPE_MISMATCH", _NO_OUTPUT_DTYPE)]
    for fld, attr, kind, exempt in checks:
        if typ in exempt:
            continue
        vals = {r: _sig(l, attr) for r, l in at.items() if any(getattr(e, attr) for e in l)}  # empty = not recorded
        maj, found, minority = _minority(vals)
        if len(found) > 1:
            out.append(Mismatch(s, "collective", kind, fld, maj, found, minority, entries))
            if kind == "SIZE_OR_SYNTAX_MISMATCH":
                break  # input and output sizes of one op disagree together; one record says it
    return out


def _sig(evs: list[_Ev], attr: str) -> str:
    vals = [getattr(e, attr) for e in evs]
    return _compact(vals[0] if len(vals) == 1 else vals)


def _stuck_collective(g: FRGroup, s: int, coll: dict[int, dict[int, list[_Ev]]],
                      status: dict[int, dict[str, int] | None], data: dict[int, _RankData],
                      p2p_ranks: set[int]) -> None:
    g.stuck_seq = s
    at = {r: c[s] for r, c in coll.items() if s in c}
    g.op = next(iter(_minority({r: " + ".join(e.op for e in l) for r, l in at.items()})[1]))  # most common
    g.stuck_created_ns = min((e.created for l in at.values() for e in l if e.created is not None), default=None)
    g.entries = {r: l[0].idx for r, l in at.items()}
    below = [x for x in sorted({x for c in coll.values() for x in c}) if x < s]
    g.last_done_seq = below[-1] if below else None
    for r in g.members:
        if r in g.no_dump_ranks:
            g.state_by_rank[r] = "no_dump"
            continue
        c = coll.get(r, {})
        if s in c:
            l = c[s]
            g.state_by_rank[r] = "completed" if all(e.done for e in l) else STATES[
                min(_RANK.get(e.state, 0) for e in l)]
            continue
        seqs = sorted(c)
        enq = (status.get(r) or {}).get("last_enqueued_collective")
        gap = bool(seqs) and seqs[0] < s < seqs[-1] and r not in p2p_ranks  # (2.3 counted p2p in the same seq)
        if (seqs and seqs[-1] < s) or gap or (not seqs and not data[r].wrapped):
            if enq is not None and enq >= s:
                g.state_by_rank[r] = "not_recorded"
                g.notes.append(f"rank {r}: pg_status says #{enq} was enqueued but no entry for #{s} is recorded")
                continue
            g.state_by_rank[r] = "missing"
            if seqs:
                newest = c[seqs[-1]][-1]
                g.last_seen[r] = {"seq": newest.seq, "op": newest.op, "state": "completed" if newest.done
                                  else newest.state, "entry": newest.idx}
            else:
                g.last_seen[r] = {"seq": None, "op": None, "state": "never used this PG"}
                if (nw := data[r].newest) is not None:  # where it is instead: its newest entry in any PG
                    g.last_seen[r].update(entry=nw.idx, elsewhere={"pg": nw.pg, "seq": nw.seq, "op": nw.op,
                                                                   "state": nw.state})
            if enq is not None:
                g.last_seen[r]["last_enqueued_collective"] = enq
        else:
            g.state_by_rank[r] = "not_recorded"
    g.missing_ranks = sorted(r for r, v in g.state_by_rank.items() if v == "missing")
    g.not_recorded_ranks = sorted(r for r, v in g.state_by_rank.items() if v == "not_recorded")
    if g.not_recorded_ranks:
        g.notes.append(f"{_rw(g.not_recorded_ranks)}: the ring buffer no longer holds #{s} (oldest entry for "
                       "this PG is newer): not counted as missing")
    joined = sorted(at)
    if g.missing_ranks:
        if len(g.missing_ranks) > len(joined):
            for r in joined:
                g.culprit_reasons.setdefault(r, []).append("joined_alone")
        else:
            for r in g.missing_ranks:
                g.culprit_reasons.setdefault(r, []).append("never_joined")
    elif g.no_dump_ranks:
        g.notes.append(f"every rank with a dump reached #{s}; {_rw(g.no_dump_ranks)}: no dump (a rank that crashed or "
                       "was killed writes none): look there")
    # state at the stuck seq: blame only ranks behind the majority
    states = {r: v for r, v in g.state_by_rank.items() if v in STATES}
    maj, found, minority = _minority(states)
    if len(found) > 1:
        behind = [r for r in minority if maj is not None and _RANK[states[r]] < _RANK[maj]]
        g.mismatches.append(Mismatch(s, "collective", "COLLECTIVE_STATE_MISMATCH", "state", maj, dict(found), behind,
                                     {r: at[r][0].idx for r in at}))
    # what each rank recorded at the stuck seq, identical ones grouped; stack frames likewise
    variants: dict[tuple, list[int]] = defaultdict(list)
    vals: dict[tuple, dict] = {}
    stacks: dict[str, list[int]] = defaultdict(list)
    frames_of: dict[str, list] = {}
    for r, l in sorted(at.items()):
        e = l[0]
        key = (g.state_by_rank[r], " + ".join(x.op for x in l), id(e.isz), id(e.osz), id(e.idt), id(e.odt))
        variants[key].append(r)
        vals[key] = {"state": key[0], "op": key[1], "input_sizes": e.isz, "output_sizes": e.osz,
                     "input_dtypes": e.idt, "output_dtypes": e.odt}
        if e.frames:
            k = _compact(e.frames)
            stacks[k].append(r)
            frames_of[k] = [{"name": f.get("name"), "filename": f.get("filename"), "line": f.get("line")}
                            for f in e.frames]
    g.stuck_variants = [{"ranks": rs, **vals[k]} for k, rs in sorted(variants.items(), key=lambda kv: -len(kv[1]))]
    g.frames = [{"ranks": rs, "frames": frames_of[k]} for k, rs in sorted(stacks.items(), key=lambda kv: -len(kv[1]))]


def _p2p_pending(members: list[int], p2p: dict[int, list[_Ev]], data: dict[int, _RankData], g: FRGroup) -> list[dict]:
    """Pending send/recv ops, each paired FIFO with the peer's pending counterpart. A peer with a dump and no pending
    counterpart never posted it (unless its ring buffer wrapped and holds no p2p op of this PG)."""
    order = sorted(members)
    pend: dict[tuple[int, int, str], list[_Ev]] = defaultdict(list)   # (src, dst, 'send'|'recv') → pending ops
    for l in p2p.values():
        for e in l:
            m = _P2P_META.search(e.op)
            if e.done or not m:
                continue
            a, b = int(m.group(2)), int(m.group(4))
            src, dst = (a, b) if m.group(3) == "->" else (b, a)
            if src >= len(order) or dst >= len(order):
                continue
            pend[(order[src], order[dst], m.group(1))].append(e)
    out = []
    for (src, dst, kind), lst in sorted(pend.items()):
        other = sorted(pend.get((src, dst, "recv" if kind == "send" else "send"), []),
                       key=lambda e: (e.seq is None, e.seq or 0))
        peer = dst if kind == "send" else src
        for i, e in enumerate(sorted(lst, key=lambda e: (e.seq is None, e.seq or 0))):
            o = other[i] if i < len(other) else None
            if peer not in data:
                ps = "no_dump"
            elif o is not None:
                ps = o.state
            elif peer not in p2p and data[peer].wrapped:
                ps = "not_recorded"
            else:
                ps = "missing"
            rec = {"rank": e.rank, "op": e.op, "seq": e.seq, "state": e.state, "src": src, "dst": dst, "peer": peer,
                   "peer_state": ps, "entry": e.idx, "created_ns": e.created}
            if o is not None:
                mine, theirs = (e.isz, o.osz) if kind == "send" else (e.osz, o.isz)
                if theirs and mine and _compact(mine) != _compact(theirs):
                    rec["size_mismatch"] = {kind: mine, "recv" if kind == "send" else "send": theirs}
                    if kind == "send":
                        g.mismatches.append(Mismatch(e.seq or 0, "p2p", "SIZE_OR_SYNTAX_MISMATCH", "input_sizes",
                                                     None, {_compact(mine): [e.rank], _compact(theirs): [o.rank]}, [],
                                                     {e.rank: e.idx, o.rank: o.idx}))
            out.append(rec)
    return out


# ---- findings ----------------------------------------------------------------------------------------------------


def _plan(rep: FRReport) -> list[tuple[dict, list[tuple[int, int]]]]:
    """(Finding fields, the (rank, entry index) pairs it cites), before the texts are read."""
    plan = []
    for g in rep.groups:
        name = f"PG {g.pg}" + (f" ({g.desc})" if g.desc else "")
        waiting = sorted(g.entries.items())
        base = {"pg": g.pg, "desc": g.desc, "seq": g.stuck_seq, "seq_kind": g.seq_kind, "op": g.op,
                "members": len(g.members), "no_dump_ranks": g.no_dump_ranks}
        if g.missing_ranks:
            behind = [(r, g.last_seen[r]["entry"]) for r in g.missing_ranks
                      if "entry" in g.last_seen.get(r, {})][:MAX_CITED]
            joined = sorted(r for r, s in g.state_by_rank.items() if s in STATES)
            alone = [r for r in g.culprits if "joined_alone" in g.culprit_reasons.get(r, [])]
            if alone:
                summary = (f"{name}: only {_rw(alone)} entered {g.op} #{g.stuck_seq}; "
                           f"{len(g.missing_ranks)} members never called it")
                ranks = alone
            else:
                summary = (f"{name}: {_rw(g.missing_ranks)} never joined {g.op} #{g.stuck_seq} "
                           f"({len(joined)} ranks wait in it)")
                ranks = g.missing_ranks
            plan.append(({"id": "fr.missing_ranks", "summary": summary, "role": Role.root_candidate,
                          "category": "collective_hang", "ranks": ranks, "count": len(ranks),
                          "facts": {**base, "missing_ranks": g.missing_ranks, "joined_ranks": _rs(joined),
                                    "last_seen": dict(list(g.last_seen.items())[:MAX_CITED])}},
                         behind + waiting[:MAX_CITED - min(len(behind), MAX_CITED - 1)]))
        for m in g.mismatches:
            majority = [r for v, rs in m.found.items() if v == m.expected for r in rs]
            pairs = [(r, m.entries[r]) for r in m.culprit_ranks if r in m.entries][:MAX_CITED]
            pairs += [(r, m.entries[r]) for r in majority if r in m.entries][:1 if pairs else MAX_CITED]
            if not pairs:
                pairs = [(r, i) for r, i in sorted(m.entries.items())][:MAX_CITED]
            who = _rw(m.culprit_ranks) if m.culprit_ranks else "no majority, no culprit"
            vals = "; ".join(f"{v} on {_rs(rs)}" for v, rs in m.found.items())
            plan.append(({"id": "fr.mismatch", "role": Role.root_candidate if m.type_of_mismatch !=
                          "COLLECTIVE_STATE_MISMATCH" else Role.cascade, "category": "collective_desync",
                          "summary": f"{name} {m.kind} #{m.seq}: {m.type_of_mismatch} in {m.field} ({who}): {vals}",
                          "ranks": m.culprit_ranks,
                          "facts": {**base, "seq": m.seq, "kind": m.kind, "type_of_mismatch": m.type_of_mismatch,
                                    "field": m.field, "expected": m.expected, "found": m.found}}, pairs))
        if g.stuck_seq is not None and not g.missing_ranks:
            states = Counter(g.state_by_rank.values())
            summary = (f"{name}: {g.seq_kind} {g.op} #{g.stuck_seq} never finished "
                       f"({', '.join(f'{n} {s}' for s, n in states.most_common())})")
            if g.no_dump_ranks:
                summary += f"; {_rw(g.no_dump_ranks)} {'has' if len(g.no_dump_ranks) == 1 else 'have'} no dump"
            plan.append(({"id": "fr.stuck_collective", "summary": summary, "role": Role.cascade,
                          "category": "collective_hang", "ranks": sorted(g.culprits or g.no_dump_ranks),
                          "facts": {**base, "states": dict(states), "p2p_pending": g.p2p_pending[:MAX_CITED]}},
                         waiting[:MAX_CITED]))
    return plan


def _findings(rep: FRReport, fetch) -> list[Finding]:
    """Read each cited dump once (fetch(rank) → dump dict or None) and build the Findings."""
    plan = _plan(rep)
    wanted: dict[int, set[int]] = defaultdict(set)
    for _, pairs in plan:
        for r, i in pairs:
            wanted[r].add(i)
    texts: dict[tuple[int, int], str] = {}
    for r, idxs in sorted(wanted.items()):
        try:
            dump = fetch(r)
        except DumpRefused:
            dump = None
        entries = dump.get("entries") if isinstance(dump, dict) else None
        if not isinstance(entries, list):
            rep.notes.append(f"could not re-read the dump of rank {r} to cite it")
            continue
        for i in idxs:
            if 1 <= i <= len(entries):
                texts[(r, i)] = entry_text(entries[i - 1])
    out = []
    for fields, pairs in plan:
        evs = [Evidence(file=rep.dumps.get(r, f"nccl_trace_rank_{r}"), line=i, text=texts[(r, i)], rank=r, kind=KIND)
               for r, i in dict.fromkeys(pairs) if (r, i) in texts]
        if evs:
            out.append(Finding(evidence=evs, **fields))
    return out


# ---- bundle --------------------------------------------------------------------------------------------------------


def analyze_bundle(bundle) -> FRReport | None:
    """Read every `fr_dump` source of a tools.bundle.Bundle and analyse them; None when the bundle has none. Each
    dump is loaded, summarised and dropped (memory stays at the summaries, not the dumps); the few cited ones are
    read again for the citation texts. Dumps that cannot be read (refused, corrupt, no rank in the name, a second
    dump for one rank) are skipped with a one-line reason."""
    srcs = [s for s in bundle.sources if s.kind == KIND]
    if not srcs:
        return None
    with _no_gc():
        return _analyze_sources(srcs)


def _analyze_sources(srcs: list) -> FRReport:
    from tools.bundle import READ_ERRORS, read_error_reason
    canon = _Canon()
    data: dict[int, _RankData] = {}
    names: dict[int, str] = {}
    by_rank = {}
    skipped: list[dict[str, str]] = []
    for s in srcs:
        try:
            with s.open() as f:
                d = load_dump(_read_capped(f))
        except DumpRefused as exc:
            skipped.append({"file": s.rel, "reason": str(exc)})
            continue
        except READ_ERRORS as exc:
            skipped.append({"file": s.rel, "reason": read_error_reason(exc)})
            continue
        r = rank_from_name(s.rel)
        if r is None:
            r = _rank_from_p2p(d)
        if r is None:
            skipped.append({"file": s.rel, "reason": "no rank: the name has no trailing rank number and no send/recv "
                                                     "entry says which rank wrote it"})
        elif r in data:
            skipped.append({"file": s.rel, "reason": f"a second dump for rank {r} (using {names[r]})"})
        else:
            data[r], names[r], by_rank[r] = _summarize(r, d, canon), s.rel, s
        del d

    def fetch(r: int) -> dict | None:
        try:
            with by_rank[r].open() as f:
                return load_dump(_read_capped(f))
        except (DumpRefused, *READ_ERRORS):
            return None

    rep = _analyze(data, names, fetch)
    rep.skipped = skipped
    return rep


def _rank_from_p2p(d: dict) -> int | None:
    """A dump named without a rank: a send's source (or a recv's destination) is the writer, as a group-local
    index into that PG's pg_config ranks."""
    cfg = _pg_config(d)
    for e in d.get("entries") or []:
        if not isinstance(e, dict):
            continue
        m = _P2P_META.search(_str(e.get("profiling_name")))
        pgt = e.get("process_group")
        if not m or not isinstance(pgt, (list, tuple)) or not pgt:
            continue
        ranks = cfg.get(_str(pgt[0]), ("", None))[1]
        local = int(m.group(2))  # 'send 0->1': the writer is the source; 'recv 1<-0': the destination
        if ranks and 0 <= local < len(ranks):
            return ranks[local]
    return None


def read_dump_file(path: str | Path) -> dict:
    """Convenience for scripts and tests: load_dump() of a file on disk (gzip read transparently)."""
    with _open_path(path) as f:
        return load_dump(_read_capped(f))
