"""Collective state of EVERY rank from text logs: who never entered the stuck collective, who waited, who was ahead.

At 512 ranks every rank prints an NCCL watchdog timeout; the one that matters is the rank that differs. The
watchdog lines say it (FORMATS.md §1.3–§1.8, all torch versions):

    [rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation
        timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, ..., Timeout(ms)=600000) ran for 600031 milliseconds ...
    [rank0]:[E1218 ...] [PG ID 1 PG GUID 1 Rank 0]  failure detected by watchdog at work sequence id: 1 PG status:
        last enqueued work: 547, last completed work: -1
    [rank7]:[E808 ...] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received a dump signal due to a collective timeout
        from  rank 3 and we will ... Last enqueued NCCL work: 30, last completed NCCL work: 30.This is ...

Roles (per process group, then per rank):
- never_entered: last enqueued == last completed (no NCCL work in flight: stuck OUTSIDE NCCL in data loading,
  eval or checkpoint), or notified of another rank's dump without its own watchdog firing, or no NCCL state at
  all while the others have it. `crashed` when that rank also logged a crash; `missing` when its log is absent.
- waiting: enqueued == completed + 1 (joined the collective, waits for someone).
- ahead: enqueued > completed + 1, or a higher SeqNum than the rest (e.g. a broadcast root that finished its send).
- behind: timed out on an EARLIER SeqNum than the rest (it never reached the collective the others are in).
A group where every rank entered and every rank's own watchdog fired, with no straggler, is the `fabric`
pattern: the collective itself (network, NIC, switch) is suspect.

gloo (CPU groups) prints no work counters: ranks that raised "Timed out waiting Nms for recv/send" are waiting;
the ranks that did not (stopped by the launcher, or whose log just stops) are what they waited for. torchrun's
"Root Cause (first observed failure)" is only the first rank to exit, often a waiting one; it is not used here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from trainlog_debugger.tools.bundle.parallel import fewer_collections
from trainlog_debugger.tools.sources import is_cascade
from trainlog_debugger.tools.sources.generic import SURVIVED
from trainlog_debugger.tools.lines.timestamps import Stamp, order_then_place
from trainlog_debugger.tools.groups import SCHEMA_VERSION, Group, Grouper, per_rank, rank_set
from trainlog_debugger.tools.jsonable import fields_jsonable, to_jsonable
from trainlog_debugger.tools.model import Coverage, Evidence, Finding, Role
from trainlog_debugger.tools.ranks import parse_ranges, ranks_str
from trainlog_debugger.tools.scan.result import ScanResult, to_evidence

_SEQ = re.compile(r"SeqNum=(\d{1,20})\b")  # bounded: a longer number is no sequence number (tools.ranks)
STATE_PATTERNS = {
    "pytorch.watchdog_timeout", "pytorch.blocking_wait_timeout", "pytorch.watchdog_pg_status",
    "pytorch.watchdog_thread_exception",
    "pytorch.dump_first_signal", "pytorch.dump_observed", "pytorch.dump_signal_received", "pytorch.heartbeat_stuck",
    "pytorch.process_down", "pytorch.comm_aborted", "pytorch.desync_lagging",
}
GLOO_PATTERNS = {"gloo.timeout", "gloo.peer_closed"}
MISSING_STATES = 4096  # ranks without a log that get a RankState of their own (the rest: missing_ranks only)
ROLE_ORDER = ("crashed", "missing", "never_entered", "behind", "waiting", "ahead", "no_state")


@dataclass
class PGState:
    """One rank's view of one process group at the failure."""

    pg: str
    desc: str | None = None
    pg_rank: int | None = None
    seq: int | None = None
    op: str | None = None
    numel: int | None = None
    timeout_ms: int | None = None
    elapsed_ms: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    timeout_time: Stamp | None = None
    self_detected: bool = False
    first_to_dump: bool = False
    notified: bool = False
    notified_by: int | None = None
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class RankState:
    rank: int
    node: str | None = None
    pgs: dict[str, PGState] = field(default_factory=dict)
    role: str = "no_state"
    reason: str = ""
    crash: Evidence | None = None
    last_line: Evidence | None = None
    flags: list[str] = field(default_factory=list)  # heartbeat_stuck, process_down, comm_aborted, gloo_timeout
    nccl_error_at: tuple | None = None  # when its own earliest NCCL error (not a timeout) was printed (order key)
    exited: Evidence | None = None  # torchrun's record that it exited with an error code of its own (exitcode ≥ 1)
    evidence: list[Evidence] = field(default_factory=list)

    def cited(self, n: int = 3) -> list[Evidence]:
        """The crash (if any), the first state lines and the rank's last line, each line once."""
        seen, out = set(), []
        for ev in ([self.crash] if self.crash else []) + self.evidence[:n] + ([self.last_line] if self.last_line else []):
            if ev.cite() not in seen:
                seen.add(ev.cite())
                out.append(ev)
        return out


