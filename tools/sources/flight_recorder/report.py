"""What the flight-recorder analysis reports (FRReport, FRGroup, Mismatch), and its verdicts as Findings that cite
dump entries (file = the dump, line = 1-based entry index, text = entry_text(entry))."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
import dataclasses
from dataclasses import dataclass

from trainlog_debugger.tools.sources.flight_recorder.entries import STATES, entry_text
from trainlog_debugger.tools.sources.flight_recorder.unpickle import DumpRefused
from trainlog_debugger.tools.model import Coverage, Evidence, Finding, Role
from trainlog_debugger.tools.ranks import ranks_str

MAX_CITED = 5                   # evidence lines per finding per role (culprit / majority)
KIND = "fr_dump"
ALL = sys.maxsize               # ranks_str cap: these texts name every rank (a split PG's label must stay unique)


@dataclass
class Mismatch:
    """Ranks that disagree at one seq. `found`: compact JSON of each value → the ranks that recorded it."""

    seq: int
    kind: str                   # 'collective' | 'p2p'
    type_of_mismatch: str       # FR's MatchState name: COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, ...
    field: str                  # profiling_name, input_sizes, output_sizes, input_dtypes, output_dtypes, state
    expected: str | None        # the majority value; None on a tie
    found: dict[str, list[int]]
    culprit_ranks: list[int]
    entries: dict[int, int] = dataclasses.field(default_factory=dict)   # rank → 1-based entry index (citation)


@dataclass
class FRGroup:
    pg: str                                 # pg_name (process_group[0]); `name@ranks` when split groups share it
    desc: str                               # pg_desc, e.g. 'default_pg'
    members: list[int]                      # global ranks
    stuck_seq: int | None                   # None: nothing pending in this PG
    op: str | None                          # profiling_name at the stuck seq (majority)
    state_by_rank: dict[int, str]           # completed|started|scheduled|missing|not_recorded|no_dump (|idle: p2p)
    missing_ranks: list[int]
    mismatches: list[Mismatch]
    frames: list[dict]                      # [{"ranks": [...], "frames": [{name, filename, line}, ...]}]
    culprits: list[int]
    seq_kind: str = "collective"            # 'p2p' when the only pending ops are send/recv
    culprit_reasons: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    no_dump_ranks: list[int] = dataclasses.field(default_factory=list)
    not_recorded_ranks: list[int] = dataclasses.field(default_factory=list)
    last_seen: dict[int, dict] = dataclasses.field(default_factory=dict)   # missing ranks: newest entry they have in this PG
    stuck_variants: list[dict] = dataclasses.field(default_factory=list)   # ranks that recorded the stuck seq, grouped by
    #                                                            (state, op, sizes, dtypes): the table's rows
    p2p_pending: list[dict] = dataclasses.field(default_factory=list)
    members_from: str = "pg_config"         # or 'entries' (pg_config lists no ranks for this PG)
    stuck_created_ns: int | None = None     # earliest time_created_ns of the stuck entry across ranks
    last_done_seq: int | None = None        # highest seq below the stuck one (all done); the newest when none stuck
    entries: dict[int, int] = dataclasses.field(default_factory=dict)      # rank → 1-based entry index of its stuck entry
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclass
class FRReport:
    dumps: dict[int, str]                   # rank → bundle-relative path of its dump
    skipped: list[dict[str, str]]           # {"file", "reason"}
    groups: list[FRGroup]
    expected_ranks: list[int]               # members of every PG seen, and every rank with a dump
    no_dump_ranks: list[int]
    culprits: list[int]
    first_stuck: str | None = None          # pg whose stuck entry is the oldest: where the hang most likely began
    versions: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        # set by match.analyze_ranks while the dumps can still be read; an attribute, not a field: kept out of JSON
        self._findings: list[Finding] = []

    def findings(self) -> list[Finding]:
        """One Finding per verdict, each citing dump entries (file = dump path, line = 1-based entry index,
        text = entry_text(entry)). Built while the dumps could still be read (analyze / analyze_bundle)."""
        return list(self._findings)

    @property
    def coverage(self) -> Coverage:
        have = sorted(self.dumps)
        return Coverage(expected_ranks=len(self.expected_ranks) or None, expected_from="flight-recorder PG members",
                        seen_ranks=have, missing_ranks=list(self.no_dump_ranks), skipped=list(self.skipped))

    def to_json(self) -> dict:
        """The report and its cited findings."""
        from trainlog_debugger.tools.jsonable import fields_jsonable, to_jsonable
        return {**fields_jsonable(self), "findings": to_jsonable(self.findings())}


def ranks_phrase(ranks: list[int]) -> str:
    """'rank 3' / 'ranks 0-2,5'."""
    return f"rank{'s' if len(set(ranks)) != 1 else ''} {ranks_str(ranks, ALL)}"


def _plan(rep: FRReport) -> list[tuple[dict, list[tuple[int, int]]]]:
    """(Finding fields, the (rank, entry index) pairs it cites), before the texts are read."""
    plan = []
    for g in rep.groups:
        name = f"PG {g.pg}" + (f" ({g.desc})" if g.desc else "")
        waiting = sorted(g.entries.items())
        base = {"pg": g.pg, "desc": g.desc, "seq": g.stuck_seq, "seq_kind": g.seq_kind, "op": g.op,
                "members": len(g.members), "no_dump_ranks": g.no_dump_ranks}
        if g.missing_ranks:
            behind = [(r, g.last_seen[r]["entry"]) for r in g.missing_ranks
                      if "entry" in g.last_seen.get(r, {})][:MAX_CITED]
            joined = sorted(r for r, s in g.state_by_rank.items() if s in STATES)
            alone = [r for r in g.culprits if "joined_alone" in g.culprit_reasons.get(r, [])]
            if alone:
                summary = (f"{name}: only {ranks_phrase(alone)} entered {g.op} #{g.stuck_seq}; "
                           f"{len(g.missing_ranks)} members never called it")
                ranks = alone
            else:
                summary = (f"{name}: {ranks_phrase(g.missing_ranks)} never joined {g.op} #{g.stuck_seq} "
                           f"({len(joined)} ranks wait in it)")
                ranks = g.missing_ranks
            plan.append(({"id": "fr.missing_ranks", "summary": summary, "role": Role.root_candidate,
                          "category": "collective_hang", "ranks": ranks, "count": len(ranks),
                          "facts": {**base, "missing_ranks": g.missing_ranks, "joined_ranks": ranks_str(joined, ALL),
                                    "last_seen": dict(list(g.last_seen.items())[:MAX_CITED])}},
                         behind + waiting[:MAX_CITED - min(len(behind), MAX_CITED - 1)]))
        for m in g.mismatches:
            majority = [r for v, rs in m.found.items() if v == m.expected for r in rs]
            pairs = [(r, m.entries[r]) for r in m.culprit_ranks if r in m.entries][:MAX_CITED]
            pairs += [(r, m.entries[r]) for r in majority if r in m.entries][:1 if pairs else MAX_CITED]
            if not pairs:
                pairs = [(r, i) for r, i in sorted(m.entries.items())][:MAX_CITED]
            who = ranks_phrase(m.culprit_ranks) if m.culprit_ranks else "no majority, no culprit"
            vals = "; ".join(f"{v} on {ranks_str(rs, ALL)}" for v, rs in m.found.items())
            plan.append(({"id": "fr.mismatch", "role": Role.root_candidate if m.type_of_mismatch !=
                          "COLLECTIVE_STATE_MISMATCH" else Role.cascade, "category": "collective_desync",
                          "summary": f"{name} {m.kind} #{m.seq}: {m.type_of_mismatch} in {m.field} ({who}): {vals}",
                          "ranks": m.culprit_ranks,
                          "facts": {**base, "seq": m.seq, "kind": m.kind, "type_of_mismatch": m.type_of_mismatch,
                                    "field": m.field, "expected": m.expected, "found": m.found}}, pairs))
        if g.stuck_seq is not None and not g.missing_ranks:
            states = Counter(g.state_by_rank.values())
            summary = (f"{name}: {g.seq_kind} {g.op} #{g.stuck_seq} never finished "
                       f"({', '.join(f'{n} {s}' for s, n in states.most_common())})")
            if g.no_dump_ranks:
                summary += f"; {ranks_phrase(g.no_dump_ranks)} {'has' if len(g.no_dump_ranks) == 1 else 'have'} no dump"
            plan.append(({"id": "fr.stuck_collective", "summary": summary, "role": Role.cascade,
                          "category": "collective_hang", "ranks": sorted(g.culprits or g.no_dump_ranks),
                          "facts": {**base, "states": dict(states), "p2p_pending": g.p2p_pending[:MAX_CITED]}},
                         waiting[:MAX_CITED]))
    return plan


def findings_of(rep: FRReport, fetch) -> list[Finding]:
    """Read each cited dump once (fetch(rank) → dump dict or None) and build the Findings."""
    plan = _plan(rep)
    wanted: dict[int, set[int]] = defaultdict(set)
    for _, pairs in plan:
        for r, i in pairs:
            wanted[r].add(i)
    texts: dict[tuple[int, int], str] = {}
    for r, idxs in sorted(wanted.items()):
        try:
            dump = fetch(r)
        except DumpRefused:
            dump = None
        entries = dump.get("entries") if isinstance(dump, dict) else None
        if not isinstance(entries, list):
            rep.notes.append(f"could not re-read the dump of rank {r} to cite it")
            continue
        for i in idxs:
            if 1 <= i <= len(entries):
                texts[(r, i)] = entry_text(entries[i - 1])
    out = []
    for fields, pairs in plan:
        evs = [Evidence(file=rep.dumps.get(r, f"nccl_trace_rank_{r}"), line=i, text=texts[(r, i)], rank=r, kind=KIND)
               for r, i in dict.fromkeys(pairs) if (r, i) in texts]
        if evs:
            out.append(Finding(evidence=evs, **fields))
    return out
