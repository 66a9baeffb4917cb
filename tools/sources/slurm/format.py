"""SLURM lines written into the job's output (FORMATS.md §5).

Real/constructed lines:
    slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***
    slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of the step tasks have been OOM Killed.
    srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)
A scheduler cancel (time limit, preemption, node failure) is not a training failure: it makes the job's end
an infrastructure event, and the NCCL noise around it is cascade.
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, PathRule, has
from trainlog_debugger.tools.sources.pattern import P

_BANNER = r"\*\*\* (?:JOB|STEP) (?P<step>\S+) ON (?P<node>\S+) "  # slurmstepd's `*** JOB|STEP <id> ON <node> ...`
_CANCEL = _BANNER + r"CANCELLED AT (?P<at>\S+)"

# a job's end state on the lines its tools print: a sacct row (`<jobid>[.step] ... <State> <exit>:<signal>`, then
# only values with digits: an elapsed time, a node list; each value matched atomically, so a row that ends in a word
# fails at once instead of trying every digit of every value), scontrol's `JobState=`, seff's `State: `, the mail subject's last word ({s}: the state as sacct may
# cut it; {w}: whole)
_ENDED = r"OUT_OF_MEMORY|NODE_FAIL|TIMEOUT|PREEMPTED|BOOT_FAIL"  # job_state_string's failure states
_ENDED_CUT = r"OUT_OF_ME\+|" + _ENDED  # and sacct's 10-column cut of the one longer than its column
_STATE = (r"^\s*\d+(?:_\d+)?(?:\.\S+)?\s.*?\s(?:{s})\s+\d+:\d+(?:\s+(?>[^\s\d]{{0,128}}\d\S{{0,256}})){{0,8}}\s*$|\bJobState=(?:{w})\b|^State: (?:{w})\b|"
          r"^(?:Subject: )?Slurm (?:Array (?:Summary|Task) )?Job_id=\S+.*, (?:{w})(?:, ExitCode \d+)?\s*$")

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
    # SIG_REQUEUED (src/slurmd/slurmstepd/req.c): the job was requeued (scontrol requeue, a requeue on node failure
    # or preemption in REQUEUE mode): the scheduler ended this run
    P("slurm.cancelled_requeue", 1, "infrastructure", "root_candidate",
      r"CANCELLED AT \S+ DUE TO JOB REQUEUE", "DUE TO JOB REQUEUE",
      "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO JOB REQUEUE ***",
      "SLURM requeued the job", fields=_CANCEL),
    # slurmd's ume_notify() (releases up to 23.02, src/slurmd/slurmstepd/req.c:748 at slurm-23-02-8-1): the NODE's
    # memory (host DRAM) had an uncorrectable error; its tasks may be killed. The node's hardware, not a GPU's
    P("slurm.node_memory_error", 1, "infrastructure", "root_candidate",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ UNCORRECTABLE MEMORY ERROR AT", "UNCORRECTABLE MEMORY ERROR AT",
      "slurmstepd: error: *** STEP 9120044.0 ON nid001284 UNCORRECTABLE MEMORY ERROR AT 2024-06-12T22:41:09 ***",
      "the node reported an uncorrectable memory error (host RAM)",
      fields=_BANNER + r"UNCORRECTABLE MEMORY ERROR AT (?P<at>\S+)"),
    P("slurm.cancelled", 1, None, "cascade",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S", "CANCELLED AT",
      "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 ***",
      "job or step cancelled (scancel, signal or task failure)", fields=_CANCEL + r"(?: DUE [Tt][Oo] (?P<reason>[^*]+?))? \*\*\*",
      fallback=True),
    P("slurm.failed", 1, None, "cascade",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ FAILED \(non-zero exit code", "FAILED (non-zero exit code",
      "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 FAILED (non-zero exit code or other failure mode) ***",
      "SLURM step failed", fields=r"\*\*\* (?:JOB|STEP) (?P<step>\S+) ON (?P<node>\S+) FAILED"),
    # the cgroup OOM killer's report; and Slurm's own memory enforcement (JobAcctGather, src/interfaces/
    # jobacct_gather.c:889 `%ps exceeded memory limit (%d > %d), being killed`, and the `Exceeded job memory limit`
    # notice srun prints for it, :291 and src/slurmd/slurmd/job_mem_limit.c:114)
    P("slurm.oom_kill", 1, "oom", "root_candidate",
      r"(?:Detected \d+ oom[-_]kill event|exceeded memory limit \(\d+ > \d+\), being killed|Exceeded job memory limit)",
      ("oom_kill event", "oom-kill event", "exceeded memory limit (", "Exceeded job memory limit"),
      "slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of the step tasks have been OOM Killed.",
      "cgroup OOM killer killed step tasks (host memory)",
      fields=r"Detected (?P<events>\d+) oom[-_]kill event.*? in (?:StepId=|JobId=)?(?P<step>\S+?)\.? ", ints=("events",)),
    P("slurm.task_exit", 1, None, "cascade",
      r"srun: error: \S+: tasks? [\d,\-]+: ", "srun: error: ",
      "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)",
      "srun reports how tasks ended (node → task ids)",
      fields=r"srun: error: (?P<hosts>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<how>.*)"),
    # the scheduler's record of how the job ended, as its reporting tools print it (src/common/slurm_protocol_defs.c
    # job_state_string): sacct's State and ExitCode columns (State cut to 10 characters with a `+`: src/sacct/print.c,
    # `OUT_OF_ME+  0:125`), scontrol's `JobState=` (src/scontrol/info_job.c:234), seff's `State:` and the job's mail
    # subject (src/slurmctld/agent.c:2412 `Slurm Job_id=%u Name=%s %s%s%s`, the state last). A job fact, no trigger
    # of its own: the rules read it as the scheduler's word (tools/rules/scheduler.slurm_cancel, infra.memory_kills)
    P("slurm.job_state", 0, None, "context",
      r"(?:" + _ENDED_CUT + ")",
      ("OUT_OF_ME", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "BOOT_FAIL"),
      "4891784.0        python               ml-team        256 OUT_OF_ME+    0:125",
      "the scheduler's record of how the job ended (sacct, scontrol, seff, its mail)",
      fields=r"^(?:\s*(?P<job>\d{1,12})(?:_\d+)?(?:\.\S+)?\s)?.*?(?P<state>" + _ENDED_CUT + ")",
      verify=_STATE.format(s=_ENDED_CUT, w=_ENDED)),
    # `sinfo -R`'s row for a node Slurm set down when its slurmd stopped answering (src/slurmctld/ping_nodes.c:243
    # `Not responding`: REASON, USER, TIMESTAMP, NODELIST): a job fact; tools/rules/scheduler.node_not_responding
    # reads it only for the job's own nodes (sinfo lists the whole cluster)
    P("slurm.node_not_responding", 0, None, "context",
      r"Not responding[ \t]+\S+[ \t]+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[ \t]+\S", "Not responding",
      "Not responding       slurm     2025-03-04T02:11:09 gpu-h032",
      "sinfo -R: Slurm set these nodes down (slurmd not responding)",
      fields=r"Not responding\s+\S+\s+(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\s+(?P<nodes>\S{1,4096})",
      verify=r"^Not responding\s+\S+\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\s+\S"),
    P("slurm.node_failure", 1, "infrastructure", "root_candidate",
      r"srun: error: Node failure on", "Node failure on",
      "srun: error: Node failure on gpu-node-17",
      "srun lost a node", fields=r"Node failure on (?P<node>\S+)"),
]

# srun's task → node statements, a step over the per-file scans (tools.scan.summary)
SCAN_STEPS = {"file_nodes": "trainlog_debugger.tools.sources.slurm.nodes:task_nodes"}


# ---- detection: sbatch's output file names (`slurm-%j.out`, `error-%j-%n.out`, ...), then srun's own lines
SLURM = "slurm"
KINDS = {SLURM: "worker"}
_NAME = re.compile(
    r"^(?:slurm-\d+\S*|(?:error|output|err|out|stderr|stdout)[-_]\d+(?:[-_.]\w+)*\.(?:out|err|log)"
    r"|[\w.-]*?\d{4,}(?:[-_.]\d+)*\.(?:out|err))$", re.I)
_LINES = re.compile(r"^(?:\s*\d+: )?(?:slurmstepd(?:-[\w.-]+)?|srun): ", re.M)
DETECT = (Detector("layout", 30, lambda h: SLURM if _NAME.match(h.name) else None, ("slurm-4242.out", b"hello\n")),
          Detector("framing", 60, lambda h: SLURM if has(_LINES, h.text, "srun: ", "slurmstepd") else None,
                   ("job.log", b"srun: error: gpu-node-17: task 3: Exited with exit code 1\n")))

# ---- path hints: the job id (and the %n node index) that sbatch's --output patterns put in a file name
_PATH_JOB = re.compile(r"slurm-(?P<job>\d+(?:_\d+)?(?:\.\d+)?)\.(?:out|err)")  # %j, %A_%a, %J
_PATH_NODE_FILE = re.compile(r"[A-Za-z]\w*-(?P<job>\d{3,20})-(?P<n>\d{1,7})\.(?:out|err)")  # error-<job>-<%n>.out
_PATH_ANY_JOB = re.compile(r"(?i)(?:^|[_\-.])job(?:id)?[_\-]?(?P<job>\d{3,})(?=[_\-.]|$)")


def _job(part: str) -> tuple[str, dict[str, object]] | None:
    if m := _PATH_JOB.fullmatch(part):
        return "slurm_job", {"job_id": m.group("job")}
    if m := _PATH_NODE_FILE.fullmatch(part):
        return "slurm_node_file", {"job_id": m.group("job"), "node_index": int(m.group("n"))}
    if m := _PATH_ANY_JOB.search(part):
        return "slurm_job", {"job_id": m.group("job")}
    return None


PATH_HINTS = (PathRule("part", 20, _job, "logs/slurm-4242.out"),)