@dataclass
class GroupSummary:
    pg: str
    desc: str | None
    ranks: int
    stuck_seq: int | None
    op: str | None
    timeout_ms: int | None
    start_time: str | None  # collective start = watchdog time − Timeout(ms), ISO to the second
    roles: dict[str, list[int]]
    seq_gap: dict[int, int] = field(default_factory=dict)  # rank → how many collectives ahead (+) / behind (−)
    start: Stamp | None = None  # the same start, typed: what groups are ordered by


@dataclass
class NcclReport:
    verdict: str  # straggler | crash | fabric | gloo_straggler | no_collective_state | inconclusive
    summary: str
    culprits: list[int]
    suspects: list[int]  # not proven: ranks without logs when nothing else differs
    ranks: dict[int, RankState]
    groups: list[GroupSummary]
    wavefront: str | None
    expected_ranks: int | None
    found_ranks: int
    with_state: int
    missing_ranks: list[int]
    rows: list[dict]  # identical rank rows collapsed: {"ranks": [...], "role": ..., ...}
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> Coverage:
        seen = sorted(r for r, rs in self.ranks.items() if rs.role != "missing")
        return Coverage(expected_ranks=self.expected_ranks, seen_ranks=seen, missing_ranks=list(self.missing_ranks),
                        notes=list(self.notes))

    def to_json(self) -> dict:
        """`debugger nccl --json`, schema_version 2: ranks grouped by their NCCL state (`rank_groups`), rank lists as
        range sets, the culprits with their lines; the per-rank `ranks` map (every rank's every PG state with its
        lines: 50 MB at 4,096 ranks) only under tools.groups.per_rank() (`--per-rank`), unchanged."""
        d: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "verdict": self.verdict, "summary": self.summary,
                             "culprits": rank_set(self.culprits), "culprit_count": len(self.culprits),
                             "suspects": rank_set(self.suspects), "suspect_count": len(self.suspects),
                             "culprit_ranks": [_culprit_json(self.ranks[r]) for r in self.culprits[:MAX_CULPRIT_LINES]
                                               if r in self.ranks]}
        groups = self.rank_groups()
        d["rank_groups"] = [g.to_json() for g in groups[:MAX_RANK_GROUPS]]
        if len(groups) > MAX_RANK_GROUPS:
            rest = [r for g in groups[MAX_RANK_GROUPS:] for r in g.ranks]
            d["rank_groups_cut"] = {"groups": len(groups) - MAX_RANK_GROUPS, "ranks": rank_set(rest),
                                    "rank_count": len(rest)}
        d["groups"] = [_pg_group_json(g) for g in self.groups]
        d.update({"wavefront": self.wavefront, "expected_ranks": self.expected_ranks, "found_ranks": self.found_ranks,
                  "with_state": self.with_state, "missing_ranks": rank_set(self.missing_ranks),
                  "missing_count": len(self.missing_ranks), "row_count": len(self.rows),
                  "rows": [_row_json(r) for r in self.rows[:MAX_ROWS]], "notes": list(self.notes)})
        if per_rank():
            d["ranks"] = to_jsonable(self.ranks)
        return d

    def rank_groups(self) -> list[Group]:
        """Ranks grouped by their NCCL state: role, and per process group the stuck SeqNum, op and size, the
        enqueued/completed counters and whether its own watchdog fired, it dumped first or was notified (flags and
        a logged crash too). The groups of the most telling roles come first (ROLE_ORDER); the culprits and suspects
        are the focus, so their own line is always an exemplar. `count` is the NCCL state lines the group's ranks
        printed; `outliers` the ranks that printed an unusual number of them; first/last time the earliest and
        latest watchdog timeout (else the exemplar's time). A rank that never entered has enqueued == completed, so
        it never shares a group with ranks that wait inside the collective."""
        g = Grouper(focus=self.culprits[:MAX_CULPRIT_LINES] + self.suspects[:MAX_CULPRIT_LINES])
        keys: dict[tuple, tuple[str, dict]] = {}
        reasons: dict[tuple, dict[str, None]] = {}
        notified_by: dict[tuple, set[int]] = {}
        order = sorted(self.ranks.values(), key=lambda rs: (_role_rank(rs.role), rs.rank))
        for rs in order:
            k = _state_key(rs)
            if k not in keys:
                keys[k] = (_describe(rs), _state_facts(rs))
            if rs.reason:
                reasons.setdefault(k, {})[rs.reason] = None
            by = {p.notified_by for p in rs.pgs.values() if p.notified_by is not None}
            if by:
                notified_by.setdefault(k, set()).update(by)
            times = [p.timeout_time for p in rs.pgs.values() if p.timeout_time is not None]
            t = min(times, key=lambda x: x.sort_key()) if times else None
            g.add(k, rs.rank, _exemplar(rs), n=len(rs.evidence), time=t)
        out = g.groups(key_text=lambda k: keys[cast("tuple", k)][0])
        for grp, k in zip(out, keys):   # Grouper keeps the order in which keys came
            grp.facts = dict(keys[k][1])
            rs_ = list(reasons.get(k, ()))
            if rs_:
                grp.facts["reason"] = rs_[0]
                if len(rs_) > 1:
                    grp.facts["other_reasons"] = len(rs_) - 1
            if k in notified_by:
                grp.facts["notified_by"] = rank_set(notified_by[k])
        rest = self.missing_ranks[MISSING_STATES:]  # ranks without a log past those with a state of their own
        if rest:
            lacking = next((g for g in out if g.facts.get("role") == "missing"), None)
            if lacking is not None:
                lacking.ranks = sorted(set(lacking.ranks).union(rest))
        return out

    def findings(self) -> list[Finding]:
        out = []
        for r in self.culprits:
            rs = self.ranks.get(r)
            if rs is None:
                continue
            ev = rs.cited()
            if not ev:
                continue
            out.append(Finding(id=f"nccl.{rs.role}", summary=f"rank {r}: {rs.reason}", role=Role.root_candidate,
                               category="data_loading_stall" if rs.role == "never_entered" else None,
                               ranks=[r], nodes=[rs.node] if rs.node else [], evidence=ev,
                               facts={"role": rs.role, "verdict": self.verdict}))
        return out


