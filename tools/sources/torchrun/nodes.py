"""Which node ran a failed rank, as torchrun's ChildFailedError report states it: a scan step of this source.

The elastic agent's report names each failed worker's host two lines above its global rank:

    [0]:
      time      : 2024-11-05_12:34:56
      host      : gpu-node-17
      rank      : 5 (local_rank: 1)
      exitcode  : -9 (pid: 14548)

so `host : gpu-node-17` followed (within 3 lines) by `rank : 5` states that rank 5 ran on gpu-node-17. The
summary (tools.scan.summary, phase `file_nodes`) keeps the first statement per rank, in file order and line order
with the other sources' statements, and the host line is the evidence.
"""

from __future__ import annotations

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.scan.result import FileScan

PAIR_LINES = 3  # the rank line follows its host line within this many lines


def failure_nodes(f: FileScan) -> list[tuple[int, int, Evidence]]:
    """(line of the rank, rank, the host line as Evidence) for each failed worker of the file's reports."""
    out: list[tuple[int, int, Evidence]] = []
    last_host = None
    for h in f.hits:
        if h.pattern == "torchrun.failure_host":
            last_host = h
        elif h.pattern == "torchrun.failure_rank" and last_host and 0 < h.line - last_host.line <= PAIR_LINES:
            r = h.fields.get("failed_rank")
            if isinstance(r, int):
                out.append((h.line, r, Evidence(file=f.rel, line=last_host.line, text=last_host.text, rank=r,
                                                node=last_host.fields.get("host"), kind=f.kind)))
    return out
