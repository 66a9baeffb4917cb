"""The agent's tools over the reports `ask` makes and the first message only summarises: the rank → node map, the
flight-recorder groups, the grouped stack dumps, the hardware comparison, the Kubernetes / Vertex AI records, the
scan's tiered hits and the files (with what could not be read). Registered in agent/graph/tools.py TOOLS.

Why these: each is a report `debugger ask` already computed (or the scan already holds), and without a tool the
model could only guess at it ("which node ran rank 901?", "what were the other 1,023 stacks doing?"). Each reads
its report through `box.report(name)` (its to_json()), writes rank sets as ranges, puts the answer first (the
odd group, the outlier node, what could not be read) and the listing after it, a page at a time (offset/limit).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.caps import page, take
from trainlog_debugger.agent.graph.result import ToolResult, error, line, no_data, ok, quote, ranges
from trainlog_debugger.agent.graph.toolbox import Box

Offset = Annotated[int, Field(ge=0)]
Limit = Annotated[int, Field(ge=1, le=caps.PAGE_MAX)]
RECORD_SOURCES = ("k8s.", "cloud.")  # the pattern ids of Kubernetes and Vertex AI / Cloud Logging records


def rank_map(box: Box, node: str | None = None, offset: Offset = 0, limit: Limit = caps.PAGE) -> ToolResult:
    """Which node ran which ranks, with the line that says so; and the ranks no line places on a node.

    Args:
        node: only this node
        offset: the first node (in name order) to list: to page on
        limit: how many nodes to list
    """
    scan = box.report("scan") or {}
    by_node: dict[str, list[int]] = {}
    unplaced = []
    for r, rs in scan.get("ranks", {}).items():
        for n in rs.get("nodes") or ():
            by_node.setdefault(n, []).append(int(r))
        if not rs.get("nodes"):
            unplaced.append(int(r))
    if node is not None:
        if node not in by_node:
            return error(f"no rank ran on a node {node!r}; nodes: {', '.join(sorted(by_node)[:20]) or 'none'}")
        by_node = {node: by_node[node]}
    if not by_node:
        return no_data({"ranks_without_node": ranges(unplaced) or None, "why": "no line names a node of any rank"})
    cut: list[str] = []
    shown: list[dict] = []
    stated = scan.get("rank_nodes", {})
    rows = []
    for n in page(sorted(by_node), offset, limit, "nodes", cut):
        rs = sorted(by_node[n])
        ev = next((stated[str(r)] for r in rs if str(r) in stated and stated[str(r)].get("node") == n), None)
        rows.append({"node": n, "ranks": ranges(rs), **({"line": quote(ev, shown)} if ev else {})})
    data = {"nodes": len(by_node), "ranks_placed": sum(len(v) for v in by_node.values()),
            "ranks_without_node": ranges(unplaced) or None, "rows": rows}
    return ok(data, cut, shown)


def flight_recorder(box: Box, pg: str | None = None, seq: int | None = None) -> ToolResult:
    """The flight-recorder dumps per process group: the stuck collective, each rank's state in it (as ranges),
    the ranks that never joined and the newest entry they have, size/dtype mismatches, the ranks' stacks.

    Args:
        pg: only this process group (its name, as listed)
        seq: only the group whose stuck collective has this sequence number
    """
    fr = box.report("fr")
    if fr is None:
        return no_data("the bundle holds no flight-recorder dump")
    groups = [g for g in fr.get("groups", []) if (pg is None or g["pg"] == pg)
              and (seq is None or g.get("stuck_seq") == seq)]
    if not groups:
        known = "; ".join(f"pg {g['pg']}: stuck seq {g.get('stuck_seq')}, last done {g.get('last_done_seq')}"
                          for g in fr.get("groups", [])[:10])
        return no_data(f"no process group matches (the dumps keep each rank's entries; the report keeps the stuck "
                       f"collective of each group): {known or 'no group'}")
    cut: list[str] = []
    shown: list[dict] = []
    out = []
    for g in take(groups, caps.NCCL_GROUPS, "process groups", cut):
        states: dict[str, list[int]] = {}
        for r, st in g.get("state_by_rank", {}).items():
            states.setdefault(st, []).append(int(r))
        out.append({"pg": g["pg"], "desc": g["desc"], "stuck_seq": g.get("stuck_seq"), "op": g.get("op"),
                    "culprits": ranges(g.get("culprits", [])) or None,
                    "culprit_reasons": {str(r): why for r, why in list(g.get("culprit_reasons", {}).items())[:8]},
                    "missing_ranks": ranges(g.get("missing_ranks", [])) or None,
                    "states": {k: ranges(v) for k, v in sorted(states.items())},
                    "last_done_seq": g.get("last_done_seq"), "members": ranges(g.get("members", [])),
                    "mismatches": take(g.get("mismatches", []), caps.FR_ENTRIES, "mismatches", cut),
                    "last_seen": dict(list(g.get("last_seen", {}).items())[:caps.FR_ENTRIES]),
                    "stuck_variants": take(g.get("stuck_variants", []), caps.FR_ENTRIES, "stuck variants", cut),
                    "frames": [{"ranks": ranges(f.get("ranks", [])), "frames": f.get("frames", [])[:6]}
                               for f in take(g.get("frames", []), 3, "distinct stacks", cut)],
                    "notes": take(g.get("notes", []), caps.NOTES, "notes", cut)})
    findings = [{"summary": f["summary"], "lines": quote(f["evidence"][:caps.LINES_PER_FINDING], shown)}
                for f in take(fr.get("findings", []), caps.STORAGE_CHAIN, "findings", cut)]
    data = {"findings": findings, "dumps": len(fr.get("dumps", {})),
            "skipped": take(fr.get("skipped", []), caps.NOTES, "skipped dumps", cut), "groups": out}
    return ok(data, cut, shown)


def stacks(box: Box, offset: Offset = 0, limit: Limit = caps.PAGE) -> ToolResult:
    """The stack dumps (py-spy, faulthandler) grouped by where each process is, largest group first: which few
    ranks sit outside the collective the rest wait in, and what their frames say they were doing.

    Args:
        offset: the first group to list: to page on
        limit: how many groups to list
    """
    st = box.report("stacks")
    if st is None:
        return no_data("the bundle holds no stack dump (py-spy dump, faulthandler, probing)")
    cut: list[str] = []
    shown: list[dict] = []
    groups = [{**g, "ranks": ranges(g["ranks"]) or None, "line": quote(g["line"], shown) if g["line"] else None,
               "files": take(g["files"], 3, f"files of the group in {g['where']}", cut)}
              for g in page(st["groups"], offset, limit, "groups of stacks", cut)]
    odd = st["minority"]
    data = {"minority": None if odd is None else {**odd, "ranks": ranges(odd["ranks"]) or None},
            "processes": st["processes"], "ranked": st["ranked"], "groups": groups}
    return ok(data, cut, shown)


def hardware(box: Box) -> ToolResult:
    """The hardware and fabric snapshots (nvidia-smi -q, topo, ibstat, perfquery, nccl-tests, dcgmi) compared node
    against node: each node out of line with the check, the value's line, and the nodes compared."""
    hw = box.report("hardware")
    if hw is None:
        return no_data("the bundle holds no hardware or fabric snapshot")
    cut: list[str] = []
    shown: list[dict] = []
    outliers = [{"node": o["node"], "check": o["check"], "category": o["category"], "summary": o["summary"],
                 "absolute": o["absolute"], "lines": quote(o["evidence"][:caps.LINES_PER_FINDING], shown)}
                for o in take(hw["outliers"], caps.STEP_OUTLIERS, "outliers", cut)]
    data = {"outliers": outliers, "nodes_compared": len(hw["nodes"]), "records": hw["records"], "tools": hw["tools"],
            "nodes": take(hw["nodes"], caps.OVERVIEW_NODES, "nodes", cut)}
    return (ok if outliers else no_data)(data, cut, shown)