MAX_RANK_GROUPS = 40    # rank groups in the JSON (the rest counted in `rank_groups_cut`): bounded at 10,000 ranks
MAX_ROWS = 100          # rank rows in the JSON (`row_count` says how many there are)
MAX_CULPRIT_LINES = 20  # culprits whose own lines are listed in `culprit_ranks`


def _role_rank(role: str) -> int:
    return ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER)


def _state_key(rs: RankState) -> tuple:
    """What ranks in one rank group share; the counters are exact, times and per-rank numbers (pg_rank, elapsed
    ms, who notified it) are not part of it."""
    pgs = tuple((k, p.desc, p.seq, p.op, p.numel, p.timeout_ms, p.enqueued, p.completed, p.self_detected,
                 p.first_to_dump, p.notified) for k, p in sorted(rs.pgs.items()))
    return rs.role, pgs, tuple(sorted(set(rs.flags))), rs.crash is not None


def _state_facts(rs: RankState) -> dict:
    return {"role": rs.role,
            "pgs": [{"pg": k, "desc": p.desc, "seq": p.seq, "op": p.op, "numel": p.numel, "timeout_ms": p.timeout_ms,
                     "enqueued": p.enqueued, "completed": p.completed, "self_detected": p.self_detected,
                     "first_to_dump": p.first_to_dump, "notified": p.notified} for k, p in sorted(rs.pgs.items())],
            "flags": sorted(set(rs.flags)), "crashed": rs.crash is not None}


def _describe(rs: RankState) -> str:
    """A rank group's one-line name: `never_entered · PG 0 (default_pg) SeqNum 5231 ALLREDUCE, enqueued 5230 =
    completed 5230, own watchdog, notified`."""
    parts = [rs.role]
    for k, p in sorted(rs.pgs.items()):
        bits = [f"PG {k}" + (f" ({p.desc})" if p.desc else "")
                + (f" SeqNum {p.seq}" if p.seq is not None else "") + (f" {p.op}" if p.op else "")]
        if p.enqueued is not None:
            rel = "=" if p.completed == p.enqueued else ">" if p.completed is not None and p.enqueued > p.completed else ","
            bits.append(f"enqueued {p.enqueued} {rel} completed {p.completed}")
        bits += [w for w, on in (("own watchdog", p.self_detected), ("first to dump", p.first_to_dump),
                                 ("notified", p.notified)) if on]
        parts.append(", ".join(bits))
    if not rs.pgs:
        parts.append("no collective state")
    if rs.crash is not None:
        parts.append("logged a crash")
    if rs.flags:
        parts.append(", ".join(sorted(set(rs.flags))))
    return " · ".join(parts)


def _exemplar(rs: RankState) -> Evidence | None:
    """The rank's most telling line: its crash when that is its role, else its first process group's first state
    line (the watchdog timeout when there is one, as the rows cite), else its first state line, else its last line."""
    if rs.role == "crashed" and rs.crash is not None:
        return rs.crash
    pg = next(iter(rs.pgs.values()), None)
    if pg is not None and pg.evidence:
        return pg.evidence[0]
    return rs.evidence[0] if rs.evidence else (rs.crash or rs.last_line)


def _culprit_json(rs: RankState) -> dict:
    return {"rank": rs.rank, "node": rs.node, "role": rs.role, "reason": rs.reason,
            "evidence": [e.to_json() for e in rs.cited()]}


def _pg_group_json(g: GroupSummary) -> dict:
    """A process group: its roles as range sets (with counts), its members' gaps as gap → range set."""
    d = fields_jsonable(g)
    d["roles"] = {k: rank_set(v) for k, v in g.roles.items()}
    d["role_counts"] = {k: len(v) for k, v in g.roles.items()}
    by_gap: dict[int, list[int]] = {}
    for r, gap in g.seq_gap.items():
        by_gap.setdefault(gap, []).append(r)
    d["seq_gap"] = {str(gap): rank_set(rs) for gap, rs in sorted(by_gap.items())}
    if per_rank():
        d["seq_gap_by_rank"] = to_jsonable(g.seq_gap)
    return d


