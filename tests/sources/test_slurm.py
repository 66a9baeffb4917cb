"""tools/sources/slurm.py: SLURM lines written into the job's output (FORMATS.md §5).

Each row: a line exactly as emitted, the pattern ids the scanner records for it after the fallback rule, and the
fields each id extracts (a subset; None = absent). `slurm.cancelled` is a fallback: a banner with a specific
reason (time limit, preemption, node failure) records only that reason's pattern.
"""

from __future__ import annotations

import pytest
from matching import check, params

CANCEL = "slurm.cancelled"

BANNERS = [
    ("time limit, step",
     "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***",
     {"slurm.cancelled_time_limit": dict(step="4891784.0", node="gpu-node-17", at="2024-11-05T12:34:56")}),
    ("preemption, job",
     "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO PREEMPTION ***",
     {"slurm.cancelled_preemption": dict(step="4891784", node="gpu-node-17")}),
    ("node failure",
     "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
     {"slurm.cancelled_node_failure": dict(step="4891784", node="gpu-node-17", at="2024-11-05T12:34:56")}),
    ("requeue: the scheduler's own reason (SIG_REQUEUED)",
     "slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO JOB REQUEUE ***",
     {"slurm.cancelled_requeue": dict(step="4891784", node="gpu-node-17", at="2024-11-05T12:34:56")}),
    ("≤24.11 scancel / signal: no reason",
     "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 ***",
     {CANCEL: dict(step="4891784.0", node="gpu-node-17", at="2024-11-05T12:34:56", reason=None)}),
    ("≥25.05 'DUE to SIGNAL' with lowercase 'to'",
     "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE to SIGNAL Terminated ***",
     {CANCEL: dict(step="4891784.0", reason="SIGNAL Terminated")}),
    ("≥25.05 SIGNAL Killed, batch step",
     "slurmstepd: error: *** STEP 4891784.batch ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE to SIGNAL Killed ***",
     {CANCEL: dict(step="4891784.batch", reason="SIGNAL Killed")}),
    ("≥25.05 task failure",
     "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TASK FAILURE ***",
     {CANCEL: dict(reason="TASK FAILURE")}),
    ("het-job step suffix",
     "slurmstepd: error: *** STEP 4891784.0+1 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 ***",
     {CANCEL: dict(step="4891784.0+1")}),
    ("≥25.05 FAILED banner, no time",
     "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 FAILED (non-zero exit code or other failure mode) ***",
     {"slurm.failed": dict(step="4891784.0", node="gpu-node-17")}),
    ("MULTIPLE_SLURMD prefix",
     "slurmstepd-gpu-node-17: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***",
     {"slurm.cancelled_time_limit": dict(node="gpu-node-17")}),
    ("srun --label prefix",
     " 3: slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***",
     {"slurm.cancelled_time_limit": dict(step="4891784.0")}),
]

OOM = [
    ("≥23.02, one event",
     "slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of the step tasks have been OOM Killed.",
     {"slurm.oom_kill": dict(events=1, step="123456.batch")}),
    ("≥23.02, plural",
     "slurmstepd: error: Detected 3 oom_kill events in StepId=123456.0. Some of the step tasks have been OOM Killed.",
     {"slurm.oom_kill": dict(events=3, step="123456.0")}),
    ("≤22.05 'oom-kill event(s)' and ' cgroup'",
     "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=123456.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
     {"slurm.oom_kill": dict(events=1, step="123456.batch")}),
    ("≤22.05 for a whole job",
     "slurmstepd: error: Detected 2 oom-kill event(s) in JobId=123456 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
     {"slurm.oom_kill": dict(events=2, step="123456")}),
]

SRUN = [
    ("real: tasks aborted (SIGABRT words)",
     "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)",
     {"slurm.task_exit": dict(hosts="frontier07210", tasks="8-12,14-15", how="Aborted (core dumped)"), "process.sigabrt": {}}),
    ("real: tasks killed",
     "srun: error: frontier07200: tasks 0-7: Killed",
     {"slurm.task_exit": dict(hosts="frontier07200", tasks="0-7", how="Killed")}),
    ("single task exit code",
     "srun: error: node17: task 3: Exited with exit code 1",
     {"slurm.task_exit": dict(hosts="node17", tasks="3", how="Exited with exit code 1")}),
    ("hostlist range, Out Of Memory",
     "srun: error: node[01-02]: tasks 0-15: Out Of Memory",
     {"slurm.task_exit": dict(hosts="node[01-02]", tasks="0-15", how="Out Of Memory")}),
    ("segfault is also process.segfault",
     "srun: error: node17: task 3: Segmentation fault (core dumped)",
     {"slurm.task_exit": dict(how="Segmentation fault (core dumped)"), "process.segfault": {}}),
    ("node failure",
     "srun: error: Node failure on gpu-node-17",
     {"slurm.node_failure": dict(node="gpu-node-17")}),
    ("step completion timeout (only the generic io.timed_out fallback)",
     "srun: error: Timed out waiting for job step to complete",
     {"io.timed_out": {}}),
]

