"""Flight-recorder dumps matched across ranks, per process group: the stuck collective, the ranks missing from it,
mismatches, pending point-to-point ops, and the culprits (tools.sources.flight_recorder.analyze has the comparison with torch's fr_trace).

How `analyze` decides, per process group (PG = `process_group[0]`, the pg_name, the same on every rank; members =
GLOBAL ranks from `pg_config[pg_name]["ranks"]`, a string like "[0, 1, 2, 3]"; where pg_config does not list a PG
the members are the ranks that have entries for it, and the report says so). Collectives are matched across ranks by
`collective_seq_id` (2.3: `seq_id`), point-to-point ops separately (pending send/recv pairs, by peer):
- done: state `completed`; or a later seq of the same PG completed on that rank (one stream, in order); or
  `pg_status[pg_id].last_completed_collective >= seq` (≥2.5, PGs with no p2p on that rank); or, in a dump where
  no entry ever left `scheduled` (gloo: no device events), `retired`.
- stuck seq = the lowest seq that some member recorded and did not finish.
- missing ranks = members with a dump and no entry for that seq whose buffer covers it: their newest entry for the PG
  is older (never joined), or there is a gap, or they have no entry for the PG and their ring buffer never wrapped
  (first record_id 0); `pg_status.last_enqueued_collective < seq` confirms. A rank whose OLDEST entry for the PG is
  newer than the seq lost it to the ring buffer: `not_recorded`, never "missing".
- mismatches (FR's own `type_of_mismatch` names) for every seq that several ranks recorded: profiling_name
  (COLLECTIVE_TYPE_MISMATCH), input/output sizes (SIZE_OR_SYNTAX_MISMATCH; not for ops whose sizes differ by design:
  all_to_all*, *_v, scatter inputs, gather outputs), dtypes (COLLECTIVE_DTYPE_MISMATCH), and the state at the stuck
  seq (COLLECTIVE_STATE_MISMATCH, blaming only ranks that are BEHIND the majority). Culprit = the minority value's
  ranks; a tie names nobody.
- culprits = missing ranks (or, when more members are missing than joined, the few that joined alone: an extra
  collective), plus the minority ranks of each mismatch. Ranks with no dump at all are listed, never guessed.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from trainlog_debugger.tools.sources.flight_recorder.entries import P2P_META, STATES, FREntry, RankData, compact, optype
from trainlog_debugger.tools.sources.flight_recorder.report import ALL, FRGroup, FRReport, Mismatch, findings_of, ranks_phrase
from trainlog_debugger.tools.ranks import ranks_str

MAX_MISMATCHES = 10             # per PG, earliest first (FR's own --mismatch_cap default)
_RANK = {s: i for i, s in enumerate(STATES)}
# Ops whose per-rank sizes legitimately differ (FR's Op.match exempts the same ones).
_NO_INPUT_SIZE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "scatter", "all_gather_v",
                            "reduce_scatter_v", "coalesced"})
_NO_OUTPUT_SIZE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "gather", "all_gather_v",
                             "reduce_scatter_v", "coalesced"})
_NO_INPUT_DTYPE = frozenset({"scatter", "broadcast", "_broadcast_oop", "coalesced"})
_NO_OUTPUT_DTYPE = frozenset({"gather", "coalesced"})


def _minority(values: dict[int, str]) -> tuple[str | None, dict[str, list[int]], list[int]]:
    """rank → value: (majority value or None on a tie, value → ranks (most common first), minority ranks)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for r, v in sorted(values.items()):
        groups[v].append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    if not ordered:
        return None, {}, []
    if len(ordered) > 1 and len(ordered[0][1]) == len(ordered[1][1]):
        return None, dict(ordered), []
    return ordered[0][0], dict(ordered), sorted(r for _, rs in ordered[1:] for r in rs)


def _natural(s: str) -> tuple:
    return tuple((0, int(t), "") if t.isdecimal() and len(t) <= 20 else (1, 0, t) for t in re.split(r"(\d+)", s) if t)


