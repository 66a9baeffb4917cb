"""PyTorch flight-recorder (FR) dumps → which collective hung, which rank never joined, which rank disagreed.

On a watchdog timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`) every rank writes one dump, `{prefix}{global_rank}`, prefix
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE` (alias `TORCH_FR_DUMP_TEMP_FILE`), default names `nccl_trace_rank_<N>` (≤2.8) and
`comm_lib_trace_rank_<N>` (≥2.9). Format: ../shared/FORMATS.md §10.2.

Reading (`load_dump`). A dump is a pickle, read with a RESTRICTED unpickler that admits only plain data
(tools/sources/flight_recorder/unpickle.py says how, and why that is safe). Input is capped (MAX_DUMP_BYTES). A refused or unreadable
dump raises `DumpRefused` with ONE line and is listed as skipped, never a traceback. The JSON form
(`torch._C._distributed_c10d._dump_nccl_trace_json` / `_dump_fr_trace_json`) is read too; it has no `frames`, gives
`process_group` as a list and `pg_status` values as strings.

Citations. For a binary dump a "line" is an ENTRY: `Evidence.file` = the dump's bundle-relative path,
`Evidence.line` = the 1-based index of the entry in the dump's `entries` list, `Evidence.text` = `entry_text(entry)`
= `json.dumps(entry, sort_keys=True, default=str)` (one line, stable: tuples become lists, bytes their repr).
`verify_entry(path, line, text)` re-reads the dump and checks that rendering.

Analysis (`analyze`): collectives matched across ranks per process group, by sequence number; tools/sources/flight_recorder/match.py
says how "done", "stuck", "missing", mismatches and culprits are decided. The pieces:
    frdump_unpickle.py  the restricted unpickler and the plain-data check
    frdump_entries.py   entries → citation text, normalised records, compact per-rank summaries
    frdump_match.py     per-PG matching: stuck seq, missing ranks, mismatches, p2p pairs, culprits
    frdump_report.py    FRReport / FRGroup / Mismatch, and the Findings citing dump entries

Scale: each dump is loaded, reduced to compact per-rank records (equal values shared across ranks, stack frames kept
only for unfinished entries) and dropped; the few dumps a finding cites are read again for the texts. 128 ranks ×
2000 entries (62 MB of pickles): ~100 MB of memory, ~14 s on the 2-core VM (unpickling ~1/3, the plain-type walk
~1/3, the reduction ~1/3).

Compared with PyTorch's analyzer (`python -m torch.distributed.flight_recorder.fr_trace DIR --prefix
nccl_trace_rank_`, torch 2.13.0+cpu) on the dumps `python tests/sources/flight_recorder/test_analyze.py --write-cases DIR` writes:
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
- real torch 2.13 gloo dumps (tests/sources/flight_recorder/fixtures/gloo-2.13): it crashes (KeyError: ('0', 0)), because on 2 of the 4
  ranks pg_config holds one PG with an EMPTY name and no ranks. We fall back to the entries and find that rank 3
  never joined all_reduce #5.
- a malicious pickle: it executes it (`pickle.load`: the test's `touch` ran before it crashed); we refuse it.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, BinaryIO, cast

from trainlog_debugger.tools.sources.flight_recorder.entries import P2P_META, Canon, RankData, as_str, entry_text, pg_config, summarize
from trainlog_debugger.tools.sources.flight_recorder.match import analyze_ranks
from trainlog_debugger.tools.sources.flight_recorder.format import rank_from_name
from trainlog_debugger.tools.sources.flight_recorder.report import KIND, FRReport
from trainlog_debugger.tools.sources.flight_recorder import unpickle as budgets
from trainlog_debugger.tools.sources.flight_recorder.unpickle import (DumpRefused, PlainUnpickler, check_entries,
                                                                     check_plain, memory_budget, no_gc, one_line,
                                                                     quick_refusal)

from trainlog_debugger.tools.sources.flight_recorder.report import FRGroup, Mismatch  # noqa: F401  (public: the report's row types)

MAX_DUMP_BYTES = 256 << 20      # a real dump is KBs to tens of MB (buffer 2000-20000 entries)


def load_dump(data: bytes) -> dict:
    """Parse one dump (pickle or JSON form) into plain Python data. Raises DumpRefused (one line) for anything
    else: a pickle that names any global, too big, corrupt, or not a flight-recorder dict."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpRefused(f"refused: {len(data) / (1 << 20):.0f} MiB is over the {MAX_DUMP_BYTES >> 20} MiB cap "
                          "for a flight-recorder dump")
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        raise DumpRefused("empty file (no flight-recorder data)")
    obj = None
    try:
        with no_gc(), memory_budget():
            if head[:1] in (b"{", b"["):
                if (why := quick_refusal(data)):
                    raise DumpRefused(why)
                obj = json.loads(data.decode("utf-8-sig"))
            else:
                obj = PlainUnpickler(io.BytesIO(data)).load()
        check_plain(obj)
    except DumpRefused:
        raise
    except RecursionError:
        raise DumpRefused("refused: nested too deep; not a flight-recorder dump") from None
    except MemoryError:
        obj = None  # drop what was built before saying so
        raise DumpRefused(f"over budget: loading it needs more than {budgets.LOAD_MEMORY >> 20} MiB of memory; not a "
                          "flight-recorder dump") from None
    except UnicodeDecodeError as exc:
        raise DumpRefused(f"not valid UTF-8 JSON ({one_line(str(exc), 120)})") from None
    except json.JSONDecodeError as exc:
        raise DumpRefused(f"corrupt JSON ({one_line(str(exc), 120)})") from None
    except Exception as exc:  # anything the unpickler raises on a broken stream
        raise DumpRefused(f"corrupt or truncated pickle ({type(exc).__name__}: {one_line(str(exc), 120)})") from None
    if not isinstance(obj, dict):
        raise DumpRefused(f"not a flight-recorder dump (top level is a {type(obj).__name__}, expected a dict)")
    if "entries" not in obj and "pg_config" not in obj:
        raise DumpRefused("not a flight-recorder dump (no 'entries' and no 'pg_config')")
    check_entries(obj)
    return obj


