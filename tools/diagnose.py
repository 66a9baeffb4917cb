"""From the tools' reports to the answer: status, category, culprit, the chain from trigger to crash, and the proof.

The protocol (DEVELOPERS.md) as code, without I/O:
1. triage: crashed, hung, slow, cancelled by the scheduler, or finished normally;
2. localize and isolate: the collective analysis (tools/sources/pytorch/collectives.py) names the rank that differs; rules that speak
   about that rank are preferred;
3. root cause: the FIRST decisive trigger, not the loudest line. Candidates are ordered by time where their lines
   carry comparable times; among candidates of similar strength the earliest wins; NCCL timeouts, watchdog
   teardown, launcher signals and ChildFailedError are cascade steps, never the trigger while anything earlier
   explains them; retries that recovered are noise;
4. every step is cited; alternatives say why they were rejected; what is missing is named, and a weak answer is
   `inconclusive` with low confidence rather than a confident guess.
Re-reading the cited lines from disk is tools/verify.py's job, run by the caller.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from datetime import datetime
from operator import itemgetter

from trainlog_debugger.tools.model import (Alternative, Diagnosis, Evidence, Finding, JobDetails, Role, Status,
                                           TimelineEvent)
from trainlog_debugger.tools.ranks import parse_ranges, ranks_str
from trainlog_debugger.tools.groups import rank_set
from trainlog_debugger.tools.rules import RULES, Candidate, RuleInputs
from trainlog_debugger.tools.lines.timestamps import order_key
from trainlog_debugger.tools.lines.isotime import human_time
from trainlog_debugger.tools.rules.base import by_time, restart_without, time_key
from trainlog_debugger.tools.rules.meaning import in_handled_record, refine
from trainlog_debugger.tools.lines.attribution import named_in_text, strip_prefixes
from trainlog_debugger.tools.rankdiff.mask import template_of

DECISIVE = 0.5
WINDOW = 0.3  # candidates this close to the strongest compete on time
CULPRIT_BOOST = 0.15
HARDWARE_KINDS = {"kernel", "nvidia_smi"}
CASCADE_STEPS = (  # (pattern, what it means in the chain), in causal order
    ("pytorch.watchdog_timeout", "NCCL watchdog timed out waiting for the collective"),
    ("gloo.timeout", "gloo collective timed out waiting for a peer"),
    ("pytorch.comm_aborted", "NCCL communicator aborted"),
    ("pytorch.process_down", "watchdog took the process down"),
    ("pytorch.terminate_backend_error", "process aborted on the watchdog's exception"),
    ("torchrun.closing_signal", "launcher sent {signal} to the remaining workers"),
    ("torchrun.child_failed", "torchrun reported the failed workers"),
    ("slurm.task_exit", "srun reported the tasks' exit"),
    ("slurm.cancelled", "SLURM cancelled the step"),
)


def candidates(inputs: RuleInputs) -> list[Candidate]:
    out: list[Candidate] = []
    for rule in RULES:
        if getattr(rule, "undecided_only", False) and _decided(out):
            continue
        out.extend(c for c in rule(inputs) if c is not None)
    # a trigger line in a traceback that Python printed and ignored (`Exception ignored in: ...`) is no failure
    out = [c for c in out if not (c.evidence and inputs.ignored(c.evidence[0]))]
    # ... nor is one that a handled log record quotes (an error the autotuner caught and dropped: in_handled_record)
    out = [c for c in out if not (c.evidence and in_handled_record(inputs, c.evidence[0]))]
    refine(out, inputs)  # the upstream tables' reading of each trigger line (tools/rules/meaning.py)
    culprits = set(inputs.nccl.culprits) if inputs.nccl else set()
    for c in out:
        if culprits and set(c.ranks) & culprits and c.rule != "collective.straggler":
            c.strength = min(1.0, c.strength + CULPRIT_BOOST)
            c.facts["on_collective_culprit"] = True
    return out


def _decided(cands: list[Candidate]) -> bool:
    """Whether a rule (not a reading of a line's words or table entry) already decided: then a rule marked
    `undecided_only` (the lexicon's reading, tools/rules/meaning.read_by_meaning) is not run. Why: `pick` never lets
    a reading win over a decisive rule, so its only product would be a weak alternative; and at 10,000 ranks it read
    every rank's cascade lines (a third of the diagnosis's time) to say "only consequences erred"."""
    return any(c.strength >= DECISIVE and not c.rule.startswith(READINGS) for c in cands)


def pick(cands: list[Candidate], before: dict[int, tuple] | None = None) -> Candidate | None:
    """The trigger: among candidates within WINDOW of the strongest, the earliest that has a time (or an undated one
    whose file dates a later line before that time: `before`, dated_after); else the strongest. Ties go to the
    stronger candidate."""
    if not cands:
        return None
    cands = _without_the_end_of_a_hang(_without_what_a_node_failure_explains(_without_peer_closed(cands)))
    cands = _without_a_signal_another_reading_sent(_without_a_hang_inferred_beside_a_death(cands))
    pool = [c for c in cands if c.strength >= DECISIVE] or cands
    pool = [c for c in pool if not c.facts.get("fallback")] or pool  # "nothing else explains it" loses to anything
    # an upstream table's reading of a line fills the gap where no rule knows the failure; where a rule decided,
    # the tables' triggers support it or are alternatives, never an earlier rival (a WARNING the docs call a
    # trigger, printed before a disk filled, does not outrank `No space left on device`)
    if any(c.strength >= DECISIVE and not c.rule.startswith(READINGS) for c in pool):
        pool = [c for c in pool if not c.rule.startswith(READINGS)]
    pool = [c for c in pool if not c.facts.get("consequence_only")] or pool  # what only the consequences say, last
    best = max(c.strength for c in pool)
    eligible = [c for c in pool if c.strength >= best - WINDOW]
    # a chain across sources (storage daemons → worker rank) explains the worker-side view of the same failure;
    # its lines are on another clock, so it is not ordered by time against them
    cross = [c for c in eligible if c.facts.get("cross_source")]
    if cross:
        return max(cross, key=lambda c: c.strength)
    timed = [c for c in eligible if c.time_key is not None]
    if timed:
        first = min(timed, key=lambda c: (c.time_key, -c.strength))
        first = _borrowed_from(first, timed) or first
        at = first.time_key
        # an undated line (a traceback) printed before a dated line of its own file came before that line's time: it
        # is proved earlier than a dated rival from after then, and is not dropped for having no stamp of its own
        # (or at that time, when the dated line is the rival's own, later in the same file: printed before it)
        # (not a straggler's reading: its line is what the rank did last, not when the failure began)
        earlier = [c for c in eligible if c.time_key is None and (b := (before or {}).get(id(c))) is not None
                   and at is not None and (b < at or (b == at and _printed_before(c, first)))
                   and c.rule != "collective.straggler"]
        return max(earlier, key=lambda c: c.strength) if earlier else first
    best = max(c.strength for c in eligible)
    return _printed_first([c for c in eligible if c.strength == best], before or {}) or \
        max(eligible, key=lambda c: c.strength)


def _printed_first(tied: list[Candidate], before: dict[int, tuple]) -> Candidate | None:
    """Equally strong candidates, none with a time: the one printed first, where their files order them. The ones
    whose files date a line after them earliest (dated_after) came first; of those, in one file, the line above
    came first (a container that failed to start on one node, above the rendezvous that timed out waiting for it).
    None where nothing orders them (no bound, or the first ones in different files): the order they were found in
    decides, as before. Only between equals: a weaker line printed first is often the summary of a stronger one
    below it (NCCL's `ncclSystemError` above the `No route to host` it wraps)."""
    bounds = [b for c in tied if (b := before.get(id(c))) is not None]
    if len(tied) < 2 or len(bounds) < len(tied):
        return None
    first = [c for c in tied if before[id(c)] == min(bounds)]
    if len({c.evidence[0].file for c in first}) != 1:
        return None
    return min(first, key=lambda c: c.evidence[0].line)


def _borrowed_from(first: Candidate, timed: list[Candidate]) -> Candidate | None:
    """A rival at the same time whose own dated line is the one `first`'s undated line borrowed its time from, or
    above it in the same file, printed by another process: printed before it (DeepSpeed's launcher on one node
    logging the SIGTERM it got, then the other node's undated socket warnings under that line's time). Not the same
    process's: its dated summary above an undated reason is one failure (c10d's error, then NCCL's `Last error:`).
    The strongest such rival; None without one."""
    ev = first.evidence[0] if first.evidence else None
    if ev is None or ev.time is None or not isinstance(src := ev.time.meta("inferred_from_line"), int):
        return None
    above = [c for c in timed if c is not first and c.time_key == first.time_key and c.evidence
             and c.evidence[0].file == ev.file and c.evidence[0].line <= src and _another_process(c.evidence[0], ev)]
    return max(above, key=lambda c: c.strength) if above else None


def _another_process(a: Evidence, b: Evidence) -> bool:
    """Whether two lines name different processes: different nodes, or different ranks, where both say."""
    return bool((a.node and b.node and a.node != b.node) or (a.rank is not None and b.rank is not None
                                                              and a.rank != b.rank))


def _printed_before(c: Candidate, rival: Candidate) -> bool:
    """Whether c's trigger line is in the rival's trigger line's file, above it."""
    return bool(c.evidence and rival.evidence) and c.evidence[0].file == rival.evidence[0].file \
        and c.evidence[0].line < rival.evidence[0].line


def dated_after(inputs: RuleInputs, cands: list[Candidate]) -> dict[int, tuple]:
    """For each undated candidate, the time of the first dated line its file printed after its trigger line (the
    kept hits of every pattern): a file is written in order, so the undated line was printed before then. Only an
    upper bound, never a guessed time; id(candidate) → Stamp.order_key."""
    undated = [c for c in cands if c.time_key is None and c.evidence]
    if not undated:
        return {}
    files = {c.evidence[0].file for c in undated}
    dated: dict[str, list[tuple[int, tuple]]] = {}
    for fs in inputs.scan.files:
        if fs.rel in files:
            dated[fs.rel] = sorted((h.line, k) for h in fs.hits if h.time is not None and (k := order_key(h.time)))
    exits = _exit_times(inputs)
    out: dict[int, tuple] = {}
    for c in undated:
        ev = c.evidence[0]
        rows = dated.get(ev.file, [])
        i = bisect_right(rows, (ev.line, (float("inf"),)))
        bounds = [rows[i][1]] if i < len(rows) else []
        # the rank's own exit, as torchrun's failure entry dates it: its error came before
        if len(c.ranks) == 1 and (x := exits.get(c.ranks[0])) is not None:
            bounds.append(x)
        if bounds:
            out[id(c)] = min(bounds)
    return out


def _exit_times(inputs: RuleInputs) -> dict[int, tuple]:
    """rank → when torchrun's failure entry says that rank exited (its `time :` line, two lines above the entry's
    `rank : R (local_rank: L)`), as an order key; the earliest per rank."""
    times = {(e.file, e.line): inputs.fields_of(e, "torchrun.failure_time") for e in inputs.hits("torchrun.failure_time")}
    if not times:
        return {}
    out: dict[int, tuple] = {}
    for e in inputs.hits("torchrun.failure_rank"):
        rank = inputs.fields_of(e, "torchrun.failure_rank").get("failed_rank")
        fx = next((t for k in (1, 2, 3) if (t := times.get((e.file, e.line - k)))), None)
        if not isinstance(rank, int) or not fx:
            continue
        try:
            key = (int(fx["month"]), int(fx["day"]), int(fx["hour"]), int(fx["minute"]), int(fx["second"]), 999999)
        except (KeyError, TypeError, ValueError):
            continue
        if 1 <= key[0] <= 12 and 1 <= key[1] <= 31 and (rank not in out or key < out[rank]):
            out[rank] = key
    return out


NODE_FAILED = ("scheduler.cancelled_node_failure", "scheduler.node_failure",
               # the platforms' word that a member's machine or pod went away under the job: a Kubernetes node that
               # stopped reporting, a batch scheduler's preemption of the pod, the cloud reclaiming the instance
               "infra.k8s_node_lost", "catalog.k8s.volcano_evicted", "catalog.cloud.instance_preempted",
               "catalog.cloud.instance_scheduled_event",
               # mpirun's daemon on a node stopped answering (Open MPI's [node-died]: the node is gone)
               "catalog.mpi.daemon_lost")
# Slurm declares a node down once its slurmd has not answered for SlurmdTimeout (300 s by default): the fabric errors
# that a dead node's peers print come that long before the declaration, or less; a rendezvous gives up after its
# join timeout (torchrun's default 600 s), and its traceback is often dated by the line before it (the round's start)
NODE_FAILURE_LAG_S = 900.0
EXPLAINED_BY_NODE_FAILURE = ("network", "config")  # fabric errors, and a rendezvous that waited for the dead node


# a member that never started: its pod could not mount a volume or was never placed (Kubernetes' FailedMount,
# FailedScheduling); the rendezvous that waited for it timed out because of it
NEVER_STARTED = ("catalog.k8s.failed_mount", "catalog.k8s.failed_mount_config", "scheduler.k8s_unschedulable",
                 # its container could not start: the node's NVIDIA driver or toolkit failed in the runtime's hook
                 "catalog.k8s.nvidia_container_cli")


def _without_what_a_node_failure_explains(cands: list[Candidate]) -> list[Candidate]:
    """Set aside the network readings (IB retries exhausted, sockets the peer stopped answering) and a rendezvous
    timeout that the scheduler's node failure explains: those lines come before the declaration by up to
    SlurmdTimeout, so ordering by time would always blame them (TAXONOMY: a connection that breaks because the peer
    node is down is infrastructure). Only within NODE_FAILURE_LAG_S before the declaration, or untimed. A member
    whose pod never started (NEVER_STARTED) explains the rendezvous that timed out waiting for it, whatever the
    times say."""
    if any(c.rule in NEVER_STARTED for c in cands):  # whatever the times: a pod that never started has no clock
        cands = [c for c in cands if c.rule != "config.rendezvous_timeout"] or cands
    failed = [c for c in cands if c.rule in NODE_FAILED]
    if not failed:
        return cands
    when = min((t for c in failed if c.evidence and c.evidence[0].time is not None
                and (t := c.evidence[0].time.job_seconds()) is not None), default=None)

    def explained(c: Candidate) -> bool:
        if c.category not in EXPLAINED_BY_NODE_FAILURE or not c.evidence or \
                (c.category == "config" and c.rule != "config.rendezvous_timeout"):
            return False
        t = c.evidence[0].time.job_seconds() if c.evidence[0].time is not None else None
        return when is None or t is None or 0 <= when - t <= NODE_FAILURE_LAG_S

    return [c for c in cands if not explained(c)] or cands


# the scheduler ending a job that was not making progress: the end, not the cause
ENDED_BY_SCHEDULER = ("scheduler.cancelled_time_limit",)


def _without_the_end_of_a_hang(cands: list[Candidate]) -> list[Candidate]:
    """Set aside a time limit when a decisive reading shows the job hung before it (a rank stuck in its data loader,
    a stack outlier, a straggler that never reached the collective): a hung job runs until the scheduler stops it, so
    the time limit is always the last line and, dated where the hang's own reading often is not (stack dumps carry
    no time), it would always be picked. TAXONOMY: the category of what was at fault, and the time limit only ended
    the hang. A job that was still progressing has no hang reading, and its time limit stays the reading; nor does a
    reading drawn from what came after the limit (the teardown's watchdog and destroy lines when the step was killed
    in the middle of a collective)."""
    ends = [c for c in cands if c.rule in ENDED_BY_SCHEDULER]
    if not ends:
        return cands
    limit = min((k for c in ends if (k := c.time_key) is not None), default=None)
    if not any(c.status == "hung" and c.strength >= DECISIVE and c.rule not in ENDED_BY_SCHEDULER
               and (limit is None or (k := c.time_key) is None or k < limit) for c in cands):
        return cands
    return [c for c in cands if c.rule not in ENDED_BY_SCHEDULER] or cands


# what the collectives' timeouts let one infer (which rank never entered, which op differs): a reading of who kept
# the others waiting, drawn from the waiters' lines
INFERRED_HANGS = ("collective.straggler", "collective.op_differs")
# a process that died of its own fault (the kernel's or a cgroup's OOM kill, a CUDA OOM, a GPU fault, a signal from
# outside): the waiters' timeouts are the wait for it
DIED = ("oom", "gpu_cuda", "infrastructure")


def _without_a_hang_inferred_beside_a_death(cands: list[Candidate]) -> list[Candidate]:
    """Set aside a hang inferred from the collectives' timeouts where a rank is shown to have died of its own fault
    (a decisive crash: OOM-killed, CUDA OOM, a GPU fault), unless that death is dated after the inferred hang: the
    others timed out waiting for the dead rank, and the rank the inference names (often the one that prints alone:
    Megatron's rank 0 builds the datasets and logs for all) is one of the waiters. A scheduler's own end (time
    limit, cancel) is not such a death."""
    deaths = [c for c in cands if c.status == "crashed" and c.category in DIED and c.strength >= DECISIVE
              and c.ranks and not c.rule.startswith(("scheduler.", *READINGS))]
    if not deaths:
        return cands

    def after_all(h: Candidate) -> bool:
        return all(d.time_key is not None and h.time_key is not None and d.time_key > h.time_key for d in deaths)

    return [c for c in cands if c.rule not in INFERRED_HANGS or after_all(c)] or cands


# a stop the launcher received from outside: it says what reached the agent, not who sent it
SIGNALLED = "scheduler.launcher_signalled"
SENDER_SAYS = ("SIGHUP", "SIGINT")  # the sender is in the name: a closed terminal, a Ctrl-C


def _without_a_signal_another_reading_sent(cands: list[Candidate]) -> list[Candidate]:
    """Set aside the agent's `Received SIGTERM death signal` where a decisive rule reads what sent it or why (the
    orchestrator killing the container for a failed liveness probe or its memory, the scheduler's time limit, another
    node's rank failing so that srun stopped this node's step): the signal is what that looks like from the agent.
    SIGHUP and SIGINT name their sender themselves, and stay. So does a signal that every such rule's line is shown
    to come after (the peers' sockets closing once the signalled node's workers were stopped: its consequence)."""
    signalled = [c for c in cands if c.rule == SIGNALLED and c.facts.get("signal") not in SENDER_SAYS]
    if not signalled:
        return cands
    rivals = [c for c in cands if c.rule != SIGNALLED and c.strength >= DECISIVE and not c.rule.startswith(READINGS)]
    if not rivals:
        return cands
    return [c for c in cands if c not in signalled or all(_after(r, c) for r in rivals)]


def _after(r: Candidate, s: Candidate) -> bool:
    """Whether candidate r's line is shown to come after s's: a later time, or the same time borrowed from s's own
    line (or one below it) in the same file."""
    if r.time_key is None or s.time_key is None:
        return False
    return r.time_key > s.time_key or (r.time_key == s.time_key and _borrowed_from(r, [s]) is s)


SCHEDULER_KILLS = ("scheduler.cancelled_time_limit", "scheduler.cancelled_preemption", "scheduler.cancelled_requeue",
                   "scheduler.cancelled_node_failure")
CLOCK_SKEW_S = 300.0  # how far two nodes' clocks may disagree: a close dated this much before a kill may be after it


def _seconds_before(a: tuple, b: tuple) -> float:
    """How many seconds order key `a` is before `b` (negative when after): the keys' (month, day, hour, minute,
    second, microsecond) read in one leap year, as Stamp.job_seconds does."""
    try:
        ta = datetime(2000, a[0], a[1], a[2], a[3], a[4], a[5] if len(a) > 5 else 0)
        tb = datetime(2000, b[0], b[1], b[2], b[3], b[4], b[5] if len(b) > 5 else 0)
    except (ValueError, TypeError, IndexError):
        return float("inf")
    return (tb - ta).total_seconds()


OWN_FAULT = 0.4  # a reading of another rank's own failure strong enough to make a peer's close its consequence


def _without_peer_closed(pool: list[Candidate]) -> list[Candidate]:
    """Drop a reading of sockets that only saw their peer close (`peer_closed`: the ranks that printed it) where
    another rank failed on its own, unless the close is known to come first. Why: the receiving end of a socket
    whose peer process died prints `Connection closed by remote peer`; the peer's own failure (a CUDA OOM, an
    exception) is the trigger and the close its cascade (TAXONOMY: the first failing rank's first fault). A close
    that is timed before the other failure stays a rival on time."""
    out = []
    for c in pool:
        said = c.facts.get("peer_closed")
        if said is None:
            out.append(c)
            continue
        reporters = set(parse_ranges(said))  # ranks_str's ranges ('-' for none; a cut list's tail is no range)
        # (or a death that names no rank, a pod's or a container's: whoever printed the close was alive)
        # (a straggler is a rank that hung, alive: its sockets were open, it closed none)
        own = [o for o in pool if o is not c and o.category != c.category and o.strength >= OWN_FAULT
               and o.rule != "collective.straggler"
               and ((o.ranks and not set(o.ranks) & reporters) or (not o.ranks and o.category in DIED
                                                                   and o.status == "crashed"))
               and (o.time_key is None or c.time_key is None or o.time_key <= c.time_key or _borrowed(o))]
        # the scheduler's kill of a job (its time limit, a preemption, a requeue) closes every socket: a close dated
        # after the kill or within CLOCK_SKEW_S before it (another node's clock) is that teardown; an undated one only
        # beside a kill that ended a hang (scheduler.silence_before: an earlier attempt's crash may hold undated ones)
        # or printed right above the kill's banner in the banner's own file (srun's console: the tasks' last words
        # before slurmstepd's, none of them dated)
        ended = [o for o in pool if (o.facts.get("ended_a_hang") and c.time_key is None)
                 or (o.rule in SCHEDULER_KILLS and c.time_key is not None and o.time_key is not None
                     and _seconds_before(c.time_key, o.time_key) <= CLOCK_SKEW_S)
                 or (o.rule in SCHEDULER_KILLS and c.time_key is None and _just_above(c, o))]
        if not own and not ended:
            out.append(c)
    return out or pool


TEARDOWN_LINES = 60  # how far above a scheduler's kill banner, in its file, an undated line may be the kill's teardown


def _just_above(c: Candidate, kill: Candidate) -> bool:
    """Whether every line `c` cites sits in the kill banner's file within TEARDOWN_LINES of it, and no rank it names
    is one srun said had exited on its own before the banner (the kill's fact `exited_before`: that rank died
    first, and its close is no teardown)."""
    if not c.evidence or not kill.evidence:
        return False
    banner = kill.evidence[0]
    gone = set(parse_ranges(str(kill.facts.get("exited_before") or "")))
    said = set(c.ranks) | set(parse_ranges(str(c.facts.get("peer_closed") or "")))
    return not gone & said and all(e.file == banner.file and abs(e.line - banner.line) <= TEARDOWN_LINES
                                   for e in c.evidence)


def _borrowed(c: Candidate) -> bool:
    """Whether the candidate's time is one its trigger line borrowed from an earlier line of another writer (a
    scheduler's or the kernel's verdict, `slurmstepd: error: Detected 1 oom_kill event`, printed untimed among the
    ranks' lines): when it was printed says nothing of when the process died, so it orders nothing."""
    ev = c.evidence[0] if c.evidence else None
    return ev is not None and ev.rank is None and ev.time is not None and ev.time.meta("inferred_from_line") is not None


READINGS = ("table.", "meaning.")  # candidates that read a line's meaning (tools/rules/meaning.py), not a rule's


def diagnose(inputs: RuleInputs) -> Diagnosis:
    scan = inputs.scan
    cands = candidates(inputs)
    if (fin := inputs.finished()) and not _only_other_ranks_ended(fin):
        # Proof of a normal end outweighs what a warning's words or a table say of it (a run that finished is not
        # failed by `Could not find: libnccl-net.so` or a documented fallback to CPU). Set aside with them:
        # - a reading too weak to decide, when shown to come BEFORE an end line (a recorded row remap, a hung-task
        #   warning during an NFS outage that recovered); one after it stays: the HF Trainer loads the best model
        #   and prunes checkpoints after `Training completed`, and a traceback there is the job's failure;
        # - a socket that only saw its peer close (peers exit at the end of a run that finished);
        # - a fault of an attempt that torchrun restarted away (_recovered_by_restart).
        # A launcher's or scheduler's record of a worker that failed (outside an attempt restarted away) contradicts
        # the end line: then only the readings are set aside.
        failed = [x for x in inputs.hits("torchrun.child_failed", "torchrun.worker_failed", "slurm.task_exit")
                  if not _restarted_away(inputs, x, fin)]
        kept = [c for c in cands if not c.rule.startswith(READINGS)] if failed else \
            [c for c in cands if not c.rule.startswith(READINGS)
             and (c.strength >= DECISIVE or not (_ends_after(c, fin) or _ridden_through(c, fin)))
             and "peer_closed" not in c.facts and not _recovered_by_restart(inputs, c, fin)]
        noticed = [c for c in cands if c not in kept]
        cands = kept
    elif (loop_done := inputs.hits("job.training_done")):
        # no end line, but the trainer's own marker that its loop ran to its end (Megatron's `[after training is
        # done]`): a reading too weak to decide that is shown to come before it did not stop the training (a fabric
        # event the run rode through); the answer still says nothing proves the job's own end (_stops_after_training)
        kept = [c for c in cands if c.strength >= DECISIVE or not _ends_after(c, loop_done)]
        noticed = [c for c in cands if c not in kept]
        cands = kept
    else:
        noticed = []
    cands = _last_attempts_own(inputs, cands)
    trigger = pick(cands, dated_after(inputs, cands))
    job = job_details(inputs)
    if trigger is None:
        done = _no_failure(inputs, job)
        if done.status == Status.completed and noticed:  # what was seen and set aside, with its line
            ended = [c for c in sorted(noticed, key=lambda c: -c.strength) if _recovered_by_restart(inputs, c, fin)]
            if ended:
                done.headline += (f", after {_how_restarted(inputs)}: an earlier attempt ended with "
                                  f"{ended[0].summary} [{ended[0].category}]")
            done.alternatives = [Alternative(category=c.category, summary=c.summary, evidence=c.evidence[:1],
                                             rejected_because=f"{_how_restarted(inputs)} after it and the "
                                             "restarted run ended normally" if _recovered_by_restart(inputs, c, fin)
                                             else "the job reports a normal end: not a failure of it")
                                 for c in sorted(noticed, key=lambda c: -c.strength)[:5]]
        elif noticed and not done.alternatives:  # set aside by the end of the training loop after them
            done.alternatives = [Alternative(category=c.category, summary=c.summary, evidence=c.evidence[:1],
                                             rejected_because="the training loop reports its end after it: it did "
                                                              "not stop the training")
                                 for c in sorted(noticed, key=lambda c: -c.strength)[:5]]
        return done
    supporting = [c for c in cands if c is not trigger and _same_story(c, trigger)]
    chain = ([_finding(trigger, Role.root_candidate)] if not trigger.story else
             [x.model_copy(update={"role": Role.root_candidate if i == 0 else Role.context})
              for i, x in enumerate(trigger.story)])
    cited = {(e.file, e.line) for e in trigger.evidence}
    for c in supporting:  # each line cited once in the chain
        evs = [e for e in c.evidence if (e.file, e.line) not in cited]
        if evs:
            cited |= {(e.file, e.line) for e in evs}
            chain.append(_finding(c, Role.context).model_copy(update={"evidence": evs}))
    chain += _cascade(inputs, trigger)
    status = Status(trigger.status)
    confidence, caps = _confidence(inputs, trigger, cands)
    if trigger.strength < DECISIVE:
        status = Status.inconclusive
    missing = _missing(inputs, trigger)
    alternatives = _alternatives(inputs, trigger, cands, supporting)
    culprit_ranks = sorted(trigger.ranks) or _one_rank_of_the_same_failure(trigger, cands) or \
        _the_one_failed_rank(inputs, trigger)
    culprit_nodes = list(dict.fromkeys(n for n in trigger.nodes if n)) or _nodes_of_ranks(inputs, culprit_ranks)
    headline = f"{status.value}: {trigger.summary}"
    every = _on_every_rank(inputs, trigger)
    if every:
        culprit_ranks, culprit_nodes = [], []
        headline += f" ({every})"
        caps = caps + [f"no single culprit: {every}"]
    else:
        culprit_ranks = _the_node_s_ranks(inputs, trigger, culprit_ranks, culprit_nodes)
    recs = list(dict.fromkeys(trigger.recommendations + [r for c in supporting for r in c.recommendations]))
    if missing and confidence != "high":
        recs.append("collect the missing evidence listed below, then re-run `debugger ask`")
    return Diagnosis(
        status=status, category=trigger.category, culprit_ranks=culprit_ranks, culprit_nodes=culprit_nodes,
        confidence=confidence, headline=headline, chain=chain, timeline=_timeline(inputs, chain), job=job,
        key_files=_key_files(chain), recommendations=recs, alternatives=alternatives,
        restart=(restart_without(culprit_nodes[0]) if trigger.restart == restart_without(None) and len(culprit_nodes) == 1
                 else trigger.restart),
        missing=missing, coverage=scan.coverage, notes=caps + list(inputs.nccl.notes if inputs.nccl else []))


ONE_PROCESS = ("infrastructure", "oom", "gpu_cuda")  # faults that end one process or device: one rank can be named


def _one_rank_of_the_same_failure(t: Candidate, cands: list[Candidate]) -> list[int]:
    """The one rank that the other decisive readings of the trigger's category name, when the trigger's own line
    names none: PyTorch's DataLoader worker prints `ERROR: Unexpected bus error encountered in worker` with no rank,
    and its rank's main process `[rank1]: ... DataLoader worker (pid 4471) is killed by signal: Bus error`. One rank
    only, only from readings of the same category, only for faults that end one process (ONE_PROCESS), and only when
    the trigger's line names no rank (a rule that names none on purpose, a fabric's or a divergence's, keeps none)."""
    if t.facts.get("fallback") or t.category not in ONE_PROCESS or not t.evidence or t.evidence[0].rank is not None:
        return []
    named = {r for c in cands if c is not t and c.category == t.category and c.strength >= DECISIVE
             and not c.rule.startswith(READINGS) for r in c.ranks}
    return sorted(named) if len(named) == 1 else []


def _the_one_failed_rank(inputs: RuleInputs, t: Candidate) -> list[int]:
    """The rank of torchrun's failure report when it lists one failed rank only (`Root Cause (first observed
    failure)` with `rank : 6 (local_rank: 6)` and no other entry), for a one-process fault whose line names no rank:
    a paste of the worker's CUDA error above the launcher's report of which worker failed; in a JAX job, the one task
    its coordination service names as lost (tools/sources/jax.py). One rank or none."""
    if t.facts.get("fallback") or t.category not in ONE_PROCESS or not t.evidence or t.evidence[0].rank is not None:
        return []
    failed = {r for e in inputs.hits("torchrun.failure_rank")
              if isinstance(r := inputs.fields_of(e, "torchrun.failure_rank").get("failed_rank"), int)}
    if failed:
        return sorted(failed) if len(failed) == 1 else []
    # a JAX job: the one task the coordination service and the surviving clients name as lost, when the trigger is
    # not in a file of those that name it (a survivor's own report is not the lost task's line)
    named = inputs.hits("jax.task_named_failed")
    tasks = {r for e in named if isinstance(r := inputs.fields_of(e, "jax.task_named_failed").get("task"), int)}
    if len(tasks) == 1 and t.evidence[0].file not in {e.file for e in named}:
        return sorted(tasks)
    return []


SYSTEMIC_SPREAD_S = 5.0  # the same error on every rank within this long: no rank went first


def _on_every_rank(inputs: RuleInputs, t: Candidate) -> str | None:
    """Protocol step 2 read the other way: when every rank of the job printed the trigger's very error (same message
    once rank prefixes, digits and paths are masked) within a few seconds of each other, or with no times to order
    them, the first rank in the file is not the culprit: the cause is shared (the same step's data, a setting, the
    code). The earliest rank keeps the citation; nobody is named. A known world size that the logs do not cover
    keeps the rank: the unseen ranks may not have failed. Crashes only: a hang's culprit is the rank that differs."""
    if not t.ranks or not t.evidence or t.facts.get("on_collective_culprit") or t.status != "crashed" \
            or t.rule.startswith(("collective.", "asymmetry.")):
        return None  # a rank singled out by cross-rank analysis (a hang's outlier) is the culprit by construction
    seen = set(inputs.scan.ranks)
    cov = inputs.scan.coverage
    if len(seen) < 2 or cov.missing_ranks or (cov.expected_ranks and len(seen) < cov.expected_ranks):
        return None
    first = _raised_the_same(inputs, t)
    if set(first) != seen:
        return None
    spread = _spread(first)
    if spread is not None and spread > SYSTEMIC_SPREAD_S:
        return None
    timed = sum(1 for e in first.values() if e.time is not None and e.time.job_seconds() is not None)
    when = ("with no times to order them" if spread is None else f"within {spread:.1f} s" if timed == len(first)
            else f"within {spread:.1f} s where a time is stated")
    return f"every rank ({len(seen)} of {len(seen)}) raised the same error {when}: a shared cause, not one rank"


def _raised_the_same(inputs: RuleInputs, t: Candidate) -> dict[int, Evidence]:
    """Per rank, its first line of the trigger's very error (the same message once rank prefixes, digits and paths
    are masked); {} when the trigger's line is too short to tell one message from another. Made once per trigger
    (_on_every_rank and _the_node_s_ranks both read it)."""
    memo = inputs.__dict__.setdefault("_raised_the_same", {})
    at = (t.rule, t.evidence[0].file, t.evidence[0].line)
    if at not in memo:
        memo[at] = _raised_the_same_now(inputs, t)
    return memo[at]


def _raised_the_same_now(inputs: RuleInputs, t: Candidate) -> dict[int, Evidence]:
    key = template_of(strip_prefixes(t.evidence[0].text))
    if len(key) < 12:
        return {}
    # only the trigger line's own patterns, and the lines that end a traceback: masking every hit of a large
    # bundle would be per-hit Python work on the whole scan
    at = (t.evidence[0].file, t.evidence[0].line)
    pools = [evs for evs in inputs.by_pattern.values() if any((e.file, e.line) == at for e in evs)]
    pools.append([e.model_copy(update={"text": fx["exception_text"]})
                  for e in inputs.by_pattern.get("python.traceback", ())
                  if (fx := inputs.fields_of(e, "python.traceback")).get("exception_text")])
    first: dict[int, Evidence] = {}
    for evs in pools:
        for e in evs:
            # the rank a line reports (DCP's `(RANK n)` block, whoever printed it), else the one that printed it
            r = e.rank if (said := inputs.reported_for(e)) is None else said
            if r is not None and r not in first and template_of(strip_prefixes(e.text)) == key:
                first[r] = e
    return first


def _spread(lines: dict[int, Evidence]) -> float | None:
    """Seconds between the earliest and the latest of the lines that state a time; None with fewer than two."""
    secs = [s for e in lines.values() if e.time is not None and (s := e.time.job_seconds()) is not None]
    return max(secs) - min(secs) if len(secs) >= 2 else None


NODE_RANKS_MAX = 64  # ranks named for one node's shared failure (a node holds 4-16 GPUs; a bound all the same)


def _the_node_s_ranks(inputs: RuleInputs, t: Candidate, ranks: list[int], nodes: list[str]) -> list[int]:
    """Every rank of the culprit node that raised the trigger's very error, when more of them did than the rule
    named (it names the first few by time, and an untimed traceback line's time is only the line before it): a
    build without this GPU's kernels, a driver or device fault, a setting of that node fails all its ranks alike,
    and the engineer restarts without the node, not without its first rank. Only for one named node whose ranks
    are all known to run there, all within SYSTEMIC_SPREAD_S; ranks elsewhere that raised it too leave the culprit
    as it was (then it is no one node's)."""
    if len(nodes) != 1 or not ranks or not t.evidence or t.status != "crashed" \
            or t.rule.startswith(("collective.", "asymmetry.")):
        return ranks
    first = _raised_the_same(inputs, t)
    if len(first) <= len(ranks) or not set(ranks) <= set(first) or len(first) > NODE_RANKS_MAX:
        return ranks
    known = inputs.scan.rank_nodes
    if any(r not in known or known[r].node != nodes[0] for r in first):
        return ranks
    spread = _spread(first)
    return sorted(first) if spread is None or spread <= SYSTEMIC_SPREAD_S else ranks


def _nodes_of_ranks(inputs: RuleInputs, ranks: list[int]) -> list[str]:
    """The nodes that ran the culprit ranks, where the bundle states it (an NCCL host line carrying the rank, the
    launcher's failure record, `srun: error: host: tasks`, a per-node file name); none is guessed."""
    known = inputs.scan.rank_nodes
    return list(dict.fromkeys(n for r in ranks if r in known and (n := known[r].node)))[:16]


def _same_story(c: Candidate, t: Candidate) -> bool:
    """Supporting evidence: the same ranks or nodes and a compatible category (storage errors under a stall)."""
    compatible = c.category == t.category or {c.category, t.category} <= {"storage_io", "data_loading_stall"}
    overlap = bool(set(c.ranks) & set(t.ranks)) or bool(set(c.nodes) & set(t.nodes))
    return compatible and (overlap or (not c.ranks and not t.ranks and c.category == t.category))


def _finding(c: Candidate, role: Role) -> Finding:
    """The candidate's Finding as a chain step: its role there, and the strength it won with."""
    return c.finding.model_copy(update={"role": role, "facts": {"strength": round(c.strength, 2), **c.facts}})


def _cascade(inputs: RuleInputs, trigger: Candidate) -> list[Finding]:
    out = []
    used = {(e.file, e.line) for e in trigger.evidence}
    for pid, what in CASCADE_STEPS:
        # the earliest line the trigger does not cite: among the first len(used) + 1, not all (80,000 at 10,000 ranks)
        evs = [e for e in inputs.first(len(used) + 1, pid) if (e.file, e.line) not in used]
        if not evs:
            continue
        s = inputs.summaries.get(pid)
        nr = len(s.rank_counts) if s else 0
        seen = len(inputs.scan.coverage.seen_ranks)
        scope = f" on {nr} of {seen} ranks" if nr else ""
        summary = what.format(signal=inputs.fields_of(evs[0], pid).get("signal") or "a signal") + scope
        if pid == "pytorch.watchdog_timeout" and inputs.nccl and inputs.nccl.groups:
            g = inputs.nccl.groups[0]
            seq = f" SeqNum {g.stuck_seq}" if g.stuck_seq is not None else ""
            summary = f"{what}: {g.op or 'collective'}{seq}{scope}" + (
                f", collective started {human_time(g.start_time)}" if g.start_time else "")
        ranks = sorted(s.rank_counts) if s else []
        out.append(Finding(id=pid, summary=summary, role=Role.cascade, ranks=ranks[:64], count=s.count if s else len(inputs.hits(pid)),
                           evidence=evs[:1], rank_set=rank_set(ranks) if ranks else None,
                           rank_count=len(ranks) if ranks else None))
    return out


def _confidence(inputs: RuleInputs, t: Candidate, cands: list[Candidate]) -> tuple[str, list[str]]:
    caps: list[str] = []
    level = "high" if t.strength >= 0.8 else ("medium" if t.strength >= DECISIVE else "low")
    rivals = [c for c in cands if c is not t and c.category != t.category and c.strength >= t.strength - 0.1
              and c.strength >= DECISIVE and not _same_story(c, t)]
    if rivals and level == "high":
        level = "medium"
        caps.append(f"confidence capped: {rivals[0].rule} ({rivals[0].category}) is nearly as strong")
    cov = inputs.scan.coverage
    if cov.missing_ranks and t.status == "hung" and level == "high":
        level = "medium"
        caps.append(f"confidence capped: {len(cov.missing_ranks)} rank(s) have no log and could hold an earlier trigger")
    if len(cov.seen_ranks) <= 1 and (cov.expected_ranks or 0) != 1 and level == "high" and t.status == "hung":
        level = "medium"
        caps.append("confidence capped: only one rank's log is in the bundle")
    if level != "low" and not _names_a_training_job(inputs, t):
        level = "low"
        caps.append("confidence capped: nothing in the bundle names a training job (no rank, no launcher, scheduler "
                    "or training library line): the reading rests on generic error lines")
    return level, caps


# pattern families any program's output has (an errno, a process exit, an error word, a Python traceback): alone,
# they say nothing about a training job (issue 30: /usr/share/doc got a confident verdict from a test log's
# traceback and an errno table)
GENERIC_FAMILIES = frozenset({"io", "generic", "process", "env", "python"})

# A traceback frame in a training library, a training script or a job launcher: what turns a generic Python
# traceback into a training job's (`site-packages/torch/serialization.py:_save`, `train.py:<module>`). The
# packages are the stacks our users run (PyPI import names), not any case's.
_TRAINING_FRAME = re.compile(
    r"(?i)(?:^|[/\\])(?:torch\w*|deepspeed|megatron|nemo\w*|(?:pytorch_)?lightning\w*|transformers|accelerate|datasets|"
    r"peft|trl|vllm|sglang|verl|openrlhf|llamafactory|torchtune|torchtitan|jax\w*|flax|optax|orbax|ray|apex|"
    r"fairscale|colossalai|horovod|tensorflow|keras|bitsandbytes|flash_attn|triton|xformers|timm|mm\w+|"
    r"detectron2|fairseq|composer|streaming|nvidia|cupy|cuda\w*)[/\\]"
    r"|(?:^|[/\\])\w*(?:train|finetune|pretrain|sft|ppo|grpo|dpo|rlhf)\w*\.py:")


def _names_a_training_job(inputs: RuleInputs, t: Candidate) -> bool:
    """A rank, a producer the detector knows, a pattern of a training family, a traceback frame in a training
    library or script, or a training-stack line among the trigger's and the kept hits' lines (a failure next to
    `torch`, `deepspeed`, `train`: tools.bundle.recognise)."""
    if inputs.scan.coverage.seen_ranks or any(k != "generic" for k in inputs.kinds.values()):
        return True
    if any(pid.split(".", 1)[0] not in GENERIC_FAMILIES for pid in inputs.summaries):
        return True
    for ev in list(inputs.by_pattern.get("python.traceback", ()))[:64]:
        if any(_TRAINING_FRAME.search(fr) for fr in inputs.fields_of(ev, "python.traceback").get("frames", ())):
            return True
    from trainlog_debugger.tools.bundle.recognise import speaks_training
    lines = [e.text for e in t.evidence[:8]]
    lines += [e.text for pid in list(inputs.by_pattern)[:64] for e in list(inputs.by_pattern[pid])[:4]]
    return speaks_training("\n".join(lines).encode("utf-8", "replace"))


def _alternatives(inputs: RuleInputs, t: Candidate, cands: list[Candidate],
                  supporting: list[Candidate]) -> list[Alternative]:
    out = []
    tk = t.time_key
    rest = [c for c in cands if c is not t and c not in supporting
            and not (c.facts.get("fallback") and t.strength >= DECISIVE)]  # "nothing else explains it" is moot now
    for c in sorted(rest, key=lambda c: -c.strength):
        if c.time_key and tk and c.time_key > tk:
            why = f"its first line is later than the trigger's ({_t(c.evidence[0])} vs {_t(t.evidence[0])})"
        elif c.strength < t.strength:
            why = f"weaker evidence ({c.strength:.2f} vs {t.strength:.2f})"
        else:
            why = "as strong, but the trigger came first or speaks about the culprit rank"
        out.append(Alternative(category=c.category, summary=c.summary, rejected_because=why, evidence=c.evidence[:1]))
    noise = [r for r, rs in inputs.scan.ranks.items() if rs.retry and rs.retry["state"] == "recovering"]
    resets = inputs.hits("io.connection_reset", "io.retrying")
    noisy = [e for e in resets if e.rank in noise]
    if noisy:
        out.append(Alternative(category="storage_io", summary=f"connection resets / retries on rank(s) {ranks_str(noise)}",
                               rejected_because="every retry recovered at the first attempt: noise, not cause",
                               evidence=noisy[:1]))
    return out[:12]


def _missing(inputs: RuleInputs, t: Candidate) -> list[str]:
    cov = inputs.scan.coverage
    out = []
    if cov.missing_ranks:
        out.append(f"logs of rank(s) {ranks_str(cov.missing_ranks)} ({len(cov.missing_ranks)} of "
                   f"{cov.expected_ranks} expected, from {cov.expected_from}) are not in the bundle")
    elif len(cov.seen_ranks) <= 1 and cov.expected_ranks is None:
        out.append("the logs of every rank (the bundle holds one rank's or an unattributed excerpt)")
    kinds = set(inputs.kinds.values())
    if t.category in ("gpu_cuda", "infrastructure") and not kinds & HARDWARE_KINDS and t.rule.startswith("gpu."):
        out.append("the kernel log (dmesg / kern.log) of the culprit node, for Xid and ECC lines")
    if t.category in ("gpu_cuda", "infrastructure") and not t.nodes and not _nodes_of_ranks(inputs, t.ranks) \
            and not inputs.scan.rank_nodes:
        out.append("which node ran it: no line in the bundle names a host (the scheduler's record of the job, "
                   "`scontrol show job` / `sacct -j <job> -o NodeList`, or a `hostname` printed at start)")
    if t.category in ("storage_io", "data_loading_stall") and not kinds & {"ais_target", "ais_proxy"}:
        out.append("the storage side for the failure window (AIStore: `ais log get cluster`)")
    if t.status == "hung" and inputs.nccl and inputs.nccl.with_state and not any(
            inputs.nccl.ranks[r].pgs and any(p.enqueued is not None for p in inputs.nccl.ranks[r].pgs.values())
            for r in inputs.nccl.ranks):
        out.append("per-rank enqueued/completed work counters (torch ≥ 2.4 logs them) or flight-recorder dumps "
                   "(TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1)")
    if t.rule == "numerical.loss_divergence":
        out.append("what ended the run after the last logged step (the scheduler's record, `sacct -j <job>`; a person's "
                   "cancel; the loss scaler's last lines), and the grad norm and loss scale of the steps before the "
                   "onset (the logging interval may have hidden the first bad step)")
    if t.rule == "software.traceback_cut":
        out.append("the end of the traceback: its last line names the exception that was raised")
    if t.rule == "collective.straggler" and "does not say" in t.summary:
        out.append(f"a py-spy dump of rank(s) {ranks_str(t.ranks)} while stuck (what they were doing)")
    return out


def _timeline(inputs: RuleInputs, chain: list[Finding], cap: int = 30) -> list[TimelineEvent]:
    """Each step's cited lines in time order. The first line of a step carries the step's statement; a further
    line is labelled with what IT says (its catalog pattern), not with the step: a rank's dump-signal line at
    12:34 is no "stuck in data loading" of 12:04 (issue 29)."""
    events: dict[tuple, TimelineEvent] = {}
    for f in chain:
        for i, ev in enumerate(f.evidence[:2]):
            what = f.summary if i == 0 else _line_says(ev, f)
            events.setdefault((ev.file, ev.line), TimelineEvent(time=_t(ev), what=what, evidence=ev, role=f.role))
    out = sorted(events.values(), key=lambda e: by_time(e.evidence))
    return out[:cap]


def _line_says(ev: Evidence, step: Finding) -> str:
    """What a further line of a step says: the most specific catalog pattern it matches (its summary, on its
    rank), else that it backs the step."""
    from trainlog_debugger.tools.sources import patterns
    text = ev.text[:4096]
    best = min((p for p in patterns() if not p.fallback and p.match(text)), key=lambda p: (p.tier or 9, p.id),
               default=None)
    who = f" (rank {ev.rank})" if ev.rank is not None else ""
    if best is None:
        return f"also cited for: {step.summary}"
    return f"{best.summary}{who}"


def _t(ev: Evidence) -> str | None:
    return ev.time.iso() if ev.time else None


def _key_files(chain: list[Finding]) -> list[str]:
    counts: dict[str, int] = {}
    for f in chain:
        for e in f.evidence:
            counts[e.file] = counts.get(e.file, 0) + 1
    return sorted(counts, key=lambda k: -counts[k])[:10]


DAEMON_KINDS = ("ais_target", "ais_proxy")
_FIRST = itemgetter(0)  # a (order key, Stamp) pair's key


def job_details(inputs: RuleInputs) -> JobDetails:
    scan = inputs.scan
    kinds = set(inputs.kinds.values())
    framework: str | None = next((k for k in ("nemo", "megatron", "deepspeed") if k in kinds), None)
    if framework is None and any(p.startswith("pytorch.") for p in inputs.summaries):
        framework = "pytorch"
    launchers = [n for n, hit in (("slurm", "slurm" in kinds or any(p.startswith("slurm.") for p in inputs.summaries)),
                                  ("torchrun", "torchrun" in kinds or any(p.startswith("torchrun.") for p in inputs.summaries)
                                   or any(f.local_to_rank for f in scan.files))) if hit]
    nodes = {ev.node for ev in scan.rank_nodes.values() if ev.node}
    ranks = scan.coverage.expected_ranks
    evidence = list(scan.coverage.expected_evidence)
    resumed = inputs.hits("job.resumed")
    job_files = [f for f in scan.files if f.kind not in DAEMON_KINDS] or scan.files
    times = [(k, t) for f in job_files if (t := f.first_time) is not None and (k := order_key(t)) is not None]
    lasts = [(k, t) for f in job_files for ll in f.last_lines.values()
             if (t := ll.time) is not None and (k := order_key(t)) is not None]
    clock = inputs.ais.clock if inputs.ais is not None else None
    offset = clock.offset_s if clock is not None and clock.kind != "none" else None
    basis = f"{clock.kind}, {clock.confidence} confidence" if clock is not None and offset is not None else None
    return JobDetails(
        framework=framework, launcher="+".join(launchers) or None, ranks=ranks, nodes=len(nodes) or None,
        ranks_per_node=(ranks // len(nodes)) if ranks and nodes and ranks % len(nodes) == 0 else None,
        resumed_from_checkpoint=True if resumed else None,
        # by month/day/time: some lines state the year and some do not, and their ISO strings don't sort
        start=min(times, key=_FIRST)[1].iso() if times else None,
        end=max(lasts, key=_FIRST)[1].iso() if lasts else None,
        evidence=evidence + resumed[:1], daemon_clock_offset_s=offset,
        daemon_clock_basis=basis)


def _before(a: Evidence, b: Evidence) -> bool | None:
    """Whether line `a` was printed before line `b`: by place in one file, else by comparable times; None when
    nothing orders them."""
    if a.file == b.file:
        return a.line < b.line
    ka, kb = time_key(a), time_key(b)
    return None if ka is None or kb is None else ka < kb


def _ends_after(c: Candidate, fin: list[Evidence]) -> bool:
    """Whether an end line is shown to come after the candidate's first line (same file, or comparable times)."""
    return bool(c.evidence) and any(_before(c.evidence[0], e) for e in fin)


# what a machine's own log records of its GPUs, disks and links (a node's kernel log: a row remap pending, a corrected
# ECC rate, a filesystem's slow reply that recovered), as opposed to the job's own output
MACHINE_EVENTS = ("gpu_cuda", "storage_io", "network", "infrastructure")


def _ridden_through(c: Candidate, fin: list[Evidence]) -> bool:
    """A reading too weak to decide, of an event of the machine, that nothing orders against the end lines (a
    node's kernel log has its own clock, an uptime): the job's positive proof of a normal end says the job rode
    through it. A weak reading of the job's own output (an unclassified traceback in a rank's file) is not set aside
    this way: unordered, it may be that rank's failure."""
    return c.category in MACHINE_EVENTS and bool(c.evidence) and all(_before(c.evidence[0], e) is None for e in fin)


def _recovered_by_restart(inputs: RuleInputs, c: Candidate, fin: list[Evidence]) -> bool:
    """A fault that torchrun's agent answered by restarting the worker group (`Worker group FAILED. 3/3 attempts
    left; will restart worker group`), when the launcher then reports the restarted group's normal end: the fault
    ended one attempt, not the job (a retry that recovered: TAXONOMY's noise). Only a fault shown to come before the
    last restart, and only when the launcher's own end line comes after that restart."""
    return bool(c.evidence) and _restarted_away(inputs, c.evidence[0], fin)


def _restarted_away(inputs: RuleInputs, ev: Evidence, fin: list[Evidence]) -> bool:
    """Whether line `ev` comes before torchrun's last restart of the worker group, and the launcher's own end line
    after that restart (_recovered_by_restart); or before a scheduler's kill that the job was started again after
    (_requeued), with an end line after that kill in its file (the requeued run's trainer or launcher said it ended)."""
    ends = [e for e in fin if any(w in e.text for w in _LAUNCHER_END)]
    restarts = _last_restarts(inputs)
    if ends and any(_before(ev, r) and any(_before(r, e) for e in ends) for r in restarts):
        return True
    if ends and _in_earlier_attempt(inputs, ev) and any(_before(r, e) for r in restarts for e in ends):
        return True
    return any((ev.file, ev.line) == (k.file, k.line) or _before(ev, k)
               for k in _requeued(inputs) if any(e.file == k.file and e.line > k.line for e in fin))


def _how_restarted(inputs: RuleInputs) -> str:
    """Who started the job again, in words: torchrun's agent (a restart of the worker group) or the scheduler."""
    return "the launcher restarted the workers" if _last_restarts(inputs) else "the job was started again (requeued)"


# what a run prints when it starts (again): NCCL's communicator init, a trainer's resume from its checkpoint,
# Lightning's member registration
_STARTS = ("nccl.comm_init", "job.resumed", "job.lightning_member", "job.lightning_registered")
_KILLS = ("slurm.cancelled_time_limit", "slurm.cancelled_preemption", "slurm.cancelled_node_failure",
          "slurm.node_failure")


def _requeued(inputs: RuleInputs) -> list[Evidence]:
    """A scheduler's kill (time limit, preemption, node failure) after which the same output file shows the job
    starting again (`--requeue`, a resubmission appending to one `slurm-<job>.out`): the kill ended that attempt,
    not the job; it is a restart for _last_attempts_own and _restarted_away."""
    got = inputs.__dict__.get("_requeued")
    if got is None:
        kills = inputs.hits(*_KILLS)
        starts: dict[str, int] = {}
        # (the starts only where a kill is: every rank's init line is thousands of lines at scale)
        for e in _starts(inputs) if kills else ():
            starts[e.file] = max(starts.get(e.file, 0), e.line)
        got = inputs.__dict__["_requeued"] = [k for k in kills if starts.get(k.file, 0) > k.line]
    return got


def _starts(inputs: RuleInputs) -> list[Evidence]:
    """The lines that show a run starting: a communicator's `Init START`/`Init COMPLETE` (not the `Abort COMPLETE` /
    `Destroy COMPLETE` a kill's teardown prints with the same fields), a trainer's resume, Lightning's members."""
    return [e for e in inputs.hits("nccl.comm_init") if "Init " in e.text] + inputs.hits(*_STARTS[1:])


_ATTEMPT_DIR = re.compile(r"(?:^|/)attempt_\d{1,6}/")


def _attempts(inputs: RuleInputs) -> dict[str, int]:
    """The attempt of each file that torchrun's `--log-dir` layout places under `attempt_<N>/` (N: the restarts
    before it), by file."""
    got = inputs.__dict__.get("_attempts")
    if got is None:
        got = {f.rel: a for f in inputs.scan.files if isinstance(a := f.hint.get("attempt"), int)}
        # one run's log dir only: torchrun keeps a folder per invocation (`<log dir>/<run id>/attempt_N/`), and the
        # launcher's restart and end lines do not say which run they are; two runs' attempts are not one run's
        runs = {rel[:m.start()] for rel in got if (m := _ATTEMPT_DIR.search(rel))}
        got = inputs.__dict__["_attempts"] = got if len(runs) <= 1 else {}
    return got


def _in_earlier_attempt(inputs: RuleInputs, ev: Evidence) -> bool:
    """Whether line `ev` is in a worker's file of an attempt before the last one the bundle holds (`attempt_0/5/
    stderr.log` beside `attempt_1/`): its place says it came before the restart that no time of its own can show
    (a traceback line is undated)."""
    attempts = _attempts(inputs)
    a = attempts.get(ev.file)
    return a is not None and a < max(attempts.values())


def _last_restarts(inputs: RuleInputs) -> list[Evidence]:
    """Each agent's (each file's) last `will restart worker group`: the attempt after it is that agent's last; a line
    before it, in its own file or by the clock, belongs to an attempt that the launcher ended and restarted."""
    last: dict[str, Evidence] = {}
    for r in inputs.hits("torchrun.worker_group_restart"):
        if r.file not in last or r.line > last[r.file].line:
            last[r.file] = r
    return list(last.values())


def _last_attempts_own(inputs: RuleInputs, cands: list[Candidate]) -> list[Candidate]:
    """Where torchrun restarted the workers (`will restart worker group`), the attempt that ended the job is the last
    one with a decisive fault of its own: the faults of the attempts before it are set aside (each attempt is a fresh
    start: an IB error that a restart cleared does not explain the disk that filled an hour later). A line's attempt
    is the number of restarts shown before it (in its own file, or by the clock); a line that cannot be ordered
    against a restart is kept."""
    # Slurm's requeue ends a run the same way (`CANCELLED AT .. DUE TO JOB REQUEUE`, SIG_REQUEUED: the job is started
    # again, appending to the same output): the next run's own fault, not the cancel that ended the one before, ended
    # the job; the banner itself belongs to the run it ended
    requeued = _requeued(inputs)
    restarts = inputs.hits("torchrun.worker_group_restart", "slurm.cancelled_requeue") + requeued
    if not restarts:
        return cands
    ends = {(r.file, r.line) for r in restarts}

    attempts = _attempts(inputs)

    def attempt(c: Candidate) -> int:
        if c.evidence and (a := attempts.get(c.evidence[0].file)) is not None:
            return a  # a worker's file of torchrun's `attempt_<N>/`: N restarts came before it
        return sum(1 for r in restarts if c.evidence and _before(r, c.evidence[0]) is True)

    def ended_by_one(c: Candidate) -> bool:
        return bool(c.evidence) and ((c.evidence[0].file, c.evidence[0].line) in ends
                                     or any(_before(c.evidence[0], r) is True for r in restarts)
                                     or _in_earlier_attempt(inputs, c.evidence[0]))

    # (a hang inferred from every rank's collective state is no attempt's own where a requeued job's attempts share
    # one file: the collective analysis reads the ranks' lines of all of them together)
    decisive = [attempt(c) for c in cands if c.strength >= DECISIVE and not (requeued and c.rule in INFERRED_HANGS)]
    if not decisive or max(decisive) == 0:
        return cands
    k = max(decisive)
    return [c for c in cands if attempt(c) >= k or not ended_by_one(c)] or cands


def _no_failure(inputs: RuleInputs, job: JobDetails) -> Diagnosis:
    """No rule found a fault. `completed` needs positive proof of a normal end (the trainer's or the launcher's own
    end line); without it the logs may simply stop mid-run (a paste, a hang nobody killed, a log cut short), so the
    answer is `inconclusive`: it shows where each rank's log stops and names what would decide it. A false
    all-clear sends the on-call engineer back to bed while the job is dead."""
    fin = inputs.finished()
    if not fin and (done := inputs.hits("job.training_done")):
        return _stops_after_training(inputs, job, done)
    if fin and (others := _only_other_ranks_ended(fin)):
        return _stops_after_training(inputs, job, fin, others)
    if fin:
        return Diagnosis(status=Status.completed, category="none", confidence="high",
                         headline="completed: the job says it finished normally", job=job,
                         chain=[Finding(id="job.finished", summary="the job reports a normal end", role=Role.context,
                                        evidence=fin[:2])],
                         timeline=[TimelineEvent(time=_t(fin[0]), what="normal end", evidence=fin[0])],
                         key_files=[fin[0].file], restart="", coverage=inputs.scan.coverage)
    chain = _where_logs_stop(inputs)
    return Diagnosis(status=Status.inconclusive, category="none", confidence="low",
                     headline="inconclusive: no fault found on any rank, and no proof that the job ended normally",
                     job=job, coverage=inputs.scan.coverage, chain=chain, timeline=_timeline(inputs, chain),
                     key_files=_key_files(chain), restart="",
                     missing=["a line that proves a normal end (the trainer's last step or end-of-fit line, the "
                              "launcher's 'worker group successfully finished'), or every rank's exit code",
                              "if the job hung: a py-spy dump of every rank while it was stuck, or the NCCL flight "
                              "recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) and the watchdog's timeout lines",
                              "the scheduler's view (sacct -j <job> state and exit codes)"],
                     recommendations=["check whether the job is still running or was killed; the logs shown stop "
                                      "without an error and without an end line"])


# torchrun's agent (every local worker exited 0); DeepSpeed's launcher, one line per local rank that exited 0
# (RuleInputs.finished keeps them only where every spawned process has one)
_LAUNCHER_END = ("worker group successfully finished", "exits successfully.")


def _only_other_ranks_ended(fin: list[Evidence]) -> list[int]:
    """The ranks whose end-of-training lines are all there is, when none of them is rank 0 and no launcher reports
    the end: [] otherwise. Why: the trainers print their end line from the main process (the HF Trainer's
    `Training completed`, Lightning's `Trainer.fit stopped` are rank 0's), so an end line that a rank above 0
    prints (a prefix, or its own words: `Training completed for rank 6`) says that this rank left its loop. The
    job is more ranks than that one (at least N + 1), and a rank that finished first and waits in a final
    barrier while the others still train leaves exactly this log: no proof of the job's end (TAXONOMY)."""
    ranks = []
    for e in fin:
        if any(w in e.text for w in _LAUNCHER_END):
            return []
        r = e.rank if e.rank is not None else named_in_text(e.text)[0]
        if r is None or r == 0:
            return []
        ranks.append(r)
    return sorted(set(ranks))


def _stops_after_training(inputs: RuleInputs, job: JobDetails, fin: list[Evidence],
                          ranks: list[int] | None = None) -> Diagnosis:
    """No fault, and no end line, but a trainer's marker that its training loop is over (job.training_done: Megatron's
    `[after training is done]`, printed before the final checkpoint, the final evaluation and the async-save
    finalisation of pretrain()), or an end line of ranks other than rank 0 only (`ranks`, _only_other_ranks_ended):
    the job got that far, and what follows is not shown. Not `completed` (TAXONOMY: positive proof of a normal
    end): a job that hung in its teardown (destroy_process_group, a final barrier, a final write) or was killed there
    leaves exactly these logs."""
    what = ("the training loop reports its end; nothing after it shows the job's own end" if not ranks else
            f"only rank {ranks_str(ranks)} reports the end of training: rank 0's (the job's main process) and the "
            f"launcher's are not shown, and the job has at least {max(ranks) + 1} ranks")
    chain = [Finding(id="job.finished" if ranks else "job.training_done", summary=what, role=Role.context,
                     evidence=fin[:2])]
    chain += _where_logs_stop(inputs)
    return Diagnosis(status=Status.inconclusive, category="none", confidence="low",
                     headline="inconclusive: training finished, but nothing shows the job's own end after it (final "
                              "checkpoint, evaluation, process-group teardown, exit)",
                     job=job, coverage=inputs.scan.coverage, chain=chain, timeline=_timeline(inputs, chain),
                     key_files=_key_files(chain), restart="",
                     missing=["the lines after the end of training, or every rank's exit code (sacct -j <job>, the "
                              "launcher's 'worker group successfully finished')",
                              "if the job did not exit: a py-spy dump of every rank (a hang in destroy_process_group, "
                              "a final checkpoint write, DataLoader workers or a logger's finish)"],
                     recommendations=["check whether the job exited after training: if it hung or was killed after "
                                      "this line, dump its stacks (py-spy dump --pid) and look at the teardown"])


def _where_logs_stop(inputs: RuleInputs, cap: int = 8) -> list[Finding]:
    """What the logs do show when nothing failed visibly: each rank's last line (ranks that stop first first, where
    the lines carry times), and the last warning-or-worse lines the catalog noticed."""
    last = inputs.last_lines()
    out: list[Finding] = []
    if last:
        out.append(Finding(id="logs.last_lines", role=Role.context, count=len(last),
                           summary=f"where the logs stop: the last line of {len(last)} rank(s) or file(s), earliest "
                                   "first (none is an error)" + (f"; showing {cap} of {len(last)}" if len(last) > cap else ""),
                           ranks=sorted({e.rank for e in last if e.rank is not None}), evidence=last[:cap]))
    noted = sorted((p.last for p in inputs.scan.patterns if p.last is not None and p.tier > 0), key=by_time)
    if noted:
        out.append(Finding(id="logs.last_noted", role=Role.noise, count=len(noted),
                           summary="the last lines the catalog noticed (handled or harmless on their own)"
                                   + (f"; showing the last {cap} of {len(noted)} patterns" if len(noted) > cap else ""),
                           evidence=noted[-cap:]))
    return out
