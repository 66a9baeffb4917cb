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


def nccl_tests_stopped(f: RuleInputs):
    """An nccl-tests run whose output stops after a result row below its maxBytes, with no `Avg bus bandwidth` and
    no `Collective test concluded`: the collective at the next size never completed (it hung, or the node froze
    under it). nccl-tests exercises nothing but NCCL, the GPUs and the path between them, so what stalled is that
    path: within one host, the GPUs' peer-to-peer path (NVLink or PCIe P2P: `gpu_cuda`; an IOMMU or ACS setting of
    the platform is the alternative); across hosts, the fabric (`network`). Weak: an output cut when it was pasted
    reads the same, and the answer stays inconclusive."""
    out: list[Candidate | None] = []
    for r in f.hardware:
        if r.tool != "nccl-tests" or r.get("avg_busbw") is not None or r.get("test") is not None:
            continue
        last, top = r.get("last_row"), r.get("max_bytes")
        if last is None or top is None or last >= top:
            continue
        hosts = list(r.hosts)
        within = len(hosts) <= 1
        where = (f"within {hosts[0] if hosts else 'one host'}: the GPUs' peer-to-peer path (NVLink or PCIe P2P)"
                 if within else f"across {len(hosts)} hosts: the fabric between them")
        evs = [e for e in (r.ev("last_row"), r.ev("max_bytes"), r.ev("hosts_line")) if e is not None]
        out.append(candidate("hardware.nccl_tests_stopped", "gpu_cuda" if within else "network",
                             f"nccl-tests stopped after the {last:,}-byte row of a sweep to {top:,} bytes, with no "
                             f"average and no end: the next collective never completed, {where}", 0.4, evs, f,
                             status="hung", ranks=[], nodes=hosts[:1] if within and hosts else [],
                             recommendations=[
                                 ("rerun it with NCCL_P2P_DISABLE=1 (and then NCCL_P2P_LEVEL=PHB): if it completes, "
                                  "the peer-to-peer path is at fault; check `nvidia-smi topo -m`, `nvidia-smi nvlink "
                                  "-s` and dmesg for Xid/NVLink errors, and that the IOMMU or PCIe ACS does not block "
                                  "P2P" if within else
                                  "rerun it between pairs of these hosts to find the link that hangs; check ibstat "
                                  "and the switch ports, NCCL_DEBUG=INFO for the transport it chose"),
                                 "rerun with NCCL_DEBUG=INFO to see where it stops"]))
    return out


RULES = [out_of_line, nccl_tests_stopped]