def _row_json(row: dict) -> dict:
    d = to_jsonable(row)
    d["ranks"] = rank_set(row["ranks"])
    d["rank_count"] = len(row["ranks"])
    return d


def _pg_key(f: dict) -> str | None:
    for k in ("pg_guid", "pg_uid", "pg_id"):
        if f.get(k) is not None:
            return str(f[k])
    return None


def collect(res: ScanResult) -> dict[int, RankState]:
    """Per rank, per process group: everything the watchdog lines state, each with its line.

    Why the loop is lean: at 4,096 ranks every rank ends in the same cascade and the scan keeps ~47,000 hits, of which
    only the state lines are kept as Evidence; building one for each of the others (and a RankState per hit as a
    `setdefault` default) cost most of the parent's time and made the garbage collector run full passes over the
    scan's objects."""
    ranks: dict[int, RankState] = {}
    first_crash: dict[int, tuple[tuple, Evidence]] = {}
    timeouts: list[tuple[int, dict, Stamp | None, Evidence]] = []
    crash = _crash_patterns(res)
    for f in res.files:
        rel, kind = f.rel, f.kind
        for h in f.hits:
            r = h.rank
            if r is None:
                continue
            rs = ranks.get(r)
            if rs is None:
                rs = ranks[r] = RankState(rank=r)
            if not rs.node:
                rs.node = h.node
            pid = h.pattern
            if pid in _KEPT:
                ev = to_evidence(h, rel, kind)
                rs.evidence.append(ev)
                if pid in _TIMEOUTS:
                    timeouts.append((r, h.fields, h.time, ev))
                    continue
                if pid in _STATE_LINES:
                    _STATE_LINES[pid](rs, h.fields, ev)
                    continue
            if pid == "torchrun.exitcode" and rs.exited is None and (h.fields.get("exitcode") or 0) >= 1 \
                    and h.time is not None:  # dated by its entry's `time :` line, to be compared with the timeouts
                rs.exited = to_evidence(h, rel, kind)
            if pid in _NCCL_ERRORS:
                k = h.time.order_key() if h.time is not None else None
                if k is not None and (rs.nccl_error_at is None or k < rs.nccl_error_at):
                    rs.nccl_error_at = k
            if pid in _FLAGS:
                rs.flags.append(_FLAGS[pid])
            elif pid in crash:
                _keep_first_crash(first_crash, f, h)
    _attach_timeouts(ranks, timeouts)
    for r, (_, ev) in first_crash.items():
        ranks[r].crash = ev
    for r, summary in res.ranks.items():
        st = ranks.get(r)
        if st is None:
            st = ranks[r] = RankState(rank=r)
        st.last_line = summary.last_line
        st.node = st.node or (summary.nodes[0] if summary.nodes else None)
    _srun_exits(res, ranks)
    return ranks


_EXIT_CODE = re.compile(r"^Exited with exit code (\d{1,3})\b")


def _srun_exits(res: ScanResult, ranks: dict[int, RankState]) -> None:
    """srun's `srun: error: host: tasks 8-15: Exited with exit code 127`: where srun's tasks are the job's ranks (a
    line names several tasks on one host: one task per GPU, not a launcher per node), those ranks exited with an
    error code of their own (RankState.exited)."""
    lines = [(h, f) for f in res.files for h in f.hits if h.pattern == "slurm.task_exit"]
    if not any(len(parse_ranges(str(h.fields.get("tasks") or ""))) > 1 for h, _f in lines):
        return
    for h, f in lines:
        m = _EXIT_CODE.match(str(h.fields.get("how") or ""))
        # (not 1: a rank whose peers timed out first raises on their closed sockets and exits 1 as well; srun's line
        # is undated, so only a code no such cascade gives says the rank died of its own: 127, a loader's)
        if m is None or not 2 <= int(m.group(1)) < 128:  # ≥ 128: a wrapper's report of a signal (the teardown's)
            continue
        for t in parse_ranges(str(h.fields.get("tasks") or "")):
            if t in ranks and ranks[t].exited is None:  # undated: any time on it is a neighbour's, borrowed
                ranks[t].exited = to_evidence(h, f.rel, f.kind).model_copy(update={"time": None})


def _pg_status(rs: RankState, fx: dict, ev: Evidence) -> None:
    pg = _pg(rs, fx)
    pg.seq, pg.enqueued, pg.completed = fx.get("seq"), fx.get("enqueued"), fx.get("completed")
    pg.self_detected = True
    pg.evidence.append(ev)


def _first_to_dump(rs: RankState, fx: dict, ev: Evidence) -> None:
    pg = _pg(rs, fx)
    pg.first_to_dump = pg.self_detected = True  # "first to signal dumping": its own watchdog fired
    pg.evidence.append(ev)


def _dump_observed(rs: RankState, fx: dict, ev: Evidence) -> None:
    pg = _pg(rs, fx)
    pg.notified = True  # "observed the dump signal from another rank": notified, not self-detected
    pg.evidence.append(ev)


