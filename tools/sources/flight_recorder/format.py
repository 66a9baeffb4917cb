"""What a PyTorch flight-recorder dump looks like from outside: its file names and first bytes, and the rank its
name states. The format floor of the flight_recorder package (detection imports it cheaply); reading and
matching the dumps is analyze.py's.

torch writes one dump per rank, `{TORCH_NCCL_DEBUG_INFO_TEMP_FILE}{rank}`, by default `nccl_trace_rank_<N>`
(`comm_lib_trace_rank_<N>` in newer releases), as a pickle (protocol ≥ 2) or, with TORCH_NCCL_TRACE_JSON, as JSON:
`{"version": "2.x", "pg_config": {...}, "pg_status": {...}, "entries": [{"record_id": 0, "pg_id": 0,
"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", ...}, ...]}`.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.declare import Detector, Reader

_FR_NAME = re.compile(r"(?:nccl|comm_lib)_trace_rank_?\d+(?:\.(?:pkl|pickle|json|bin))?$", re.I)
_FR_KEYS = (b"pg_config", b"pg_status", b"profiling_name", b"collective_seq_id", b"record_id",
            b"comm_lib_version", b"nccl_version", b"time_created_ns")


def looks_pickle(head: bytes) -> bool:
    """PROTO opcode + a protocol number: how every pickle of protocol >= 2 starts."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def is_fr_dump(name: str, head: bytes, text: str) -> bool:
    if looks_pickle(head):                      # any pickle is binary; only FR-looking ones are kept
        return bool(_FR_NAME.search(name)) or (b"entries" in head and _has_key(head))
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{") and '"entries"' in text and _has_key(head):
        return True
    # An FR-named file that is not line-oriented text (binary, JSON, empty) is still a dump.
    return bool(_FR_NAME.search(name)) and (not stripped or stripped[0] in "{[" or b"\x00" in head)


def _has_key(head: bytes) -> bool:
    """One of the dump's own keys in the head: asked only of a pickle or a JSON object holding `entries`, not of
    every log head a bundle's opening sniffs."""
    return any(k in head for k in _FR_KEYS)


_TRAILING = re.compile(r"(?<!\d)(\d{1,6})$")  # `trace_rank_<5,000 digits>` names no rank (tools.ranks.MAX_RANKS)


def rank_from_name(rel: str) -> int | None:
    """Global rank from a dump's name: torch writes `{prefix}{rank}`; FR's loader takes the trailing digits.
    `nccl_trace_rank_3`, `comm_lib_trace_rank_12.json`, `my_prefix7`, `a.tgz!dumps/trace_rank_3.pkl.gz` → 3, 12, 7, 3."""
    name = re.split(r"[/\\!]", rel)[-1]
    name = re.sub(r"(?:\.(?:pkl|pickle|json|bin))?(?:\.(?:gz|bz2|xz|zst))?$", "", name, flags=re.I)
    name = re.sub(r"~\d+$", "", name)  # bundle's suffix for a name seen twice in one tar
    m = _TRAILING.search(name)
    return int(m.group(1)) if m else None


# a dump has no lines: a citation's "line" is an entry index, re-read by the dump reader (tools.bundle.reread)
VERIFIERS = {"fr_dump": "trainlog_debugger.tools.sources.flight_recorder.analyze:verify_entry"}


# ---- detection: a dump is recognised by its first bytes before anything else is tried (it is binary)
FR_DUMP = "fr_dump"
KINDS = {FR_DUMP: "dump"}
DETECT = (Detector("content", 10, lambda h: FR_DUMP if is_fr_dump(h.name, h.head, h.text) else None,
                    ("dumps/nccl_trace_rank_3", b"\x80\x04\x95\x10\x00\x00")),)
READER = Reader(
    "reader.flight_recorder", None,
    "PyTorch NCCL flight-recorder dumps: each rank's last collectives, the rank that did not join",
    ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE pickles (restricted unpickler)", "the same dumps as JSON (TORCH_NCCL_TRACE_JSON)"),
    "nccl_trace_rank_0", ("collective.fr_never_joined", "collective.fr_mismatch"))
