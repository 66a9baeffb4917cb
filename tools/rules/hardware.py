"""Hardware and fabric snapshots (tools/sources/hw): a node out of line with its peers, named with the ranks it ran.

Why a rule of its own: the snapshots are not log lines the catalog can match; they are values per node, and the
claim is a comparison ("mlx5_0 port 1 is Down on node-7 and Active on the other 127"). What the job did comes from
the worker logs when there are any: a hang (watchdog timeouts) or a crash; from snapshots alone the answer is
`inconclusive`, never `completed`: a bad node does not say how the job ended.
"""

from __future__ import annotations

from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import Candidate, RuleInputs, candidate, restart_without

MAX_CANDIDATES = 8
STALLS = 0.7  # outliers this strong can stall a collective (a port down, link errors, ECC, a diag Fail); a throttle cannot
_HANG = ("pytorch.watchdog_timeout", "pytorch.heartbeat_stuck", "pytorch.watchdog_pg_status")
_ADVICE = {
    "gpu_cuda": "drain {node} and check the GPU (`nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE`, `dcgmi diag -r 3`); "
                "reset or replace it before it runs jobs again",
    "network": "drain {node} and check its fabric link (`ibstat`, `perfquery -x`, the cable and switch port); rerun "
               "nccl-tests across it before it runs jobs again",
}


def _status(f: RuleInputs) -> str:
    """What the job did, as far as the worker logs show: hung (collective watchdogs), crashed (the NCCL analysis
    found a crash), else inconclusive (snapshots alone say which node is bad, not how the job ended)."""
    if f.hits(*_HANG) or (f.nccl is not None and getattr(f.nccl, "verdict", "") in ("straggler", "fabric")):
        return "hung"
    if f.nccl is not None and getattr(f.nccl, "verdict", "") == "crash":
        return "crashed"
    return "inconclusive"


def out_of_line(f: RuleInputs):
    """Each node whose snapshot values differ from its peers' (tools/sources/hw/report.py), strongest first: the node, the
    ranks it ran (the scan's rank→node attribution), the snapshot lines that show it."""
    if not f.hardware:
        return []
    from trainlog_debugger.tools.sources.hw.report import compare
    status = _status(f)
    # every rank entered the collective and none completed it: the logs say the fabric or a node stalled it and
    # cannot say which; a snapshot that names one is the other half of that story, on no clock to order it by
    unnamed_hang = f.nccl is not None and getattr(f.nccl, "verdict", "") == "fabric"
    ranks_by_node: dict[str, list[int]] = {}
    for rank, ev in f.scan.rank_nodes.items():
        if ev.node:
            ranks_by_node.setdefault(ev.node, []).append(rank)
    out: list[Candidate | None] = []
    seen: set[tuple[str | None, str]] = set()
    for o in compare(f.hardware):
        if (o.node, o.category) in seen or len(out) >= MAX_CANDIDATES:
            continue
        seen.add((o.node, o.category))
        ranks = sorted(ranks_by_node.get(o.node, [])) if o.node else []
        who = o.node or "the node of that snapshot (not named by the bundle)"
        ran = f"; it ran rank{'s' if len(ranks) > 1 else ''} {ranks_str(ranks)}" if ranks else ""
        recs = [_ADVICE[o.category].format(node=who)]
        if not o.node:
            recs.append("collect the snapshots with `debugger collect` (its collect.json names the host)")
        out.append(candidate(f"hardware.{o.check}", o.category, o.summary + ran, o.strength, o.evidence, f,
                             ranks=ranks, nodes=[o.node] if o.node else [],
                             facts={**o.facts, "snapshot": o.file, "absolute": o.absolute,
                                    **({"cross_source": True} if unnamed_hang and o.strength >= STALLS else {})},
                             status=status,
                             restart=restart_without(o.node), recommendations=recs))
    return out


RULES = [out_of_line]
