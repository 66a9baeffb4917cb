"""What every diagnosis rule sees (`RuleInputs`, a view over the Investigation) and returns (`Candidate`).
Rules are pure: no I/O, data in, data out.

Why candidates and not verdicts: several rules usually fire on one bundle (the NCCL timeout, a CUDA error on one
rank, a retry storm); the diagnosis picks the trigger among them by time and by how decisive each is, and keeps
the rest as alternatives with the reason each was rejected.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from heapq import merge
from itertools import islice
from operator import itemgetter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainlog_debugger.tools.investigation import Investigation
from trainlog_debugger.tools.lines.attribution import named_in_text
from trainlog_debugger.tools.lines.timestamps import order_key, order_then_place
from trainlog_debugger.tools.model import Evidence, Finding, Role
from trainlog_debugger.tools.ranks import plausible_rank
from trainlog_debugger.tools.scan.result import ScanResult, to_evidence
from trainlog_debugger.tools.sources.nccl.format import HOST_PID_ANY

if TYPE_CHECKING:  # the reports' types, named where the Investigation names them (rules import no analysis)
    from trainlog_debugger.tools.investigation import (AisReport, DiffResult, FRReport, NcclReport, Record, Stack,
                                                       StepReport)


# a failure its own program says it caught and went on from (a loader's fallback, a skipped sample): named beside a
# failure, below diagnose's DECISIVE, so an end of the job that follows it sets it aside
HANDLED_STRENGTH = 0.4


# torch/distributed/checkpoint/api.py (CheckpointException.__str__): `Traceback (most recent call last): (RANK 6)`
RANK_BLOCK = re.compile(r"Traceback \(most recent call last\): \(RANK (\d{1,7})\)\s*$")


class _Blocks:
    """Line ranges of each file, each with a value (a traceback block: its first line, its exception line, what it
    says), looked up by bisection: every rank of a large job may print one into a shared file."""

    def __init__(self, found: dict[str, list[tuple[int, int, int]]]):
        self.by_file = {f: sorted(v) for f, v in found.items()}
        self.starts = {f: [a for a, _b, _v in v] for f, v in self.by_file.items()}

    def at(self, ev: Evidence) -> int | None:
        """The value of the block of ev's file that holds ev's line (the last one starting at or before it)."""
        starts = self.starts.get(ev.file)
        if not starts:
            return None
        i = bisect_right(starts, ev.line) - 1
        if i < 0:
            return None
        a, b, v = self.by_file[ev.file][i]
        return v if a <= ev.line <= b else None


@dataclass
class Candidate:
    """A rule's proposal for the trigger: the Finding it would put first in the chain (id = the rule's dotted id,
    category, summary, ranks, nodes, extracted facts, cited evidence whose first line is the trigger line), and how
    the diagnosis weighs it against the others. The weighing stays out of the Finding: strength, status and restart
    advice are the diagnosis's business, the Finding is what the user reads."""

    finding: Finding
    strength: float  # 0..1: how decisive this evidence is for the category when it is present
    status: str = "crashed"
    recommendations: list[str] = field(default_factory=list)
    restart: str = "fix first"
    # a cross-source chain that replaces `finding` as the chain's start
    story: list[Finding] = field(default_factory=list)

    @property
    def rule(self) -> str:
        return self.finding.id

    @property
    def category(self) -> str:
        return self.finding.category or "none"

    @property
    def summary(self) -> str:
        return self.finding.summary

    @property
    def evidence(self) -> list[Evidence]:
        return self.finding.evidence

    @property
    def ranks(self) -> list[int]:
        return self.finding.ranks

    @property
    def nodes(self) -> list[str]:
        return self.finding.nodes

    @property
    def facts(self) -> dict[str, Any]:
        """The finding's facts; the diagnosis adds its own marks here (`on_collective_culprit`)."""
        return self.finding.facts

    @property
    def time_key(self) -> tuple | None:
        return time_key(self.evidence[0])


def time_key(ev: Evidence | None) -> tuple | None:
    """Stamp.order_key of a line's time. None when undated: such lines are ordered by strength, never by guesswork."""
    return order_key(ev.time) if ev else None


def by_time(ev: Evidence) -> tuple:
    return order_then_place(ev.time, ev.file, ev.line)