def records(box: Box, offset: Offset = 0, limit: Limit = caps.PAGE) -> ToolResult:
    """Kubernetes and Vertex AI records (kubectl describe / events: OOMKilled, exit codes, evictions,
    FailedScheduling, NodeNotReady; operator conditions; Vertex replica verdicts): each kind with its count, its
    ranks and its first and last line.

    Args:
        offset: the first kind of record to list: to page on
        limit: how many kinds of record to list
    """
    pats = [p for p in (box.report("scan") or {}).get("patterns", []) if p["id"].startswith(RECORD_SOURCES)]
    if not pats:
        return no_data("no Kubernetes or Vertex AI record: no kubectl describe/events output, operator condition "
                       "or Cloud Logging replica verdict in the bundle")
    cut: list[str] = []
    shown: list[dict] = []
    rows = [_pattern_row(p, shown) for p in page(pats, offset, limit, "kinds of record", cut)]
    return ok({"kinds": len(pats), "records": sum(p["count"] for p in pats), "rows": rows}, cut, shown)


def scan_hits(box: Box, tier: Annotated[int, Field(ge=0, le=9)] | None = None, rank: int | None = None,
              offset: Offset = 0, limit: Limit = caps.PAGE) -> ToolResult:
    """The scan's catalog hits (tier 1 = the strongest signals), per pattern: its count, the ranks that printed it,
    the few ranks that did or did not when most did not or did, and its first and last line.

    Args:
        tier: only patterns of this tier
        rank: only what this rank printed (counts are then that rank's)
        offset: the first pattern to list: to page on
        limit: how many patterns to list
    """
    scan = box.report("scan") or {}
    pats = [p for p in scan.get("patterns", []) if tier is None or p["tier"] == tier]
    if rank is not None:
        if str(rank) not in scan.get("ranks", {}):
            return error(f"no log line names rank {rank}; ranks seen: "
                         f"{ranges(int(r) for r in scan.get('ranks', {})) or 'none'}")
        pats = [{**p, "count": p["rank_counts"][str(rank)]} for p in pats if str(rank) in p.get("rank_counts", {})]
    if not pats:
        return no_data({"tier": tier, "rank": rank, "patterns": 0})
    pats.sort(key=lambda p: (p["tier"], -p["count"], p["id"]))
    cut: list[str] = []
    shown: list[dict] = []
    rows = [_pattern_row(p, shown) for p in page(pats, offset, limit, "patterns", cut)]
    return ok({"patterns": len(pats), "by_tier": _count_by(pats, "tier"), "rows": rows}, cut, shown)