def _dump_received(rs: RankState, fx: dict, ev: Evidence) -> None:
    pg = _pg(rs, fx)
    if fx.get("from_rank") is not None and fx["from_rank"] != rs.rank:
        pg.notified, pg.notified_by = True, fx["from_rank"]
    if fx.get("enqueued") is not None and pg.enqueued is None:
        pg.enqueued, pg.completed = fx["enqueued"], fx.get("completed")
    pg.evidence.append(ev)


def _thread_exception(rs: RankState, fx: dict, ev: Evidence) -> None:
    m = _SEQ.search(fx.get("what", ""))
    if m and _pg_key(fx) is not None:  # the thread-exit line names the PG the legacy `Watchdog caught` line omits
        pg = _pg(rs, fx)
        pg.seq = pg.seq if pg.seq is not None else int(m.group(1))
        pg.evidence.append(ev)


_STATE_LINES = {  # pattern → what its line says about the rank's process group
    "pytorch.watchdog_pg_status": _pg_status,
    "pytorch.dump_first_signal": _first_to_dump,
    "pytorch.dump_observed": _dump_observed,
    "pytorch.dump_signal_received": _dump_received,
    "pytorch.watchdog_thread_exception": _thread_exception,
}
_FLAGS = {"pytorch.heartbeat_stuck": "heartbeat_stuck", "pytorch.process_down": "process_down",
          "pytorch.comm_aborted": "comm_aborted", "gloo.timeout": "gloo_timeout"}
# the rank's own NCCL error (not a timeout): it was inside NCCL when the transport or a peer failed
_NCCL_ERRORS = frozenset({"nccl.ib_completion_error", "pytorch.nccl_error", "pytorch.nccl_error_kind"})
_TIMEOUTS = frozenset({"pytorch.watchdog_timeout", "pytorch.blocking_wait_timeout"})  # a rank's own wait timed out
_KEPT = STATE_PATTERNS | GLOO_PATTERNS  # the hits whose line is kept as the rank's evidence


def _keep_first_crash(first: dict[int, tuple[tuple, Evidence]], f, h) -> None:
    """The rank's earliest crash line, citing what a traceback ended in rather than its header. A traceback that
    ends in a collective timeout is the wait, not a crash (its text too, when torchrun's error.json holds it)."""
    fx = h.fields
    if h.pattern == "python.traceback" and is_cascade(fx.get("exception_text") or h.text):
        return
    if h.pattern == "loader.batch_loader_error" and any(s in h.text for s in SURVIVED):  # it fell back, went on
        return
    ev = to_evidence(h, f.rel, f.kind)
    if h.pattern == "python.traceback" and fx.get("exception_line"):
        ev = Evidence(file=f.rel, line=fx["exception_line"], text=fx["exception_text"], rank=h.rank, node=h.node,
                      kind=f.kind)
    key = order_then_place(h.time, f.rel, ev.line)
    if h.rank not in first or key < first[h.rank][0]:
        first[h.rank] = (key, ev)


def _attach_timeouts(ranks: dict[int, RankState], timeouts: list[tuple[int, dict, Stamp | None, Evidence]]) -> None:
    """Each watchdog timeout goes to the PG whose status line names the same SeqNum (else to PG '?')."""
    for r, fx, time, ev in timeouts:
        rs = ranks[r]
        seq = fx.get("seq")
        pg = next((p for p in rs.pgs.values() if p.seq == seq), None)
        if pg is None:
            pg = rs.pgs.get("?")
            if pg is None:
                pg = rs.pgs["?"] = PGState(pg="?")
            pg.seq = seq
        pg.op, pg.numel = fx.get("op"), fx.get("numel_in")
        pg.timeout_ms, pg.elapsed_ms, pg.timeout_time = fx.get("timeout_ms"), fx.get("elapsed_ms"), time
        pg.self_detected = True
        pg.evidence.insert(0, ev)


def _pg(rs: RankState, fx: dict) -> PGState:
    key = _pg_key(fx) or "0"
    pg = rs.pgs.get(key)
    if pg is None:
        pg = rs.pgs[key] = PGState(pg=key)
    pg.desc = pg.desc or fx.get("pg_desc")
    if fx.get("pg_rank") is not None:
        pg.pg_rank = fx["pg_rank"]
    return pg


def _crash_patterns(res: ScanResult) -> set[str]:
    """The patterns whose hit is a crash that takes a rank out before the collective: a root-candidate pattern of
    tier 1/2 that is not itself part of the collective machinery (the first summary of an id decides)."""
    seen: set[str] = set()
    out: set[str] = set()
    for p in res.patterns:
        if p.id in seen:
            continue
        seen.add(p.id)
        if p.role == "root_candidate" and p.tier in (1, 2) and not p.id.startswith(("pytorch.", "nccl.")):
            out.add(p.id)
    return out