_FIRST = itemgetter(0)  # a (sort key, Evidence) pair's key
_LOADER_PID = re.compile(r"DataLoader worker \(pid (\d{1,10})\)")  # the rank's child (torch/utils/data/_utils/signal_handling)
_KILLED_PID = re.compile(r"Killed process (\d{1,10}) \(")  # the kernel's OOM victim (mm/oom_kill.c)


def _tagged(order: list[tuple], j: int):
    """(key, j, index) for each (key, index) of one pattern's order, made as the merge reads them."""
    for k, i in order:
        yield k, j, i


class _EvidenceByPattern(Mapping):
    """pattern id → its kept hits as Evidence, earliest first: made per pattern when a rule first asks for it. Why
    lazy: a 1,024-rank bundle keeps ~27,000 hits, and making every one a pydantic Evidence and sorting all of them
    took ~0.9 s of `ask`, for patterns most rules never read. A rule that wants only the first few (`first`) gets
    them from the hits' time keys alone (`order`): at 10,000 ranks the watchdog cascade is 80,000 hits, and making
    each an Evidence to cite two of them was a third of the diagnosis."""

    def __init__(self, raw: dict[str, list]):
        self._raw = raw
        self._order: dict[str, list[tuple]] = {}
        self._made: dict[str, list] = {}  # per pattern, its hits' Evidence by index in raw (None: not made yet)
        self._keyed: dict[str, list[tuple]] = {}
        self._evs: dict[str, list[Evidence]] = {}

    def order(self, pid: str) -> list[tuple]:
        """(by_time key, index in the pattern's hits), earliest first: no Evidence made."""
        got = self._order.get(pid)
        if got is None:
            got = []
            add = got.append
            for i, (h, rel, _kind) in enumerate(self._raw.get(pid, ())):  # per hit: 70,000 at 10,000 ranks
                key = h.key  # the merge's (tools.scan.summary): reading each hit's Stamp again cost ~5 µs a hit
                if key is None or key[2] != rel or key[3] != h.line:
                    k = h.time.order_key() if h.time is not None else None
                    key = (k is None, k or (), rel, h.line)
                add((key, i))
            got.sort(key=_FIRST)
            self._order[pid] = got
        return got

    def evidence(self, pid: str, i: int) -> Evidence:
        """The Evidence of the pattern's i-th hit, made once (every caller gets the same object)."""
        made = self._made.get(pid)
        if made is None:
            made = self._made[pid] = [None] * len(self._raw.get(pid, ()))
        ev = made[i]
        if ev is None:
            h, rel, kind = self._raw[pid][i]
            ev = made[i] = to_evidence(h, rel, kind)
        return ev

    def texts(self, pid: str):
        """(file, line, text, rank) of each kept hit of a pattern, in scan order: what a lookup over many hits reads
        without an Evidence made for each (NCCL's lines of 10,000 ranks)."""
        for h, rel, _kind in self._raw.get(pid, ()):
            yield rel, h.line, h.text, h.rank

    def in_file(self, rel: str) -> list[Evidence]:
        """Every kept hit of one file as Evidence, in line order (a line two patterns kept, once): made for that
        file's hits only."""
        seen: dict[int, Evidence] = {}
        for pid, hits in self._raw.items():
            for i, (h, hrel, _kind) in enumerate(hits):
                if hrel == rel and h.line not in seen:
                    seen[h.line] = self.evidence(pid, i)
        return [seen[n] for n in sorted(seen)]

    def keyed(self, pid: str) -> list[tuple]:
        got = self._keyed.get(pid)
        if got is None:
            ev = self.evidence
            got = self._keyed[pid] = [(k, ev(pid, i)) for k, i in self.order(pid)]
        return got

    def __getitem__(self, pid: str) -> list[Evidence]:
        got = self._evs.get(pid)
        if got is None:
            if pid not in self._raw:
                raise KeyError(pid)
            got = self._evs[pid] = [e for _k, e in self.keyed(pid)]
        return got

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class RuleInputs:
    """What a rule reads: the Investigation's reports (read-only: a rule proposes, it never writes into what other
    rules read), its scan indexed (kept hits by pattern, their fields, the pattern summaries, each file's kind), and
    the upstream message tables.

    Why a view and not the Investigation itself: the indexes are built once per run, from the scan, and the reports
    are read through, so a follow-up stage's report (step times, the rank diff, cut traceback tails) is seen by the
    rules when the answer is drawn again, with no copy to keep in step. `messages`: the upstream message tables and
    the lexicon (tools.sources.messages.catalog: match_many, pick_best, read_by_words), handed in by the pipeline so
    that rules read them without loading anything themselves; None: no reading by meaning (tools/rules/meaning.py
    stays quiet)."""

    def __init__(self, inv: Investigation, messages: Any = None):
        self.inv, self.messages = inv, messages
        scan = inv.scan
        raw: dict[str, list] = {}
        self.fields: dict[tuple[str, int, str], dict] = {}
        for f in scan.files:
            for h in f.hits:
                raw.setdefault(h.pattern, []).append((h, f.rel, f.kind))
                self.fields[(f.rel, h.line, h.pattern)] = h.fields
        self.by_pattern = _EvidenceByPattern(raw)
        self.summaries = {p.id: p for p in scan.patterns}
        self.kinds = {f.rel: f.kind for f in scan.files}

    @property
    def scan(self) -> ScanResult:
        return self.inv.scan

    @property
    def nccl(self) -> NcclReport | None:
        return self.inv.nccl

    @property
    def fr(self) -> FRReport | None:
        return self.inv.fr

    @property
    def ais(self) -> AisReport | None:
        return self.inv.ais

    @property
    def steps(self) -> StepReport | None:
        return self.inv.steps

    @property
    def diff(self) -> DiffResult | None:
        return self.inv.diff

    @property
    def stacks(self) -> list[Stack]:
        return self.inv.stacks

    @property
    def hardware(self) -> list[Record]:
        return self.inv.hardware

    @property
    def tails(self) -> list[Evidence]:
        return self.inv.tails

    @property
    def activity(self) -> dict[int, list[Evidence]]:
        return self.inv.activity

    def hits(self, *pids: str) -> list[Evidence]:
        """The kept hits of these patterns as evidence, earliest first (by_time; ties in the order of `pids`)."""
        if len(pids) == 1:
            return list(self.by_pattern.get(pids[0], ()))
        keyed = self.by_pattern.keyed
        pairs = [kv for p in pids for kv in keyed(p)]
        pairs.sort(key=_FIRST)  # the keys made once per hit, not once per sort
        return [ev for _k, ev in pairs]

    def first(self, n: int, *pids: str) -> list[Evidence]:
        """hits(*pids)[:n] without sorting them all: a merge of the per-pattern lists, each already in time order
        (a rule that cites the first two of 50,000 watchdog lines at 10,000 ranks)."""
        bp = self.by_pattern
        # lazily tagged with the pattern's place: merge is stable (ties in the order of `pids`, as hits() sorts them)
        tagged = [_tagged(bp.order(p), j) for j, p in enumerate(pids)]
        return [bp.evidence(pids[j], i) for _k, j, i in islice(merge(*tagged, key=_FIRST), n)]

    def each(self, pid: str):
        """The kept hits of one pattern as evidence, earliest first, made as the caller reads them: for a rule that
        stops at the first that qualifies (hits(pid) makes all 30,000 of a 10,000-rank watchdog line first)."""
        bp = self.by_pattern
        for _k, i in bp.order(pid):
            yield bp.evidence(pid, i)

    def fields_of(self, ev: Evidence, pid: str) -> dict:
        return self.fields.get((ev.file, ev.line, pid), {})

    def ranks_of(self, *pids: str) -> list[int]:
        out: set[int] = set()
        for p in pids:
            s = self.summaries.get(p)
            if s:
                out |= set(s.rank_counts)
        return sorted(out)

    def count(self, *pids: str) -> int:
        return sum(self.summaries[p].count for p in pids if p in self.summaries)

    def last_lines(self) -> list[Evidence]:
        """Where each rank's log stops (its last non-empty line), or each file's when no line names a rank; earliest
        first where the lines carry times. Protocol step 2: every rank, never a sample."""
        last = [rs.last_line for rs in self.scan.ranks.values() if rs.last_line is not None]
        if not last:
            last = [Evidence(file=f.rel, line=ll.line, text=ll.text, time=ll.time, kind=f.kind, node=next(iter(f.nodes))
                             if len(f.nodes) == 1 else None)
                    for f in self.scan.files for ll in list(f.last_lines.values())[:1]]
        last.sort(key=by_time)
        return last

    def failure_entry(self, ev: Evidence) -> tuple[int, str | None] | None:
        """(rank, host) of the torchrun failure entry (`Root Cause (first observed failure)` / `Failures:`) whose
        `traceback :` field holds `ev`: torchrun copies the worker's error.json there, under the entry's own
        `rank : R (local_rank: L)` and `host :` lines, so a launcher console alone still says which rank raised it.
        None when `ev` is not inside such an entry."""
        head = self._heading("torchrun.failure_rank", ev, 4)
        if head is None:
            return None
        rank = self.fields_of(head, "torchrun.failure_rank").get("failed_rank")
        hosts = [h for h in self.by_pattern.get("torchrun.failure_host", ()) if h.file == ev.file
                 and head.line - 2 <= h.line < head.line]
        host = self.fields_of(hosts[0], "torchrun.failure_host").get("host") if hosts else None
        return (rank, host) if isinstance(rank, int) and 0 <= rank < 1_000_000 else None

    def spawned_index(self, ev: Evidence) -> int | None:
        """The process index mp.spawn's parent names for the traceback `ev` is in (`-- Process 3 terminated with the
        following error:` right above that traceback's `Traceback` line): the index spawn passed the child as its
        rank (`fn(i, *args)`). None when `ev` is not inside such a traceback."""
        head = self._heading("pytorch.spawn_raised", ev, 2)
        index = self.fields_of(head, "pytorch.spawn_raised").get("process") if head is not None else None
        return index if isinstance(index, int) and plausible_rank(index) else None

    def _heading(self, pid: str, ev: Evidence, within: int) -> Evidence | None:
        """The last line of pattern `pid` above `ev` in its file when `ev` is inside the traceback that starts at most
        `within` lines under it (from its `Traceback` line to its exception line); None otherwise."""
        heads = [h for h in self.by_pattern.get(pid, ()) if h.file == ev.file and h.line < ev.line]
        if not heads:
            return None
        head = max(heads, key=lambda h: h.line)
        inside = any(t.file == ev.file and head.line < t.line <= head.line + within
                     and t.line <= ev.line <= self.fields_of(t, "python.traceback").get("exception_line", t.line)
                     for t in self.by_pattern.get("python.traceback", ()))
        return head if inside else None

    def reported_for(self, ev: Evidence) -> int | None:
        """The rank whose failure `ev` reports when another rank printed it: a line of a traceback that DCP prints
        under `Traceback (most recent call last): (RANK n)` (torch/distributed/checkpoint/api.py CheckpointException:
        every rank re-raises the failed ranks' tracebacks, the coordinator's gathered copy). None elsewhere. The
        blocks are indexed once per RuleInputs (every rank of a large job may print one)."""
        blocks = self.__dict__.get("_rank_blocks")
        if blocks is None:
            found: dict[str, list[tuple[int, int, int]]] = {}
            for t in self.by_pattern.get("python.traceback", ()):
                if (m := RANK_BLOCK.search(t.text)) is not None:
                    end = self.fields_of(t, "python.traceback").get("exception_line", t.line)
                    found.setdefault(t.file, []).append((t.line, end, int(m.group(1))))
            blocks = self.__dict__["_rank_blocks"] = _Blocks(found)
        return blocks.at(ev)

    def finished(self) -> list[Evidence]:
        """The lines that prove a normal end (job.finished: a trainer's or launcher's end line, the scheduler's
        COMPLETED 0:0), earliest first, and DeepSpeed's launcher's `Process <pid> exits successfully.` lines of each
        log where every process it says it spawned reported so and none exited otherwise: its per-process lines
        are the node's end only all together (one local rank that returned while the others hang in a final
        barrier leaves one such line, and the launcher still waiting). Without `spawned` lines (a paste that starts
        later) they prove nothing."""
        got = self.__dict__.get("_finished")
        if got is None:
            got = self.hits("job.finished")
            ok = self.by_pattern.get("deepspeed.proc_ok", ())
            if ok:
                failed = {e.file for e in self.by_pattern.get("deepspeed.exit_code", ())}
                spawned: dict[str, set] = {}
                for e in self.by_pattern.get("deepspeed.proc_spawned", ()):
                    spawned.setdefault(e.file, set()).add(self.fields_of(e, "deepspeed.proc_spawned").get("pid"))
                exited: dict[str, set] = {}
                for e in ok:
                    exited.setdefault(e.file, set()).add(self.fields_of(e, "deepspeed.proc_ok").get("pid"))
                # (with no `spawned` lines in the file, the processes it ran are unknown: one that returned while
                # the others hang leaves the same line, so nothing is proved)
                whole = [e for e in ok if e.file not in failed and e.file in spawned
                         and spawned[e.file] <= exited[e.file]]
                if whole:
                    got = sorted(got + whole, key=by_time)
            self.__dict__["_finished"] = got
        return list(got)

    def rank_of_pid(self, ev: Evidence) -> int | None:
        """The rank of a line that no prefix attributes, by the process it names: an NCCL header's `host:pid`
        (`gpu-c02:120417:121002 [4] ... NCCL WARN`), the kernel's OOM victim (`Killed process 88123 (python)`). pid →
        rank from what the job itself says of its processes: NCCL's init lines of the world communicator and
        torchrun's failure entries (pyspy.report.launcher_pids), a ranked line carrying an NCCL header (`[rank13]:`
        quoting its own WARN), and a rank's own `DataLoader worker (pid P)` (its child, killed for the rank's
        memory). A pid is unique per host only: the host is matched where both sides name one. One rank or None."""
        index = self.__dict__.get("_pid_ranks")
        if index is None:
            from trainlog_debugger.tools.sources.pyspy.report import launcher_pids
            index = {pid: set(pairs) for pid, pairs in launcher_pids(self).items()}
            nccl = [p for p in self.by_pattern if p.startswith("nccl.")]
            for pid_ in nccl:
                for _rel, _line, text, rank in self.by_pattern.texts(pid_):
                    if rank is not None and (m := HOST_PID_ANY.search(text)):
                        index.setdefault(m.group("pid"), set()).add((rank, m.group("host")))
            for e in self.by_pattern.get("loader.worker_killed", ()):
                if e.rank is not None and (m := _LOADER_PID.search(e.text)):
                    index.setdefault(m.group(1), set()).add((e.rank, e.node))
            # c10d quotes NCCL's last error under a rank's `remote process exited or there was a network error`
            # (`Last error:` then NCCL's WARN text without its prefix): the WARN line that says it word for word, in the
            # same file, is that rank's process's own
            quoted: dict[tuple[str, str], set] = {}
            errs: dict[tuple[str, int], int] = {}  # (file, line) → rank of a ranked NCCL error line
            for p in ("pytorch.nccl_error", "pytorch.nccl_error_kind"):
                for rel, line, _text, rank in self.by_pattern.texts(p):
                    if rank is not None:
                        errs[(rel, line)] = rank
            for e in self.by_pattern.get("pytorch.nccl_last_error", ()) if errs else ():
                detail = (self.fields_of(e, "pytorch.nccl_last_error").get("detail") or "").strip()
                near = next((r for k in range(1, 5) if (r := errs.get((e.file, e.line - k))) is not None), None)
                if detail and near is not None:
                    quoted.setdefault((e.file, detail), set()).add(near)
            if quoted:
                for pid_ in nccl:
                    for rel, _line, text, _rank in self.by_pattern.texts(pid_):
                        if "NCCL WARN " in text and (m := HOST_PID_ANY.search(text)):
                            said = quoted.get((rel, text.split("NCCL WARN ", 1)[1].strip()), ())
                            if len(said) == 1:
                                index.setdefault(m.group("pid"), set()).add((next(iter(said)), m.group("host")))
            self.__dict__["_pid_ranks"] = index
        host = ev.node
        if (m := HOST_PID_ANY.search(ev.text)) is not None:
            pid, host = m.group("pid"), host or m.group("host")
        elif (m := _KILLED_PID.search(ev.text)) is not None:
            pid = m.group(1)
        else:
            return None
        ranks = {r for r, h in index.get(pid, ()) if host is None or h is None or h == host
                 or h.split(".")[0] == host.split(".")[0]}
        return next(iter(ranks)) if len(ranks) == 1 else None

    def ignored(self, ev: Evidence) -> bool:
        """Whether `ev` lies in a traceback that CPython printed under `Exception ignored in: <obj>` (its unraisable
        hook: an exception in a destructor or a callback, printed and ignored; the DataLoader iterator's __del__ at
        interpreter shutdown is the common one), from that line to the traceback's exception. Indexed once."""
        blocks = self.__dict__.get("_ignored_blocks")
        if blocks is None:
            found: dict[str, list[tuple[int, int, int]]] = {}
            heads = {(h.file, h.line) for h in self.by_pattern.get("python.exception_ignored", ())}
            if heads:
                for t in self.by_pattern.get("python.traceback", ()):
                    if (t.file, t.line - 1) in heads:
                        end = self.fields_of(t, "python.traceback").get("exception_line", t.line)
                        found.setdefault(t.file, []).append((t.line - 1, end, 0))
            blocks = self.__dict__["_ignored_blocks"] = _Blocks(found)
        return blocks.at(ev) is not None

    def nodes_of(self, evs: list[Evidence]) -> list[str]:
        """The nodes of these lines: each line's own, else its rank's. A line that reports another rank's failure
        (DCP's `(RANK n)` block, printed by every rank: reported_for) is that rank's node, where the bundle states
        it, never the printer's: rank 0's copy of rank 4's ESTALE does not put the stale mount on rank 0's node."""
        out = []
        known = self.scan.rank_nodes
        for e in evs:
            said = self.reported_for(e)
            if said is not None and said != e.rank:
                n = known[said].node if said in known else None
            else:
                n = e.node or (known[e.rank].node if e.rank in known else None)
            if n and n not in out:
                out.append(n)
        return out