def files(box: Box, kind: str | None = None, offset: Offset = 0, limit: Limit = caps.PAGE) -> ToolResult:
    """The bundle's files: first what could not be read or was skipped (and why), then each file with its kind,
    lines, ranks and nodes.

    Args:
        kind: only files of this kind (as listed in `kinds`)
        offset: the first file to list: to page on
        limit: how many files to list
    """
    scan = box.report("scan") or {}
    cov = scan.get("coverage", {})
    scanned = {f["file"] for f in scan.get("files", [])}
    # the files the line scan skips (a flight-recorder dump, a py-spy --json dump) are read by their own readers
    all_files = scan.get("files", []) + [{"file": rel, "kind": src.kind, "lines": None, "bytes": src.size, "ranks": [],
                                          "nodes": [], "notes": ["not a log: read by its own reader"]}
                                         for rel, src in box.sources.items() if rel not in scanned]
    kinds = _count_by(all_files, "kind")
    listed = [f for f in all_files if kind is None or f["kind"] == kind]
    if kind is not None and not listed:
        return error(f"no file of kind {kind!r}; kinds: {', '.join(kinds)}")
    cut: list[str] = []
    unread = [{"file": f["file"], "error": f["error"]} for f in all_files if f.get("error")]
    rows = [{"file": f["file"], "kind": f["kind"], "lines": f["lines"], "bytes": f["bytes"],
             "ranks": ranges(f["ranks"]) or None, "nodes": take(f["nodes"], 8, f"nodes of {f['file']}", cut),
             **({"error": f["error"]} if f.get("error") else {}),
             **({"notes": take(f["notes"], 3, f"notes of {f['file']}", cut)} if f.get("notes") else {})}
            for f in page(listed, offset, limit, "files", cut)]
    data = {"files": len(all_files), "kinds": kinds,
            "could_not_read": take(unread, caps.PAGE, "files that could not be read", cut),
            "skipped": take(cov.get("skipped", []), caps.PAGE, "skipped files", cut),
            "files_without_rank": cov.get("files_without_rank", 0),
            "bundle_notes": take(scan.get("notes", []), caps.NOTES, "notes", cut), "rows": rows}
    return ok(data, cut)


def _pattern_row(p: dict, shown: list[dict]) -> dict:
    """One scan pattern summary as the model reads it: the answer (count, which ranks, the outliers) first."""
    ends = [e for e in (p.get("first"), p.get("last")) if e]
    if len(ends) == 2 and (ends[0]["file"], ends[0]["line"]) == (ends[1]["file"], ends[1]["line"]):
        ends = ends[:1]
    lines = [line(e) for e in ends]
    shown += lines
    return {"id": p["id"], "tier": p["tier"], "role": p["role"], "category": p["category"], "count": p["count"],
            "ranks": ranges(int(r) for r in p.get("rank_counts", {})) or None,
            **({"only_ranks": ranges(p["only_ranks"])} if p.get("only_ranks") else {}),
            **({"missing_ranks": ranges(p["missing_ranks"])} if p.get("missing_ranks") else {}),
            "unranked": p.get("unranked", 0), "summary": p["summary"], "lines": lines}


def _count_by(items: list[dict], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[str(it[key])] = out.get(str(it[key]), 0) + 1
    return out