def analyze_ranks(data: dict[int, RankData], names: dict[int, str] | None, fetch) -> FRReport:
    names = {r: (names or {}).get(r) or f"nccl_trace_rank_{r}" for r in data}
    notes: list[str] = []
    versions: dict[str, list[int]] = defaultdict(list)
    for r, d in data.items():
        versions[d.version].append(r)
    if len(versions) > 1:
        notes.append("dumps disagree on the FR version: " + "; ".join(f"{v} on {ranks_phrase(rs)}" for v, rs in versions.items()))

    # PG identity: pg_name, split further when pg_config gives one name several rank sets (split_group).
    names_seen: dict[str, None] = {}
    for d in data.values():
        for e in d.evs:
            names_seen.setdefault(e.pg, None)
    keyed: dict[tuple[str, tuple[int, ...] | None], dict[int, list[FREntry]]] = {}
    descs: dict[tuple, Counter] = defaultdict(Counter)
    by_rank_pg = {r: _by_pg(d.evs) for r, d in data.items()}
    for pg in sorted(names_seen, key=_natural):
        sets = sorted({tuple(own) for d in data.values() if (own := d.cfg.get(pg, ("", None))[1])})
        for r, d in data.items():
            mine = by_rank_pg[r].get(pg, [])
            own = d.cfg.get(pg, ("", None))[1]
            if len(sets) <= 1:
                key = (pg, sets[0] if sets else None)
            else:
                key = (pg, tuple(own) if own else next((s for s in sets if r in s), sets[0]))
            slot = keyed.setdefault(key, {})
            if mine:
                slot[r] = mine
                descs[key].update(e.desc for e in mine)
            elif own and r in own and tuple(own) == key[1]:
                slot.setdefault(r, [])

    groups = []
    for (pg, members_cfg), per_rank in keyed.items():
        with_entries = sorted(r for r, ents in per_rank.items() if ents)
        if not with_entries:
            continue
        split = len({k[1] for k in keyed if k[0] == pg}) > 1
        members = sorted(set(members_cfg or ()) | set(with_entries))
        desc = descs[(pg, members_cfg)].most_common(1)[0][0] if descs[(pg, members_cfg)] else ""
        g = _analyze_group(f"{pg}@{ranks_str(members, ALL)}" if split else pg, pg, desc, members, per_rank, data)
        if not members_cfg:
            g.members_from = "entries"
            g.notes.append("pg_config lists no ranks for this PG: members are the ranks with entries for it, so a "
                           "member that never used it cannot be seen missing")
        elif set(with_entries) - set(members_cfg):
            g.notes.append(f"{ranks_phrase(sorted(set(with_entries) - set(members_cfg)))}: entries for this PG but not in its "
                           "pg_config ranks")
        groups.append(g)

    expected = sorted(set(data) | {r for g in groups for r in g.members})
    stuck = [g for g in groups if g.stuck_seq is not None]
    first = min(stuck, key=lambda g: (g.stuck_created_ns is None, g.stuck_created_ns or 0)) if stuck else None
    if len(stuck) > 1 and first is not None and first.stuck_created_ns is not None:
        notes.append(f"{len(stuck)} PGs are stuck; the oldest stuck entry is in PG {first.pg}: the others may be "
                     "waiting on it")
    rep = FRReport(dumps=names, skipped=[], groups=groups, expected_ranks=expected,
                   no_dump_ranks=sorted(set(expected) - set(data)), culprits=sorted({r for g in groups for r in g.culprits}),
                   first_stuck=first.pg if first else None, versions=dict(versions), notes=notes)
    rep._findings = findings_of(rep, fetch)   # not a dataclass field: kept out of JSON
    return rep


def _by_pg(evs: list[FREntry]) -> dict[str, list[FREntry]]:
    out: dict[str, list[FREntry]] = defaultdict(list)
    for e in evs:
        out[e.pg].append(e)
    return out


