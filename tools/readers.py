"""The structured readers: sources read as records, not as lines, listed beside the pattern catalog by
`debugger catalog` so that a user can see everything the tool understands.

Why a separate list: a stack dump, a flight-recorder pickle or a hardware snapshot is one record per process, per
collective or per device, and the question asked of it is which record differs from its peers, not which line
matches. Each reader parses in a pure module and reads files in its own read.py; each entry says which formats it
takes and which rule turns it into a finding.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reader:
    id: str
    category: str | None  # the category its findings usually carry (None: several)
    summary: str
    formats: tuple[str, ...]
    example: str
    rules: tuple[str, ...]


READERS: tuple[Reader, ...] = (
    Reader("reader.stacks", None,
           "stack dumps of a hung job, grouped STAT-style; the few ranks outside the collective the rest wait in",
           ("py-spy dump (text)", "py-spy dump --json", "faulthandler (SIGABRT, dump_traceback_later, SIGUSR1)",
            "probing python.backtrace table"),
           'Thread 4127 (idle): "MainThread"', ("collective.stack_outlier", "collective.stacks_all_in_collective")),
    Reader("reader.flight_recorder", None,
           "PyTorch NCCL flight-recorder dumps: each rank's last collectives, the rank that did not join",
           ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE pickles (restricted unpickler)", "the same dumps as JSON (TORCH_NCCL_TRACE_JSON)"),
           "nccl_trace_rank_0", ("collective.fr_never_joined", "collective.fr_mismatch")),
    Reader("reader.ais", "storage_io",
           "AIStore daemon logs and stats: the storage side of a failed read, joined to the worker that waited",
           ("aistarget/aisproxy logs", "stats lines (periodic counters, deltas)"),
           "Node t[abcd1234], Version 3.24", ("storage.ais", "storage.ais_chain")),
    Reader("reader.hardware", None,
           "hardware and fabric snapshots per node; the node out of line with its peers, joined to the ranks it ran",
           ("nvidia-smi -q (ECC, retired pages, remapped rows, throttle reasons, temperature)", "nvidia-smi topo -m",
            "ibstat", "ibv_devinfo", "perfquery (and -x)", "nccl-tests (all_reduce_perf & co.)", "dcgmi diag"),
           "Volatile ... DRAM Uncorrectable : 4", ("hardware.*",)),
)


def rows() -> list[dict]:
    """The readers as rows shaped like the pattern catalog's (`debugger catalog`, `--json`): role 'reader'."""
    return [{"id": r.id, "tier": None, "category": r.category, "role": "reader", "summary": r.summary,
             "trigger": None, "example": r.example, "fallback": False, "formats": list(r.formats),
             "rules": list(r.rules)} for r in READERS]