def classify(ranks: dict[int, RankState], expected: int | None, missing: list[int],
             collectives_per_step: int | None = None, stated_world: bool = True) -> NcclReport:
    """Every rank's role (RankState.role/reason, set here) and the verdict over all of them."""
    with_state = {r: rs for r, rs in ranks.items() if rs.pgs}
    pg_keys = sorted({k for rs in with_state.values() for k in rs.pgs}, key=lambda k: (k == "?", k))
    groups = [_group(key, ranks, with_state, collectives_per_step) for key in pg_keys]
    any_state = bool(with_state)
    _roles_without_state(ranks, any_state)
    # a state for each rank without a log, up to MISSING_STATES (the grid and the groups draw them); past that they
    # are the range set `missing_ranks` only: a claimed world of 1,000,000 with two logs held a million states
    # (38 s and 1.46 GB in `nccl`, issue 30)
    lacking = set(missing)
    found = sum(1 for r in ranks if r not in lacking)
    for r in missing[:MISSING_STATES]:
        ranks.setdefault(r, RankState(rank=r, role="missing", reason="no log lines for this rank in the bundle"))
        ranks[r].role, ranks[r].reason = "missing", "no log lines for this rank in the bundle"
    verdict, summary, culprits, notes = _verdict(ranks, missing, any_state)
    if missing:
        notes.append(f"{len(missing)} rank(s) have no log in the bundle: {ranks_str(missing)}; one of them may be the culprit")
    # ranks without logs are suspects only against a stated world size (a "max rank seen" bound proves nothing)
    suspects = list(missing) if verdict == "inconclusive" and not culprits and stated_world else []
    return NcclReport(verdict=verdict, summary=summary, culprits=culprits, suspects=suspects,
                      ranks=dict(sorted(ranks.items())),
                      groups=groups, wavefront=_wavefront(groups), expected_ranks=expected,
                      found_ranks=found, with_state=len(with_state), missing_ranks=list(missing),
                      rows=_rows(ranks), notes=notes)


def _group(key: str, ranks: dict[int, RankState], with_state: dict[int, RankState],
           collectives_per_step: int | None) -> GroupSummary:
    """One process group: the stuck SeqNum (the one most members' own watchdogs name), each member's role in it and
    its gap in enqueued work; a rank's overall role is the most telling of its groups' (ROLE_ORDER)."""
    members = {r: rs.pgs[key] for r, rs in with_state.items() if key in rs.pgs}
    seqs = Counter(p.seq for p in members.values() if p.seq is not None and p.self_detected)
    stuck = min(seqs, key=lambda s: (-seqs[s], s)) if seqs else None
    enqs = Counter(p.enqueued for p in members.values() if p.enqueued is not None and p.seq == stuck)
    base_enq = enqs.most_common(1)[0][0] if enqs else None
    roles: dict[str, list[int]] = {}
    gaps: dict[int, int] = {}
    for r, p in members.items():
        roles.setdefault(_pg_role(p, stuck), []).append(r)
        gap = _gap(p, stuck, base_enq)
        if gap:
            gaps[r] = gap
    for r, p in members.items():
        rs, role = ranks[r], _pg_role(p, stuck)
        if ROLE_ORDER.index(role) < ROLE_ORDER.index(rs.role) or rs.role == "no_state":
            rs.role, rs.reason = role, _reason(role, p, gaps.get(r), key, collectives_per_step)
    sample = next((p for p in members.values() if p.seq == stuck and p.timeout_ms), None)
    start = _start(sample) if sample else None
    return GroupSummary(pg=key, desc=next((p.desc for p in members.values() if p.desc), None), ranks=len(members),
                        stuck_seq=stuck, op=sample.op if sample else None,
                        timeout_ms=sample.timeout_ms if sample else None, start_time=_to_second(start), start=start,
                        roles={k: sorted(v) for k, v in roles.items()}, seq_gap=gaps)


def _roles_without_state(ranks: dict[int, RankState], any_state: bool) -> None:
    """A crash line outranks a collective role; a rank with no state while others have it never entered."""
    gloo_anywhere = any("gloo_timeout" in x.flags for x in ranks.values())
    # the others' first watchdog timeout: an NCCL error of a rank's own before it shows that rank inside NCCL when
    # the transport or a peer failed; one after it is the close of peers that had given up (a straggler's)
    gave_up = min((k for x in ranks.values() for p in x.pgs.values() if p.timeout_time is not None
                   and (k := p.timeout_time.order_key()) is not None), default=None)
    for rs in ranks.values():
        if rs.pgs:
            if rs.crash is not None and rs.role in ("never_entered", "behind"):
                rs.role, rs.reason = "crashed", f"logged a crash before the collective ({rs.crash.cite()})"
            continue
        # (torchrun's entry is dated: only an exit before the others gave up is one of its own; srun's is not, and
        # counts only for a code the cascade never gives, _srun_exits)
        if rs.crash is None and rs.exited is not None and (rs.exited.time is None or (
                gave_up is not None and (k := rs.exited.time.order_key()) is not None and k < gave_up)):
            # torchrun's record says it exited with an error code (a Python exception, a loader's `symbol lookup
            # error`: exit 1, 127) whose own line is not in the bundle: it died, it did not hang outside NCCL
            rs.crash = rs.exited
        if rs.crash is not None:
            rs.role, rs.reason = "crashed", f"no NCCL state; crashed first ({rs.crash.cite()})"
        elif "gloo_timeout" in rs.flags:
            rs.role, rs.reason = "waiting", "gloo: timed out waiting for a peer"
        elif rs.nccl_error_at is not None and (gave_up is None or rs.nccl_error_at < gave_up):
            # no watchdog state, but an NCCL error of its own before anyone gave up: in NCCL, not outside it
            rs.role, rs.reason = "waiting", "no collective state; its own NCCL error (a transport or a peer failed) " \
                                            "shows it inside NCCL, not stuck outside it"
        elif any_state or gloo_anywhere:
            rs.role, rs.reason = "never_entered", "no collective state at all while others have it (stuck outside " \
                                                  "the collective, or its log stops)"