def _analyze_group(label: str, pg: str, desc: str, members: list[int], per_rank: dict[int, list[FREntry]],
                   data: dict[int, RankData]) -> FRGroup:
    coll: dict[int, dict[int, list[FREntry]]] = {}
    p2p: dict[int, list[FREntry]] = {}
    for r, lst in per_rank.items():
        c: dict[int, list[FREntry]] = defaultdict(list)
        for e in lst:
            if e.p2p:
                p2p.setdefault(r, []).append(e)
            elif e.seq is not None:
                c[e.seq].append(e)
        coll[r] = dict(c)
    status = {r: data[r].status_by_pg.get(pg) for r in per_rank}

    g = FRGroup(pg=label, desc=desc, members=members, stuck_seq=None, op=None, state_by_rank={}, missing_ranks=[],
                mismatches=[], frames=[], culprits=[])
    g.no_dump_ranks = [r for r in members if r not in data]

    # mismatches: every seq that two or more ranks recorded, earliest first
    all_seqs = sorted({s for c in coll.values() for s in c})
    cut = 0
    for s in all_seqs:
        at = {r: c[s] for r, c in coll.items() if s in c}
        if len(at) < 2:
            continue
        for m in _compare(s, at):
            if len(g.mismatches) < MAX_MISMATCHES:
                g.mismatches.append(m)
            else:
                cut += 1
    if cut:
        g.notes.append(f"showing {MAX_MISMATCHES} of {MAX_MISMATCHES + cut} mismatches (earliest first)")

    stuck = next((s for s in all_seqs if any(s in c and not all(e.done for e in c[s]) for c in coll.values())), None)
    if stuck is not None:
        _stuck_collective(g, stuck, coll, status, data, set(p2p))
    elif all_seqs:
        g.last_done_seq = all_seqs[-1]
    g.p2p_pending = _p2p_pending(members, p2p, data, g)
    if stuck is None and g.p2p_pending:
        first = min(g.p2p_pending, key=lambda p: (p["created_ns"] is None, p["created_ns"] or 0, p["rank"]))
        g.stuck_seq, g.op, g.seq_kind = first["seq"], first["op"], "p2p"
        g.stuck_created_ns = first["created_ns"]
        for p in g.p2p_pending:
            if p["seq"] == first["seq"] and p["op"] == first["op"]:
                g.entries[p["rank"]] = p["entry"]
        for r in members:
            g.state_by_rank[r] = "no_dump" if r not in data else next(
                (p["state"] for p in g.p2p_pending if p["rank"] == r), "idle")   # idle: nothing pending here
    for m in g.mismatches:
        for r in m.culprit_ranks:
            g.culprit_reasons.setdefault(r, []).append(f"{m.type_of_mismatch.lower()}@{m.seq}")
    for p in g.p2p_pending:
        if p["peer_state"] == "missing":
            g.culprit_reasons.setdefault(p["peer"], []).append(f"p2p_never_posted@{p['rank']}:{p['seq']}")
    g.culprits = sorted(g.culprit_reasons)
    return g


def _compare(s: int, at: dict[int, list[FREntry]]) -> list[Mismatch]:
    # fast path: values are canonical objects (Canon), so equal values are the same object
    sigs = {tuple((e.op, id(e.isz), id(e.osz), id(e.idt), id(e.odt)) for e in ents) for ents in at.values()}
    if len(sigs) == 1:
        return []
    out = []
    entries = {r: ents[-1].idx for r, ents in at.items()}
    maj, found, minority = _minority({r: " + ".join(e.op for e in ents) for r, ents in at.items()})
    if len(found) > 1:
        return [Mismatch(s, "collective", "COLLECTIVE_TYPE_MISMATCH", "profiling_name", maj, found, minority, entries)]
    typ = optype(next(iter(at.values()))[0].op)
    checks = [("input_sizes", "isz", "SIZE_OR_SYNTAX_MISMATCH", _NO_INPUT_SIZE),
              ("output_sizes", "osz", "SIZE_OR_SYNTAX_MISMATCH", _NO_OUTPUT_SIZE),
              ("input_dtypes", "idt", "COLLECTIVE_DTYPE_MISMATCH", _NO_INPUT_DTYPE),
              ("output_dtypes", "odt", "COLLECTIVE_DTYPE_MISMATCH", _NO_OUTPUT_DTYPE)]
    for fld, attr, kind, exempt in checks:
        if typ in exempt:
            continue
        vals = {r: _sig(ents, attr) for r, ents in at.items() if any(getattr(e, attr) for e in ents)}  # empty = not recorded
        maj, found, minority = _minority(vals)
        if len(found) > 1:
            out.append(Mismatch(s, "collective", kind, fld, maj, found, minority, entries))
            if kind == "SIZE_OR_SYNTAX_MISMATCH":
                break  # input and output sizes of one op disagree together; one record says it
    return out


def _sig(evs: list[FREntry], attr: str) -> str:
    vals = [getattr(e, attr) for e in evs]
    return compact(vals[0] if len(vals) == 1 else vals)