def past_setup(f: RuleInputs) -> bool:
    """Whether the job got past forming its process group: an end line, a trainer's end-of-training marker, or an
    NCCL communicator reported ready (`Init COMPLETE`). The rules that read "every log stops in set-up" (c10d's store,
    Lightning's members, NCCL's bootstrap) stay quiet then. Reads the communicator lines lazily (one per rank)."""
    return bool(f.finished() or f.hits("job.training_done")) or any("Init COMPLETE" in e.text
                                                                    for e in f.each("nccl.comm_init"))


def restart_without(node: str | None) -> str:
    """The restart advice for a fault on one node: named when the logs name it, said plainly when they do not."""
    return f"restart without node {node}" if node else "drain the failing node (the logs do not name it), then restart"


def _rank_of(src: RuleInputs, e: Evidence) -> int | None:
    """The rank a line is about: the one whose failure it reports (RuleInputs.reported_for), else the one that
    printed it."""
    r = src.reported_for(e)
    return e.rank if r is None else r


def candidate(rule: str, category: str, summary: str, strength: float, evs: list[Evidence], src: RuleInputs, *,
              ranks: list[int] | None = None, nodes: list[str] | None = None, facts: dict[str, Any] | None = None,
              **weighing: Any) -> Candidate | None:
    """A Candidate whose ranks and nodes default to those of its evidence lines; None without evidence (nothing
    reaches a report uncited). `weighing`: strength's companions on Candidate (status, restart, recommendations,
    story)."""
    if not evs:
        return None
    entry = None
    said: tuple[int | None, str | None] = (None, None)
    if ranks is None:
        ranks = sorted({r for e in evs if (r := _rank_of(src, e)) is not None})
        if not ranks and (entry := src.failure_entry(evs[0])):
            ranks = [entry[0]]
        if not ranks and len(by_pid := {r for e in evs if (r := src.rank_of_pid(e)) is not None}) == 1:
            ranks = sorted(by_pid)
        if not ranks and (index := src.spawned_index(evs[0])) is not None:  # mp.spawn's child, by its index
            ranks = [index]
        if not ranks:  # a paste without prefixes: the trigger line's own words (`[Rank 3]`, `task 3:`, RANK=3)
            said = named_in_text(evs[0].text)
            ranks = [said[0]] if said[0] is not None else []
    if nodes is None:
        nodes = src.nodes_of(evs) or ([entry[1]] if entry and entry[1] else [])
        if not nodes:  # the host or IP that the trigger line itself names
            host = said[1] if said != (None, None) else named_in_text(evs[0].text)[1]
            nodes = [host] if host else []
    finding = Finding(id=rule, summary=summary, role=Role.root_candidate, category=category, ranks=ranks, nodes=nodes,
                      facts=dict(facts or {}), evidence=evs)
    return Candidate(finding, strength, **weighing)
