"""Which node ran which srun tasks, as srun's own error lines state it: a scan step of this source.

    srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)
    srun: error: gpu-node-3: task 5: Exited with exit code 1

names one host and the task ids (= global ranks, one task per rank) that ended on it. A line that names a host list
(`gpu-[1-4]`, `a,b`) states no single node and is not read. The summary (tools.scan.summary, phase `file_nodes`)
keeps the first statement per rank, in file order and line order with the other sources' statements.
"""

from __future__ import annotations

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.ranks import parse_ranges
from trainlog_debugger.tools.scan.result import FileScan


def task_nodes(f: FileScan) -> list[tuple[int, int, Evidence]]:
    """(line, rank, the srun line as Evidence) for each task of the file's `slurm.task_exit` lines."""
    out: list[tuple[int, int, Evidence]] = []
    for h in f.hits:
        if h.pattern != "slurm.task_exit":
            continue
        hosts, tasks = h.fields.get("hosts", ""), h.fields.get("tasks", "")
        if hosts and "[" not in hosts and "," not in hosts:
            for r in parse_ranges(tasks):
                out.append((h.line, r, Evidence(file=f.rel, line=h.line, text=h.text, rank=r, node=hosts,
                                                kind=f.kind)))
    return out