def _stuck_collective(g: FRGroup, s: int, coll: dict[int, dict[int, list[FREntry]]],
                      status: dict[int, dict[str, int] | None], data: dict[int, RankData],
                      p2p_ranks: set[int]) -> None:
    g.stuck_seq = s
    at = {r: c[s] for r, c in coll.items() if s in c}
    g.op = next(iter(_minority({r: " + ".join(e.op for e in ents) for r, ents in at.items()})[1]))  # most common
    g.stuck_created_ns = min((e.created for ents in at.values() for e in ents if e.created is not None), default=None)
    g.entries = {r: ents[0].idx for r, ents in at.items()}
    below = [x for x in sorted({x for c in coll.values() for x in c}) if x < s]
    g.last_done_seq = below[-1] if below else None
    _states_at(g, s, coll, status, data, p2p_ranks)
    _blame_absent(g, s, at)
    _state_mismatch(g, s, at)
    _variants_at(g, at)


def _states_at(g: FRGroup, s: int, coll: dict[int, dict[int, list[FREntry]]],
               status: dict[int, dict[str, int] | None], data: dict[int, RankData], p2p_ranks: set[int]) -> None:
    """Each member's state at the stuck seq: its entry's state, `missing` (never recorded it though its buffer
    covers it), `not_recorded` (the ring buffer wrapped past it, or pg_status says it was enqueued), `no_dump`."""
    for r in g.members:
        if r in g.no_dump_ranks:
            g.state_by_rank[r] = "no_dump"
            continue
        c = coll.get(r, {})
        if s in c:
            ents = c[s]
            g.state_by_rank[r] = "completed" if all(e.done for e in ents) else STATES[
                min(_RANK.get(e.state, 0) for e in ents)]
            continue
        seqs = sorted(c)
        enq = (status.get(r) or {}).get("last_enqueued_collective")
        gap = bool(seqs) and seqs[0] < s < seqs[-1] and r not in p2p_ranks  # (2.3 counted p2p in the same seq)
        if (seqs and seqs[-1] < s) or gap or (not seqs and not data[r].wrapped):
            if enq is not None and enq >= s:
                g.state_by_rank[r] = "not_recorded"
                g.notes.append(f"rank {r}: pg_status says #{enq} was enqueued but no entry for #{s} is recorded")
                continue
            g.state_by_rank[r] = "missing"
            if seqs:
                newest = c[seqs[-1]][-1]
                g.last_seen[r] = {"seq": newest.seq, "op": newest.op, "state": "completed" if newest.done
                                  else newest.state, "entry": newest.idx}
            else:
                g.last_seen[r] = {"seq": None, "op": None, "state": "never used this PG"}
                if (nw := data[r].newest) is not None:  # where it is instead: its newest entry in any PG
                    g.last_seen[r].update(entry=nw.idx, elsewhere={"pg": nw.pg, "seq": nw.seq, "op": nw.op,
                                                                   "state": nw.state})
            if enq is not None:
                g.last_seen[r]["last_enqueued_collective"] = enq
        else:
            g.state_by_rank[r] = "not_recorded"
    g.missing_ranks = sorted(r for r, v in g.state_by_rank.items() if v == "missing")
    g.not_recorded_ranks = sorted(r for r, v in g.state_by_rank.items() if v == "not_recorded")
    if g.not_recorded_ranks:
        g.notes.append(f"{ranks_phrase(g.not_recorded_ranks)}: the ring buffer no longer holds #{s} (oldest entry for "
                       "this PG is newer): not counted as missing")


def _blame_absent(g: FRGroup, s: int, at: dict[int, list[FREntry]]) -> None:
    """Ranks that never joined are the culprits, unless they are the majority: then the few that joined alone are."""
    joined = sorted(at)
    if g.missing_ranks:
        if len(g.missing_ranks) > len(joined):
            for r in joined:
                g.culprit_reasons.setdefault(r, []).append("joined_alone")
        else:
            for r in g.missing_ranks:
                g.culprit_reasons.setdefault(r, []).append("never_joined")
    elif g.no_dump_ranks:
        g.notes.append(f"every rank with a dump reached #{s}; {ranks_phrase(g.no_dump_ranks)}: no dump (a rank that "
                       "crashed or was killed writes none): look there")