def _read_capped(f: BinaryIO) -> bytes:
    data = f.read(MAX_DUMP_BYTES + 1)
    if len(data) > MAX_DUMP_BYTES:
        raise DumpRefused(f"refused: over the {MAX_DUMP_BYTES >> 20} MiB cap for a flight-recorder dump")
    return data


def _open_path(path: str | os.PathLike) -> BinaryIO:
    import gzip
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if gz:  # a GzipFile is not nominally a BinaryIO in typeshed, but has the read/close/with that callers use
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def verify_entry(path: Any, line: int, text: str) -> bool:
    """True when entry `line` (1-based) of the dump at `path` renders to `text` (see entry_text). `path` is a file
    path (gzip read transparently) or anything with `.open()` returning a binary stream (a tools.bundle.open.Source).
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


def analyze(dumps: dict[int, dict], names: dict[int, str] | None = None) -> FRReport:
    """Analyse loaded dumps (global rank → load_dump() result). `names` maps ranks to their bundle-relative paths,
    used as Evidence.file (default `nccl_trace_rank_<N>`)."""
    canon = Canon()
    with no_gc():
        data = {r: summarize(r, d, canon) for r, d in sorted(dumps.items())}
        return analyze_ranks(data, names, dumps.get)


def analyze_bundle(bundle) -> FRReport | None:
    """Read every `fr_dump` source of a tools.bundle.open.Bundle and analyse them; None when the bundle has none. Each
    dump is loaded, summarised and dropped (memory stays at the summaries, not the dumps); the few cited ones are
    read again for the citation texts. Dumps that cannot be read (refused, corrupt, no rank in the name, a second
    dump for one rank) are skipped with a one-line reason."""
    srcs = [s for s in bundle.sources if s.kind == KIND]
    if not srcs:
        return None
    with no_gc():
        return _analyze_sources(srcs)


def _analyze_sources(srcs: list) -> FRReport:
    from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
    canon = Canon()
    data: dict[int, RankData] = {}
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
            data[r], names[r], by_rank[r] = summarize(r, d, canon), s.rel, s
        del d

    refused: tuple[type[BaseException], ...] = (DumpRefused, *READ_ERRORS)

    def fetch(r: int) -> dict | None:
        try:
            with by_rank[r].open() as f:
                return load_dump(_read_capped(f))
        except refused:
            return None

    rep = analyze_ranks(data, names, fetch)
    rep.skipped = skipped
    return rep


def _rank_from_p2p(d: dict) -> int | None:
    """A dump named without a rank: a send's source (or a recv's destination) is the writer, as a group-local
    index into that PG's pg_config ranks."""
    cfg = pg_config(d)
    for e in d.get("entries") or []:
        if not isinstance(e, dict):
            continue
        m = P2P_META.search(as_str(e.get("profiling_name")))
        pgt = e.get("process_group")
        if not m or not isinstance(pgt, (list, tuple)) or not pgt:
            continue
        ranks = cfg.get(as_str(pgt[0]), ("", None))[1]
        local = int(m.group(2))  # 'send 0->1': the writer is the source; 'recv 1<-0': the destination
        if ranks and 0 <= local < len(ranks):
            return ranks[local]
    return None