# "every rank entered" needs two ranks to say so: one rank that waited proves nothing of the others (they may have
# crashed, been preempted, or never reached the collective), so one rank's log is never a fabric hang
FABRIC_MIN_RANKS = 2
UNSEEN_SHARE = 4  # ranks without any collective state count as stragglers while at most 1 in UNSEEN_SHARE


def _verdict(ranks: dict[int, RankState], missing: list[int], any_state: bool) -> tuple[str, str, list[int], list[str]]:
    """(verdict, summary, culprits, notes) once every rank has its role."""
    culprits = sorted(r for r, rs in ranks.items() if rs.role in ("crashed", "never_entered", "behind"))
    # a rank with no collective state at all is a straggler by absence only: a few such ranks among many that
    # timed out are the ones stuck outside NCCL, but a quarter of the job or more without a line of NCCL state is a
    # log that shows only some ranks' ends (a paste, a console that kept a few ranks' output), not that many
    # stragglers
    unseen = [r for r in culprits if ranks[r].role == "never_entered" and not ranks[r].pgs]
    if unseen and len(ranks) > 2 and len(unseen) * UNSEEN_SHARE > len(ranks):
        culprits = [r for r in culprits if r not in unseen]
        if not culprits:
            return "inconclusive", (f"{len(unseen)} of {len(ranks)} ranks show no collective state at all: their logs "
                                    f"do not say whether they entered the stuck collective"), [], \
                ["ranks without collective state are too many to be stragglers: the logs may be partial"]
    gloo = any("gloo_timeout" in rs.flags for rs in ranks.values()) and not any_state
    if not any_state and not gloo:
        return "no_collective_state", "no rank logged a collective timeout or watchdog state", [], []
    if culprits:
        kinds = Counter(ranks[r].role for r in culprits)
        verdict = "crash" if kinds.get("crashed") else ("gloo_straggler" if gloo else "straggler")
        summary = f"{len(culprits)} of {len(ranks)} ranks differ: " + ", ".join(
            f"{k} {ranks_str([r for r in culprits if ranks[r].role == k])}" for k in kinds)
        if len(culprits) * 2 > len(ranks) and len(ranks) > 2:
            return "inconclusive", summary, culprits, ["most ranks lack state: the logs may be partial"]
        return verdict, summary, culprits, []
    if _ops_differ(ranks):
        return "inconclusive", ("ranks timed out in different collectives at the same sequence number: they took "
                                "different code paths, not a fabric hang"), culprits, []
    present = [r for r, rs in ranks.items() if rs.role != "missing"]
    if all(ranks[r].role in ("waiting", "ahead") for r in present) and not missing and len(present) >= FABRIC_MIN_RANKS:
        return "fabric", ("every rank entered the collective and fired its own watchdog; no straggler: suspect the "
                          "network (NIC, link, switch)"), culprits, []
    if len(present) < FABRIC_MIN_RANKS:
        return "inconclusive", ("one rank's log: it entered the collective and timed out, whether the others did is "
                                "not in the bundle"), culprits, []
    return "inconclusive", (f"no rank with a log differs; rank(s) {ranks_str(missing)} have no log in the bundle: the "
                            f"culprit may be among them"), culprits, []


def _ops_differ(ranks: dict[int, RankState]) -> bool:
    """Did two ranks' watchdogs fire on the same process group and sequence number with a different op or size?"""
    seen: dict[tuple, tuple] = {}
    for rs in ranks.values():
        for p in rs.pgs.values():
            if p.seq is None or p.op is None or not p.self_detected:
                continue
            shape = seen.setdefault((p.desc or p.pg, p.seq), (p.op, p.numel))
            if shape != (p.op, p.numel):
                return True
    return False