def _state_mismatch(g: FRGroup, s: int, at: dict[int, list[FREntry]]) -> None:
    """States at the stuck seq that differ: blame only the ranks behind the majority."""
    states = {r: v for r, v in g.state_by_rank.items() if v in STATES}
    maj, found, minority = _minority(states)
    if len(found) > 1:
        behind = [r for r in minority if maj is not None and _RANK[states[r]] < _RANK[maj]]
        g.mismatches.append(Mismatch(s, "collective", "COLLECTIVE_STATE_MISMATCH", "state", maj, dict(found), behind,
                                     {r: at[r][0].idx for r in at}))


def _variants_at(g: FRGroup, at: dict[int, list[FREntry]]) -> None:
    """What each rank recorded at the stuck seq, identical records grouped; their stack frames likewise."""
    variants: dict[tuple, list[int]] = defaultdict(list)
    vals: dict[tuple, dict] = {}
    stacks: dict[str, list[int]] = defaultdict(list)
    frames_of: dict[str, list] = {}
    for r, ents in sorted(at.items()):
        e = ents[0]
        key = (g.state_by_rank[r], " + ".join(x.op for x in ents), id(e.isz), id(e.osz), id(e.idt), id(e.odt))
        variants[key].append(r)
        vals[key] = {"state": key[0], "op": key[1], "input_sizes": e.isz, "output_sizes": e.osz,
                     "input_dtypes": e.idt, "output_dtypes": e.odt}
        if e.frames:
            k = compact(e.frames)
            stacks[k].append(r)
            frames_of[k] = [{"name": f.get("name"), "filename": f.get("filename"), "line": f.get("line")}
                            for f in e.frames]
    g.stuck_variants = [{"ranks": rs, **vals[k]} for k, rs in sorted(variants.items(), key=lambda kv: -len(kv[1]))]
    g.frames = [{"ranks": rs, "frames": frames_of[k]} for k, rs in sorted(stacks.items(), key=lambda kv: -len(kv[1]))]


def _p2p_pending(members: list[int], p2p: dict[int, list[FREntry]], data: dict[int, RankData], g: FRGroup) -> list[dict]:
    """Pending send/recv ops, each paired FIFO with the peer's pending counterpart. A peer with a dump and no pending
    counterpart never posted it (unless its ring buffer wrapped and holds no p2p op of this PG)."""
    order = sorted(members)
    pend: dict[tuple[int, int, str], list[FREntry]] = defaultdict(list)   # (src, dst, 'send'|'recv') → pending ops
    for ents in p2p.values():
        for e in ents:
            m = P2P_META.search(e.op)
            if e.done or not m:
                continue
            a, b = int(m.group(2)), int(m.group(4))
            src, dst = (a, b) if m.group(3) == "->" else (b, a)
            if src >= len(order) or dst >= len(order):
                continue
            pend[(order[src], order[dst], m.group(1))].append(e)
    out = []
    for (src, dst, kind), lst in sorted(pend.items()):
        other = sorted(pend.get((src, dst, "recv" if kind == "send" else "send"), []),
                       key=lambda e: (e.seq is None, e.seq or 0))
        peer = dst if kind == "send" else src
        for i, e in enumerate(sorted(lst, key=lambda e: (e.seq is None, e.seq or 0))):
            o = other[i] if i < len(other) else None
            if peer not in data:
                ps = "no_dump"
            elif o is not None:
                ps = o.state
            elif peer not in p2p and data[peer].wrapped:
                ps = "not_recorded"
            else:
                ps = "missing"
            rec = {"rank": e.rank, "op": e.op, "seq": e.seq, "state": e.state, "src": src, "dst": dst, "peer": peer,
                   "peer_state": ps, "entry": e.idx, "created_ns": e.created}
            if o is not None:
                mine, theirs = (e.isz, o.osz) if kind == "send" else (e.osz, o.isz)
                if theirs and mine and compact(mine) != compact(theirs):
                    rec["size_mismatch"] = {kind: mine, "recv" if kind == "send" else "send": theirs}
                    if kind == "send":
                        g.mismatches.append(Mismatch(e.seq or 0, "p2p", "SIZE_OR_SYNTAX_MISMATCH", "input_sizes",
                                                     None, {compact(mine): [e.rank], compact(theirs): [o.rank]}, [],
                                                     {e.rank: e.idx, o.rank: o.idx}))
            out.append(rec)
    return out
