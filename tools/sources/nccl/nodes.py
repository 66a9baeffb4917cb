"""Which host runs which global rank, as NCCL's communicator init lines state it: a scan step of this source.

    node1:2345:2400 [3] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 61000

is printed by host node1 for rank 3 of a communicator of 16 ranks. In a communicator of the whole world (nranks =
the world size) that is global rank 3; smaller communicators (tensor and pipeline groups) number their ranks
differently and are not read. The summary (tools.scan.summary, phase `nodes`) runs this after the launchers'
statements (torchrun, srun) and keeps them where both speak of a rank.
"""

from __future__ import annotations

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.scan.result import FileScan, to_evidence


def comm_rank_nodes(files: list[FileScan], world: int | None) -> list[tuple[int, Evidence]]:
    """(rank, the init line as Evidence) for each world-sized communicator's init line that names its host."""
    out: list[tuple[int, Evidence]] = []
    if not world:
        return out
    for f in files:
        for h in f.hits:
            if h.pattern != "nccl.comm_init" or not h.node or h.fields.get("nranks") != world:
                continue
            r = h.fields.get("comm_rank")
            if isinstance(r, int) and 0 <= r < world:
                out.append((r, to_evidence(h, f.rel, f.kind).model_copy(update={"rank": r})))
    return out