# the scheduler's record of how the job ended, as its tools print it (slurm.job_state, a job fact)
STATES = [
    ("sacct row, state cut to 10 columns", "4891784.0        python               ml-team        256 OUT_OF_ME+    0:125 ",
     {"slurm.job_state": dict(state="OUT_OF_ME+")}),
    ("sacct row, whole state", "7710452        llm-sft       h100   research        224  NODE_FAIL      0:0",
     {"slurm.job_state": dict(state="NODE_FAIL")}),
    # `sacct --format=JobID,State,ExitCode,Elapsed,NodeList`: columns after the exit code
    ("sacct row, columns after the exit code", "882193        NODE_FAIL      1:0   02:44:02      gpu-a[01-04] ",
     {"slurm.job_state": dict(state="NODE_FAIL", job="882193")}),
    ("scontrol show job", "   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)",
     {"slurm.job_state": dict(state="TIMEOUT")}),
    ("seff", "State: OUT_OF_MEMORY (exit code 0)", {"slurm.job_state": dict(state="OUT_OF_MEMORY")}),
    ("mail subject", "Subject: Slurm Job_id=8812004 Name=gpt-neox-20b Failed, Run time 13:02:11, NODE_FAIL",
     {"slurm.job_state": dict(state="NODE_FAIL")}),
]

NEAR_MISSES = [
    ("a timeout's name in a config dump", "timeouts: {NCCL_TIMEOUT: 1800, PREEMPTED_RETRIES: 3}", {}),
    ("a state word inside a message", "WARNING: request TIMEOUT after 3 retries, NODE_FAIL ignored", {}),
    ("a numbered log line that names a state", "4096 ranks: TIMEOUT 3:0 reached in allreduce", {}),
    # a sacct row whose last column has no digit (User): not an end-state row of ours, and refused at once (each value
    # is matched atomically; trying every digit of every datetime column took seconds a row)
    ("sacct row ending in a user name", "4911770    OUT_OF_ME+    0:125 " + "2024-11-05T01:02:03 " * 7 + "04:00:00 "
     "gpu-[001-004,010] alice", {}),
    ("optional follow-up reason line", "slurmstepd: error: *** REASON: node gpu-node-17 unresponsive ***", {}),
    ("memory limit hit is info, not a kill",
     "slurmstepd: error: StepId=123456.0 hit memory limit at least once during execution. This may or may not result in some failure.",
     {}),
    ("srun waiting for the step", "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", {}),
    ("srun terminating", "srun: forcing job termination", {}),
    ("srun terminating step", "srun: Terminating StepId=4891784.0", {}),
]


@pytest.mark.parametrize("line, expected", params(BANNERS))
def test_cancellation_banners(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(OOM))
def test_cgroup_oom(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(SRUN))
def test_srun_task_exit(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(STATES))
def test_job_end_states(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


# ------------------------------------------------------------------ srun's task → node statements (slurm/nodes.py)

def _scan(tmp_path, text: str):
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle
    (tmp_path / "slurm-4891784.out").write_text(text)
    with open_bundle(tmp_path) as b:
        return scan_bundle(b, workers=1)


def test_srun_task_exits_place_the_tasks_on_their_node(tmp_path):
    """The scan step slurm declares (SCAN_STEPS file_nodes): one host and task ids (ranges too) → those ranks ran
    there; a host list (`gpu-[1-2]`, `a,b`) names no single node and places nothing."""
    from trainlog_debugger.tools.sources.slurm.nodes import task_nodes

    res = _scan(tmp_path, "srun: error: frontier07210: tasks 8-10,12: Aborted (core dumped)\n"
                          "srun: error: gpu-[1-2]: tasks 0-7: Killed\n"
                          "srun: error: gpu-3,gpu-4: task 11: Killed\n"
                          "srun: error: frontier07211: task 13: Exited with exit code 1\n")
    (f,) = res.files
    assert [(line, r, ev.node) for line, r, ev in task_nodes(f)] == [
        (1, 8, "frontier07210"), (1, 9, "frontier07210"), (1, 10, "frontier07210"), (1, 12, "frontier07210"),
        (4, 13, "frontier07211")]
    assert {r: ev.node for r, ev in res.rank_nodes.items()} == {8: "frontier07210", 9: "frontier07210",
                                                                10: "frontier07210", 12: "frontier07210",
                                                                13: "frontier07211"}
    assert res.rank_nodes[13].line == 4 and res.rank_nodes[13].text.startswith("srun: error: frontier07211")


def test_the_first_statement_of_a_rank_wins_across_sources(tmp_path):
    """torchrun's failure report and srun's exit line both place rank 5: the one earlier in the file is kept."""
    res = _scan(tmp_path, "  host      : gpu-node-17\n  rank      : 5 (local_rank: 1)\n"
                          "srun: error: gpu-node-99: task 5: Killed\n")
    assert res.rank_nodes[5].node == "gpu-node-17"
    res = _scan(tmp_path, "srun: error: gpu-node-99: task 5: Killed\n"
                          "  host      : gpu-node-17\n  rank      : 5 (local_rank: 1)\n")
    assert res.rank_nodes[5].node == "gpu-node-99"
