"""SLURM lines written into the job's output (FORMATS.md §5).

Real/constructed lines:
    slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***
    slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of the step tasks have been OOM Killed.
    srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)
A scheduler cancel (time limit, preemption, node failure) is not a training failure: it makes the job's end
an infrastructure event, and the NCCL noise around it is cascade.
"""

from trainlog_debugger.tools.sources.pattern import P

_CANCEL = r"\*\*\* (?:JOB|STEP) (?P<step>\S+) ON (?P<node>\S+) CANCELLED AT (?P<at>\S+)"

PATTERNS = [
    P("slurm.cancelled_time_limit", 1, "infrastructure", "root_candidate",
      r"CANCELLED AT \S+ DUE TO TIME LIMIT", "DUE TO TIME LIMIT",
      "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***",
      "SLURM cancelled the job at its time limit", fields=_CANCEL),
    P("slurm.cancelled_preemption", 1, "infrastructure", "root_candidate",
      r"CANCELLED AT \S+ DUE TO PREEMPTION", "DUE TO PREEMPTION",
      "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO PREEMPTION ***",
      "SLURM preempted the job", fields=_CANCEL),
    P("slurm.cancelled_node_failure", 1, "infrastructure", "root_candidate",
      r"CANCELLED AT \S+ DUE TO NODE FAILURE", "DUE TO NODE FAILURE",
      "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
      "SLURM cancelled the job after a node failure", fields=_CANCEL),
    P("slurm.cancelled", 1, None, "cascade",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S", "CANCELLED AT",
      "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 ***",
      "job or step cancelled (scancel, signal or task failure)", fields=_CANCEL + r"(?: DUE [Tt][Oo] (?P<reason>[^*]+?))? \*\*\*",
      fallback=True),
    P("slurm.failed", 1, None, "cascade",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ FAILED \(non-zero exit code", "FAILED (non-zero exit code",
      "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 FAILED (non-zero exit code or other failure mode) ***",
      "SLURM step failed", fields=r"\*\*\* (?:JOB|STEP) (?P<step>\S+) ON (?P<node>\S+) FAILED"),
    P("slurm.oom_kill", 1, "oom", "root_candidate",
      r"Detected \d+ oom[-_]kill event", ("oom_kill event", "oom-kill event"),
      "slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of the step tasks have been OOM Killed.",
      "cgroup OOM killer killed step tasks (host memory)",
      fields=r"Detected (?P<events>\d+) oom[-_]kill event.*? in (?:StepId=|JobId=)?(?P<step>\S+?)\.? ", ints=("events",)),
    P("slurm.task_exit", 1, None, "cascade",
      r"srun: error: \S+: tasks? [\d,\-]+: ", "srun: error: ",
      "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)",
      "srun reports how tasks ended (node → task ids)",
      fields=r"srun: error: (?P<hosts>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<how>.*)"),
    P("slurm.node_failure", 1, "infrastructure", "root_candidate",
      r"srun: error: Node failure on", "Node failure on",
      "srun: error: Node failure on gpu-node-17",
      "srun lost a node", fields=r"Node failure on (?P<node>\S+)"),
]