def _pg_role(p: PGState, stuck: int | None) -> str:
    if p.enqueued is not None and p.completed is not None:
        if p.enqueued <= p.completed:
            return "never_entered"
        if stuck is not None and p.enqueued < stuck and not p.self_detected:
            # notified, with work in flight that is older than the stuck collective: it never enqueued that one
            # (its own collective before it did not finish): behind, not waiting with the others
            return "behind"
        if p.enqueued == p.completed + 1:
            return "waiting" if stuck is None or p.seq in (None, stuck) or not p.self_detected else \
                ("ahead" if p.seq > stuck else "behind")
        return "ahead"
    if p.notified and not p.self_detected:
        return "never_entered"
    if p.seq is not None and stuck is not None and p.self_detected:
        return "waiting" if p.seq == stuck else ("ahead" if p.seq > stuck else "behind")
    return "waiting" if p.self_detected else "never_entered"


def _gap(p: PGState, stuck: int | None, base_enq: int | None) -> int:
    """How many collectives this rank is ahead (+) or behind (−) of the group: by enqueued work when both are
    known (a broadcast root queues the next step's collectives), else by the SeqNum its watchdog fired on."""
    if p.enqueued is not None and base_enq is not None and p.self_detected:
        return p.enqueued - base_enq
    if stuck is not None and p.seq is not None and p.self_detected:
        return p.seq - stuck
    return 0


def _reason(role: str, p: PGState, k: int | None, key: str, per_step: int | None) -> str:
    pg = f"PG {key}" + (f" ({p.desc})" if p.desc else "")
    counts = f"last enqueued {p.enqueued}, last completed {p.completed}" if p.enqueued is not None else ""
    if role == "never_entered":
        how = "notified by rank %s" % p.notified_by if p.notified_by is not None else (
            "notified, own watchdog did not fire" if p.notified and not p.self_detected else "")
        return f"{pg}: never entered the collective ({', '.join(x for x in (counts, how) if x)}): stuck outside NCCL"
    if role == "waiting":
        joined = f"joined SeqNum {p.seq}" if p.seq is not None else "joined the collective"
        return f"{pg}: {joined}, waiting for others ({counts or 'own watchdog fired'})"
    if role in ("ahead", "behind"):
        step = ""
        if k and per_step and abs(abs(k) - per_step) <= 1:
            step = f" = one training step ({per_step} collectives per step)"
        return f"{pg}: {role} of the others" + (f" by {abs(k)} collective(s){step}" if k else "") + (f" ({counts})" if counts else "")
    return f"{pg}: {role}"


def _start(p: PGState) -> Stamp | None:
    """When the stuck collective started: the watchdog's time minus how long it ran (or its timeout)."""
    t = p.timeout_time
    if t is None or not p.timeout_ms:
        return None
    return t.shifted(-(p.elapsed_ms or p.timeout_ms) / 1000)


def _to_second(st: Stamp | None) -> str | None:
    return re.sub(r"\.\d{6}", "", st.iso(), count=1) if st is not None else None


def _wavefront(groups: list[GroupSummary]) -> str | None:
    """The first group, in time order of its stuck collective's start, whose collective is incomplete."""
    stuck = [g for g in groups if g.stuck_seq is not None]
    if len(stuck) < 2:
        return stuck[0].pg if stuck else None
    stuck.sort(key=lambda g: (*order_then_place(g.start), -len(g.roles.get("never_entered", []))))
    return stuck[0].pg


def _rows(ranks: dict[int, RankState]) -> list[dict]:
    """Identical rows collapsed into rank ranges; outliers stay single rows because they differ."""
    groups: dict[tuple, list[int]] = {}
    for r, rs in ranks.items():
        pg = next(iter(rs.pgs.values()), None)
        key = (rs.role, pg.pg if pg else None, pg.seq if pg else None, pg.op if pg else None,
               _delta(pg), bool(pg and pg.self_detected), bool(pg and pg.notified), rs.node is None)
        groups.setdefault(key, []).append(r)
    rows: list[dict[str, Any]] = []
    for key, rs_ in groups.items():
        role, pg_name, seq, op, delta, selfd, notif, _ = key
        first = ranks[rs_[0]]
        p = next(iter(first.pgs.values()), None)
        rows.append({"ranks": rs_, "role": role, "pg": pg_name, "seq": seq, "op": op,
                     "enqueued": p.enqueued if p else None, "completed": p.completed if p else None,
                     "self_detected": selfd, "notified": notif,
                     "evidence": (p.evidence[0] if p and p.evidence else first.crash or first.last_line)})
    rows.sort(key=lambda x: (ROLE_ORDER.index(x["role"]), x["ranks"][0]))
    return rows


def _delta(pg: PGState | None):
    if pg is None or pg.enqueued is None or pg.completed is None:
        return None
    return pg.enqueued - pg.completed


def analyze(res: ScanResult, collectives_per_step: int | None = None) -> NcclReport:
    """collect + classify. Under tools.bundle.parallel.fewer_collections: everything made here is kept in the
    report, so a cycle-collector pass over the scan's objects (run every 700 new ones by default) frees nothing and
    took about half of this at 4,096 ranks."""
    with fewer_collections():
        ranks = collect(res)
        return classify(ranks, res.coverage.expected_ranks, res.coverage.missing_ranks, collectives_per_step,
                        stated_world=res.coverage.expected_from != "max rank seen")
