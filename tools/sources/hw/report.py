"""Which node is out of line with its peers, from the hardware snapshots (pure).

Why relative and not thresholds: counters accumulate since the last reset, a port can be left down by design and
a bus bandwidth depends on the topology, so a value means little alone; the same value on one node and not on its
peers is what singles a node out. A few values are bad anywhere (an uncorrectable ECC error since boot, a failed
row remap, a dcgmi diag Fail): those are checked absolutely, and they are the only checks made when the snapshots
cover one node. Every outlier cites the snapshot line of the value that makes it one.

Peers are the nodes (the `node` of each record; an unattributed file is its own peer, named as unattributed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median

from trainlog_debugger.tools.sources.hw.nvsmi_q import HW_THROTTLE
from trainlog_debugger.tools.sources.hw.perfquery import ERRORS
from trainlog_debugger.tools.sources.hw.record import Record
from trainlog_debugger.tools.model import Evidence

BUSBW_FACTOR = 0.7  # a run below this fraction of its peers' median bus bandwidth is out of line
COUNTER_FACTOR = 10  # a non-zero error counter this many times the peers' median (or where peers read zero)
MAX_OUTLIERS = 64


@dataclass
class Outlier:
    """One node out of line on one check: what, with the lines that show it (the node's own value first)."""

    node: str | None
    check: str
    category: str
    strength: float
    summary: str
    evidence: list[Evidence]
    file: str
    facts: dict = field(default_factory=dict)
    absolute: bool = False  # bad on its own, not only against peers


def peer_key(r: Record) -> str:
    return r.node if r.node else f"unattributed:{r.file}"


def where(r: Record) -> str:
    return r.node if r.node else f"an unattributed node ({r.file})"


def compare(records: list[Record]) -> list[Outlier]:
    """Every outlier, strongest first; at most MAX_OUTLIERS."""
    by_tool: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_tool[r.tool].append(r)
    out = (_gpus(by_tool["nvidia-smi"]) + _ports(by_tool["ibstat"] + by_tool["ibv_devinfo"])
           + _counters(by_tool["perfquery"]) + _busbw(by_tool["nccl-tests"]) + _diag(by_tool["dcgmi"])
           + _topo(by_tool["topo"]))
    out.sort(key=lambda o: (-o.strength, o.node or "~", o.check))
    return out[:MAX_OUTLIERS]


def _nodes(recs: list[Record]) -> set[str]:
    return {peer_key(r) for r in recs}


def _minority(bad: set[str], all_nodes: set[str]) -> bool:
    """Out of line: some nodes have it and at least as many peers do not (two nodes to compare at least: with two,
    the one with errors, a port down or the lower rate is the odd one, since every check says which way is bad)."""
    return len(all_nodes) >= 2 and 0 < len(bad) and len(bad) * 2 <= len(all_nodes)


# ---- GPUs (nvidia-smi -q) --------------------------------------------------------------------------------------
# (check, test on a GPU record → (evidence key, words) or None, absolute?, strength)
def _ecc_volatile(r):
    n = r.get("ecc.volatile.uncorrectable", 0)
    return ("ecc.volatile.uncorrectable", f"{n} uncorrectable ECC error(s) since the driver loaded") if n else None


def _remap_failure(r):
    return ("remap.failure", "a row remapping failure") if r.get("remap.failure") else None


def _ecc_aggregate(r):
    n = r.get("ecc.aggregate.uncorrectable", 0)
    return ("ecc.aggregate.uncorrectable", f"{n} uncorrectable ECC error(s) over its lifetime") if n else None


def _retired(r):
    if r.get("retired.dbe", 0):
        return "retired.dbe", f"{r.get('retired.dbe')} page(s) retired for double-bit ECC errors"
    return ("retired.pending", "a page retirement pending") if r.get("retired.pending") else None


def _remap_pending(r):
    if r.get("remap.pending"):
        return "remap.pending", "a row remap pending (an uncorrectable error since the last reset)"
    n = r.get("remap.uncorrectable", 0)
    return ("remap.uncorrectable", f"{n} row(s) remapped for uncorrectable errors") if n else None


def _throttle(r):
    active = [k for k in r.values if k.startswith("throttle:") and k.split(":", 1)[1] in HW_THROTTLE]
    return (active[0], f"clocks held down: {active[0].split(':', 1)[1]} active") if active else None


GPU_CHECKS = (("ecc_uncorrectable", _ecc_volatile, True, 0.85),
              ("row_remap_failure", _remap_failure, True, 0.85),
              ("ecc_lifetime", _ecc_aggregate, False, 0.6),
              ("retired_pages", _retired, False, 0.6),
              ("row_remap_pending", _remap_pending, False, 0.65),
              ("hw_throttle", _throttle, False, 0.6))


def _gpus(recs: list[Record]) -> list[Outlier]:
    out = []
    nodes = _nodes(recs)
    for check, test, absolute, strength in GPU_CHECKS:
        hits = [(r, got) for r in recs if (got := test(r))]
        bad = {peer_key(r) for r, _ in hits}
        if not hits or not (absolute or _minority(bad, nodes)):
            continue
        for node in sorted(bad):
            mine = [(r, got) for r, got in hits if peer_key(r) == node]
            r, (key, words) = mine[0]
            gpus = ", ".join(x.subject for x, _ in mine[:4])
            peers = "" if absolute else f"; {len(nodes) - len(bad)} of {len(nodes)} nodes have none"
            out.append(Outlier(r.node, check, "gpu_cuda", strength, f"{words} on {gpus} of {where(r)}{peers}",
                               _cited(x.ev(k) for x, (k, _) in mine[:3]), r.file,
                               {"gpus": [x.subject for x, _ in mine], "tool": "nvidia-smi -q"}, absolute))
    return out


def _cited(evs: Iterable[Evidence | None]) -> list[Evidence]:
    """The lines an outlier cites, in order: a value read without a line (none today) cites nothing."""
    return [e for e in evs if e is not None]


# ---- IB ports (ibstat, ibv_devinfo) ----------------------------------------------------------------------------
def _ports(recs: list[Record]) -> list[Outlier]:
    """A port Down/Polling (or not LinkUp) where the same port is up on most peers; an active port slower than the
    median of its peers' active ports of the same link layer."""
    out: list[Outlier] = []
    nodes = _nodes(recs)
    if len(nodes) < 2:
        return out
    up = lambda r: r.get("state") == "Active" and r.get("physical_state", "LinkUp") == "LinkUp"  # noqa: E731
    by_subject: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_subject[r.subject].append(r)
    for subject, rs in sorted(by_subject.items()):
        down = [r for r in rs if not up(r) and (r.get("state") or r.get("physical_state"))]
        if down and {peer_key(r) for r in rs if up(r)} and _minority({peer_key(r) for r in down}, _nodes(rs)):
            for r in down:
                key = "state" if r.get("state") != "Active" else "physical_state"
                out.append(Outlier(r.node, "ib_port_down", "network", 0.85,
                                   f"IB port {subject} is {r.get('state')}/{r.get('physical_state', '?')} on "
                                   f"{where(r)} while it is Active on its peers", _cited([r.ev(key)]), r.file,
                                   {"port": subject, "state": r.get("state"), "physical_state": r.get("physical_state")}))
    for layer in {r.get("link_layer") for r in recs}:
        active = [r for r in recs if up(r) and r.get("rate") and r.get("link_layer") == layer]
        for r in active:
            peers = [x.get("rate") for x in active if peer_key(x) != peer_key(r)]
            if len(peers) >= 1 and r.get("rate") < median(peers):
                slow_nodes = {peer_key(x) for x in active if x.get("rate") < median(peers)}
                if not _minority(slow_nodes, _nodes(active)):
                    continue
                out.append(Outlier(r.node, "ib_port_rate", "network", 0.7,
                                   f"IB port {r.subject} on {where(r)} runs at {r.get('rate'):g} Gb/s, its peers at "
                                   f"{median(peers):g}", _cited([r.ev("rate")]), r.file, {"port": r.subject,
                                                                                  "rate": r.get("rate")}))
    return out


# ---- IB error counters (perfquery) -----------------------------------------------------------------------------
def _counters(recs: list[Record]) -> list[Outlier]:
    """Per node, the largest value of each error counter over its ports; a node whose counter is non-zero where
    its peers read zero, or COUNTER_FACTOR times their median, is out of line."""
    out: list[Outlier] = []
    per_node: dict[str, dict[str, Record]] = defaultdict(dict)
    for r in recs:
        for c in ERRORS:
            if c in r.values and (c not in per_node[peer_key(r)] or r.get(c) > per_node[peer_key(r)][c].get(c)):
                per_node[peer_key(r)][c] = r
    if len(per_node) < 2:
        return out
    for node, counters in sorted(per_node.items()):
        bad = []
        for c, r in counters.items():
            peers = [m[c].get(c) for n, m in per_node.items() if n != node and c in m]
            if r.get(c) and peers and (max(peers) == 0 or r.get(c) >= COUNTER_FACTOR * max(1, median(peers))):
                bad.append((c, r))
        if bad:
            high = [c for c, _ in bad if c in ("LinkDownedCounter", "SymbolErrorCounter", "LinkErrorRecoveryCounter",
                                               "PortRcvErrors", "LocalLinkIntegrityErrors")]
            r0 = bad[0][1]
            what = ", ".join(f"{c}={r.get(c)} ({r.subject})" for c, r in bad[:4])
            out.append(Outlier(r0.node, "ib_link_errors", "network", 0.7 if high else 0.5,
                               f"IB link error counters on {where(r0)}: {what}; its peers read zero or far less",
                               _cited(r.ev(c) for c, r in bad[:3]), r0.file, {"counters": {c: r.get(c) for c, r in bad},
                                                                        "peer": node}))
    # errors on most nodes are the fabric's state, not one node's
    return out if _minority({o.facts["peer"] for o in out}, set(per_node)) else []


# ---- nccl-tests ------------------------------------------------------------------------------------------------
def _busbw(recs: list[Record]) -> list[Outlier]:
    """A run whose average bus bandwidth is below BUSBW_FACTOR × the median of the other runs. A run between two
    nodes blames the node that every slow run shares and no normal run has, else both."""
    runs = [r for r in recs if r.get("avg_busbw") is not None]
    if len(runs) < 2:
        return []
    slow = [r for r in runs if r.get("avg_busbw") < BUSBW_FACTOR * median(x.get("avg_busbw") for x in runs if x is not r)]
    if not slow or len(slow) * 2 > len(runs):
        return []
    fine_hosts = {h for r in runs if r not in slow for h in (r.hosts or (r.node,))}
    shared = set.intersection(*({*(r.hosts or (r.node,))} for r in slow)) - fine_hosts
    out = []
    for r in slow:
        others = median(x.get("avg_busbw") for x in runs if x is not r)
        blamed = [r.node] if r.node and len(r.hosts) <= 1 else sorted(shared & set(r.hosts)) or sorted(set(r.hosts))
        for node in blamed or [None]:
            evs = _cited([r.ev("avg_busbw"), r.ev("hosts_line")])
            out.append(Outlier(node, "low_busbw", "network", 0.7,
                               f"nccl-tests on {node or where(r)}: average bus bandwidth {r.get('avg_busbw'):g} GB/s, "
                               f"the other {len(runs) - 1} run(s) {others:g} (below {BUSBW_FACTOR:g}x)", evs, r.file,
                               {"avg_busbw": r.get("avg_busbw"), "peers_median_busbw": others,
                                "hosts": list(r.hosts)}))
    return out


# ---- dcgmi diag ------------------------------------------------------------------------------------------------
def _diag(recs: list[Record]) -> list[Outlier]:
    out = []
    for r in recs:
        if r.get("result") == "Fail":
            gpus = r.get("failed_gpus") or []
            on = f" (GPU {', '.join(map(str, gpus))})" if gpus else ""
            evs = _cited([r.ev("result")] + [e for e in (r.ev("failed_gpus"), r.ev("detail")) if e and e != r.ev("result")])
            out.append(Outlier(r.node, "dcgm_diag_fail", "gpu_cuda", 0.8,
                               f"dcgmi diag: {r.subject} failed{on} on {where(r)}", evs, r.file,
                               {"test": r.subject, "gpus": gpus}, True))
    return out


# ---- topology (nvidia-smi topo -m) -----------------------------------------------------------------------------
def _topo(recs: list[Record]) -> list[Outlier]:
    """Within one node's matrix: GPU pairs with fewer NVLinks than most pairs have (a pair left on PCIe where its
    peers have NVLink, a link down in a bonded set)."""
    out = []
    by_file: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_file[r.file].append(r)
    for _, pairs in sorted(by_file.items()):
        links = [p.get("nvlinks") for p in pairs]
        usual = median(links) if links else 0
        if not usual or len(pairs) < 3:
            continue
        short = [p for p in pairs if p.get("nvlinks") < usual]
        if short and len(short) * 2 < len(pairs):
            r = short[0]
            what = ", ".join(f"{p.subject} {p.get('link')}" for p in short[:4])
            out.append(Outlier(r.node, "nvlink_missing", "gpu_cuda", 0.6,
                               f"NVLink topology on {where(r)}: {what} where the other pairs have NV{usual:g}",
                               _cited(p.ev("link") for p in short[:3]), r.file, {"pairs": [p.subject for p in short]}, True))
    return out


def to_json(records: list[Record]) -> dict:
    """The snapshots as the agent reads them (it reads every report as JSON, never its objects): the nodes compared,
    what each tool reported on, and every outlier (strongest first) with the lines that show it."""
    from trainlog_debugger.tools.jsonable import to_jsonable
    tools: dict[str, int] = defaultdict(int)
    for r in records:
        tools[r.tool] += 1
    return {"nodes": sorted({peer_key(r) for r in records}), "records": len(records), "tools": dict(tools),
            "outliers": [to_jsonable(o) for o in compare(records)]}
