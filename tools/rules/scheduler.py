"""The scheduler ended the job: time limit, preemption, node failure. Not a training failure unless something
earlier was already wrong (the diagnosis orders candidates by time)."""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate, restart_without


def slurm_cancel(f: RuleInputs):
    out = []
    for pid, what, strength, restart in (
            ("slurm.cancelled_time_limit", "SLURM cancelled the job at its time limit", 0.9, "restart as is"),
            ("slurm.cancelled_preemption", "SLURM preempted the job", 0.9, "restart as is"),
            ("slurm.cancelled_node_failure", "SLURM cancelled the job after a node failure", 0.9, None),
            ("slurm.node_failure", "srun lost a node", 0.85, None)):
        evs = f.hits(pid)
        if evs:
            node = (f.fields_of(evs[0], pid).get("node") or "")
            recs = {"slurm.cancelled_time_limit": ["resume from the last checkpoint; raise --time or checkpoint more "
                                                   "often"],
                    "slurm.cancelled_preemption": ["resume from the last checkpoint (requeue)"]}.get(
                pid, [f"check node {node} in slurmctld's log; resume without it" if node else
                      "find the failed node in slurmctld's log (`sacct -j <job> -o NodeList,State`); resume without it"])
            out.append(candidate(f"scheduler.{pid.split('.')[1]}", "infrastructure", what, strength, evs[:2], f,
                            status="cancelled", ranks=[], nodes=[node] if node and restart is None else [],
                            restart=restart or restart_without(node or None), recommendations=recs))
    return out


def death_signal(f: RuleInputs):
    evs = f.hits("torchrun.death_signal")
    return [candidate("scheduler.launcher_signalled", "infrastructure", "the launcher itself received a termination signal "
                 "(scheduler cancel or preemption)", 0.45, evs[:2], f, status="cancelled", ranks=[],
                 restart="restart as is")] if evs else []


RULES = [slurm_cancel, death_signal]
