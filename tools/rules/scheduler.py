"""The scheduler ended the job: time limit, preemption, node failure. Not a training failure unless something
earlier was already wrong (the diagnosis orders candidates by time)."""

from __future__ import annotations

import calendar
import re

from trainlog_debugger.tools.ranks import expand_hostlist, parse_ranges, ranks_str
from trainlog_debugger.tools.rules.base import RuleInputs, candidate, restart_without
from trainlog_debugger.tools.lines.signals import SIGNAL_WHY, SIGNALS, signal_name


ENDED_A_HANG = 0.35  # below DECISIVE: the time limit is then how a hang ended, a weak reading of its own
HANG_SILENCE_S = 1800.0  # no step line for this long before the time limit: the job had stopped making progress
HANG_INTERVALS = 10     # ... and for at least this many of its usual step intervals


def _posix(ev) -> float | None:
    """POSIX seconds of a line's own dated stamp, read as UTC like the step parser's (tools.steps.formats.epoch):
    only compared with step times, never shown."""
    t = ev.time
    if t is None or t.year is None or t.month is None or t.day is None or t.uptime_s is not None:
        return None
    try:
        return float(calendar.timegm((t.year, t.month, t.day, t.hour, t.minute, t.second))) + t.micro / 1e6
    except (ValueError, OverflowError):
        return None


def silence_before(f: RuleInputs, ev) -> float | None:
    """Seconds between the job's last step line (any rank's, tools/steps) and line `ev`, when the job had stopped
    making progress for at least HANG_SILENCE_S and HANG_INTERVALS of its median step interval; None otherwise
    (steady progress to the end, or no dated step lines to tell)."""
    at = _posix(ev)
    if at is None or f.steps is None:
        return None
    last, gaps = None, []
    for series in list(f.steps.series) + list(f.steps.training):
        ts = sorted(t for t in series.times if t == t and t <= at + 60)
        if ts:
            last = ts[-1] if last is None else max(last, ts[-1])
            gaps += [b - a for a, b in zip(ts, ts[1:]) if b > a]  # one series' own interval, never two ranks' offset
    if last is None or not gaps:
        return None
    gaps.sort()
    median = gaps[len(gaps) // 2]
    silent = at - last
    return silent if silent >= max(HANG_SILENCE_S, HANG_INTERVALS * median) else None


# the end states of Slurm's accounting (slurm.job_state: sacct, scontrol, seff, the job's mail) that say what its
# banner says: the record of a job whose own log lost the banner (or never had it: the batch script's output only)
_RECORDED = {"slurm.cancelled_time_limit": ("TIMEOUT",), "slurm.cancelled_preemption": ("PREEMPTED",),
             "slurm.cancelled_node_failure": ("NODE_FAIL", "BOOT_FAIL")}


def job_records(f: RuleInputs) -> list:
    """The lines of Slurm's record of how a job ended (slurm.job_state) that are this bundle's job's: a sacct row
    names its job id, and a listing of several jobs (`sacct -u $USER`) holds others' too. A row counts when its job
    is one the bundle's own lines name (a banner's `JOB <id>`/`STEP <id>.0`, `slurm-<id>.out`), or, where none
    names one, when the rows name one job only; a line without an id (scontrol's `JobState=`, seff's `State:`)
    counts when no row names another job."""
    rows = f.hits("slurm.job_state")
    if not rows:
        return []
    ids = {str(i) for e in rows if (i := f.fields_of(e, "slurm.job_state").get("job"))}
    named = {m.group(1) for e in f.hits(*_BANNERS) if (m := _BANNER_JOB.search(e.text))} | \
            {m.group(1) for fs in f.scan.files if (m := _SLURM_OUT.search(fs.rel))}
    ours = ids & named if named else (ids if len(ids) <= 1 else set())
    return [e for e in rows if (str(i) in ours if (i := f.fields_of(e, "slurm.job_state").get("job"))
                                else len(ids) <= 1 or bool(ids & named))]


_BANNERS = ("slurm.cancelled_time_limit", "slurm.cancelled_preemption", "slurm.cancelled_node_failure",
            "slurm.cancelled_requeue", "slurm.cancelled", "slurm.failed")
_BANNER_JOB = re.compile(r"\*\*\* (?:JOB|STEP) (\d+)")
_SLURM_OUT = re.compile(r"(?:^|/)slurm-(\d+)(?:_\d+)?\.(?:out|err|log)$")


def slurm_cancel(f: RuleInputs):
    out = []
    for pid, what, strength, restart in (
            ("slurm.cancelled_time_limit", "SLURM cancelled the job at its time limit", 0.9, "restart as is"),
            ("slurm.cancelled_preemption", "SLURM preempted the job", 0.9, "restart as is"),
            ("slurm.cancelled_requeue", "SLURM requeued the job (scontrol requeue, or a requeue after a node failure "
             "or a preemption)", 0.85, "restart as is"),
            ("slurm.cancelled_node_failure", "SLURM cancelled the job after a node failure", 0.9, None),
            ("slurm.node_failure", "srun lost a node", 0.85, None),
            ("slurm.node_memory_error", "the node reported an uncorrectable memory error (host RAM, not a GPU)", 0.85,
             None)):
        evs = f.hits(pid) + [e for e in job_records(f)  # the scheduler's record says the same
                             if f.fields_of(e, "slurm.job_state").get("state") in _RECORDED.get(pid, ())]
        if evs:
            node = (f.fields_of(evs[0], pid).get("node") or "")
            if pid == "slurm.cancelled_node_failure":
                # the banner's node is the step's own host (`STEP 123.0 ON gpu-node-11 CANCELLED ... DUE TO NODE
                # FAILURE`), not the one that failed: that is srun's `Node failure on <node>`, when it is there
                lost = f.hits("slurm.node_failure")
                node = (f.fields_of(lost[0], "slurm.node_failure").get("node") or "") if lost else ""
            recs = {"slurm.cancelled_time_limit": ["resume from the last checkpoint; raise --time or checkpoint more "
                                                   "often"],
                    "slurm.cancelled_preemption": ["resume from the last checkpoint (requeue)"],
                    "slurm.cancelled_requeue": ["check that the requeued job resumed from its last checkpoint; "
                                                "`sacct -j <job> -o State,Reason` says why it was requeued"]}.get(
                pid, [f"check node {node} in slurmctld's log; resume without it" if node else
                      "find the failed node in slurmctld's log (`sacct -j <job> -o NodeList,State`); resume without it"])
            status = "crashed" if pid == "slurm.node_memory_error" else "cancelled"  # the node's fault, no cancel
            facts: dict[str, object] = {}
            if pid == "slurm.cancelled_time_limit" and (quiet := silence_before(f, evs[0])) is not None:
                # the limit ended a job that had already stopped: how it ended, not what was at fault (TAXONOMY: a
                # hang with no proof of its cause is inconclusive); what the hang's own evidence says comes first
                what = (f"SLURM cancelled the job at its time limit {quiet / 3600:.1f} h after the last step any rank "
                        f"logged: the job had stopped making progress, and the limit ended the hang")
                strength, status, restart = ENDED_A_HANG, "hung", "fix first"  # the hang may come back
                facts = {"ended_a_hang": True, "silent_s": round(quiet), "consequence_only": True}
                recs = ["find why the job stopped progressing: a py-spy dump of every rank (or faulthandler's "
                        "dump_traceback_later) and dmesg of every node, taken while it hangs",
                        "lower the collective timeout (init_process_group(timeout=...)) so a hang fails fast"]
            # the tasks srun said had exited on their own before the banner (`task 5: Exited with exit code 1`): they
            # died before the kill, and their sockets' closes are not its teardown (diagnose._just_above)
            gone = sorted({r for e in f.hits("slurm.task_exit") if e.file == evs[0].file and e.line < evs[0].line
                           and str(f.fields_of(e, "slurm.task_exit").get("how") or "").startswith("Exited with exit code")
                           for r in parse_ranges(str(f.fields_of(e, "slurm.task_exit").get("tasks") or ""))})
            if gone:
                facts = {**facts, "exited_before": ranks_str(gone)}
            out.append(candidate(f"scheduler.{pid.split('.')[1]}", "infrastructure", what, strength, evs[:2], f,
                            status=status, ranks=[], nodes=[node] if node and restart is None else [],
                            restart=restart or restart_without(node or None), recommendations=recs, facts=facts))
    return out


def death_signal(f: RuleInputs):
    """The torchrun agent (or DeepSpeed's launcher) itself was signalled and shuts its workers down. Which signal says who sent it (the line
    prints its number, `Received 1 death signal`, or its name): SIGHUP is the launching terminal or SSH session
    closing, SIGTERM the scheduler or a kill, SIGINT a Ctrl-C (tools.statements.SIGNAL_WHY). Named, the reading
    is specific and outranks the table's generic one for the same line; unnamed, it stays the weak generic one."""
    evs = f.hits("torchrun.death_signal", "deepspeed.launcher_signalled")
    if not evs:
        return []
    launcher = "the DeepSpeed launcher" if evs[0].text.find("Main process received") >= 0 else "the torchrun agent"
    sig = signal_name(str(f.fields_of(evs[0], "torchrun.death_signal").get("signal")
                          or f.fields_of(evs[0], "deepspeed.launcher_signalled").get("signal") or ""))
    why, action = SIGNAL_WHY.get(sig or "", (None, None))
    if sig is None or why is None:
        return [candidate("scheduler.launcher_signalled", "infrastructure", "the launcher itself received a termination "
                          "signal (scheduler cancel or preemption)", 0.45, evs[:2], f, status="cancelled", ranks=[],
                          restart="restart as is")]
    num = next((n for n, name in SIGNALS.items() if name == sig), None)
    return [candidate("scheduler.launcher_signalled", "infrastructure",
                      f"{launcher} received {sig}{f' (signal {num})' if num else ''} and shut its workers "
                      f"down: {why}", 0.6, evs[:2], f, status="cancelled", ranks=[],
                      restart="fix first" if sig == "SIGHUP" else "restart as is",
                      facts={"signal": sig}, recommendations=[action])]


def k8s_unschedulable(f: RuleInputs):
    """FailedScheduling is what every pod prints while it waits (the autoscaler adding a node, a gang scheduler
    collecting its pods), so it is the answer only when nothing in the bundle shows the pod placed after all (no
    `Successfully assigned`, no describe `Node:` line): then the job never ran. Status cancelled, never completed:
    the platform, not the program, ended it."""
    evs = f.hits("k8s.failed_scheduling")
    if not evs or f.hits("k8s.scheduled", "k8s.pod_node"):
        return []
    why = (f.fields_of(evs[-1], "k8s.failed_scheduling").get("why") or "")[:200]
    return [candidate("scheduler.k8s_unschedulable", "infrastructure", "the job never started: the Kubernetes "
                      f"scheduler found no node for its pod{' (' + why + ')' if why else ''}", 0.8, evs[-1:], f,
                      status="cancelled", ranks=[], nodes=[],
                      recommendations=["request what a node can give (GPUs, memory per pod), add capacity, or fix "
                                       "node selectors, affinity and tolerations; then resubmit"])]


def job_nodes(f: RuleInputs) -> set[str]:
    """The nodes the job ran on, as its lines state them: the ranks' nodes, srun's task-exit hosts, and the host
    list of a printed SLURM_JOB_NODELIST / SLURM_NODELIST (expanded: `gpu-h[031-032]`)."""
    out = {str(rn.node) for rn in f.scan.rank_nodes.values() if getattr(rn, "node", None)}
    for pid, key in (("slurm.task_exit", "hosts"), ("env.slurm_nodelist", "nodelist")):
        out |= {h for e in f.hits(pid) for h in expand_hostlist(str(f.fields_of(e, pid).get(key) or ""))}
    return out


def node_not_responding(f: RuleInputs):
    """sinfo -R's `Not responding` row for one of the job's own nodes (job_nodes): Slurm set the node down when its
    slurmd stopped answering (a crash, a hang, a reboot, its network): the platform, whatever its peers printed.
    A row for another node of the cluster says nothing of this job."""
    rows = f.hits("slurm.node_not_responding")
    ours = job_nodes(f) if rows else set()
    for e in rows:
        down = [n for n in expand_hostlist(str(f.fields_of(e, "slurm.node_not_responding").get("nodes") or ""))
                if n in ours]
        if down:
            return [candidate("scheduler.node_not_responding", "infrastructure",
                              f"Slurm set {', '.join(down[:4])} down: its slurmd stopped answering (sinfo -R: Not "
                              f"responding), and it is one of the job's nodes", 0.7, [e], f, ranks=[], nodes=down[:4],
                              recommendations=["find why the node stopped answering (its console, BMC or kernel log "
                                               "around that time); resubmit excluding it"])]
    return []


RULES = [slurm_cancel, death_signal, k8s_unschedulable, node_not_responding]
