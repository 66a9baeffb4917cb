"""tools/sources/job.py: job facts printed at start-up (world size, Lightning membership).

Each row: a line exactly as printed, the pattern ids the scanner records for it, and the fields each id extracts.
"""

from __future__ import annotations

import pytest
from matching import check, matched, params

WS = "job.world_size"

FACTS = [
    ("Megatron arguments",
     "using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2",
     {WS: dict(world_size=16)}),
    ("env echo", "WORLD_SIZE=16", {WS: dict(world_size=16)}),
    ("env echo with a colon", "Launching with WORLD_SIZE: 8", {WS: dict(world_size=8)}),
    ("Python assignment", "world_size = 16", {WS: dict(world_size=16)}),
    ("DeepSpeed launcher, pdsh prefix",
     "worker-1: [2024-05-01 10:00:00,000] [INFO] [launch.py:151:main] dist_world_size=16",
     {WS: dict(world_size=16)}),
    ("Lightning", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
     {"job.lightning_member": dict(global_rank=0, world_size=16)}),
    ("Lightning with rank prefix", "[rank: 5] Initializing distributed: GLOBAL_RANK: 5, MEMBER: 6/8",
     {"job.lightning_member": dict(global_rank=5, world_size=8)}),
]

NEAR_MISSES = [
    ("an explanation, no number", "set WORLD_SIZE to the number of processes", {}),
    ("world size spelled out in prose", "the world size is unknown until rendezvous", {}),
    # a script's own banner in other words (a KiCad jobset run) is no JobSet condition
    ("another tool's jobset", "Jobset completed successfully.", {}),
    # Ray Tune's report of one iteration (tune/experimental/output.py) is progress, not the end of the run
    ("Ray Train's per-iteration report",
     "Training finished iteration 3 at 2025-08-20 08:40:43. Total running time: 10min 34s", {}),
    # its failing twin, and a job's step that a program logs as succeeded in prose
    ("the Ray Jobs CLI's failure banner", "Job 'raysubmit_Xy7Qe2pZk1sLm9Nc' failed", {}),
    ("a sub-job in prose", "INFO: Batch job 'eval-42' succeeded with 3 warnings", {}),
]

ENDS = [
    ("Ray Train's end line", "Training completed after 10 iterations at 2024-06-19 08:29:40. Total running time: 9min 22s",
     {"job.finished": {}}),
    ("the Ray Jobs CLI's success banner", "Job 'raysubmit_Xy7Qe2pZk1sLm9Nc' succeeded", {"job.finished": {}}),
    # the Kubeflow training operator's event (kubectl describe pytorchjob / get events), both of its wordings
    ("training operator, job name", "  Normal  PyTorchJobSucceeded  2m  pytorchjob-controller  PyTorchJob t5-pt is "
     "successfully completed.", {"job.finished": {}}),
    ("training operator, namespace/name", "MPIJob default/bert-mpi successfully completed.", {"job.finished": {}}),
    # JobSet's condition once every child Job completed (kubectl describe jobset / get jobset -o wide)
    ("JobSet completed", "Completed=True AllJobsCompleted: jobset completed successfully", {"job.finished": {}}),
    ("verl's last step, under Ray's actor prefix", "(TaskRunner pid=91733) (\"Final validation metrics: {'val-core/"
     "openai/gsm8k/reward/mean@1': 0.781}\")", {"job.finished": {}}),
]


@pytest.mark.parametrize("line, expected", params(ENDS))
def test_end_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(FACTS))
def test_job_facts(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line,ids", [
    ("I1105 14:00:00.000000 2585 torch/distributed/elastic/agent/server/api.py:862] [default] worker group successfully "
     "finished. Waiting 300 seconds for other agents to finish.", {"job.finished"}),
    ("`Trainer.fit` stopped: `max_steps=1000` reached.", {"job.finished"}),
    ("[after training is done] datetime: 2024-11-05 14:00:00", {"job.training_done"}),
    (" successfully loaded checkpoint from /checkpoints/gpt-8b [ t 0/1, p 0/1 ] at iteration 3000", {"job.resumed"}),
    ("Restoring states from the checkpoint path at /ckpt/last.ckpt", {"job.resumed"}),
    ("training step 10 finished in 0.5s", set()),
])
def test_job_end_and_resume(line, ids):
    assert set(matched(line)) == ids


@pytest.mark.parametrize("line,ended", [
    # the scheduler's record of the job itself: its own row, not a step's, State COMPLETED and ExitCode 0:0
    ("5610044        gpt1b-pr  COMPLETED      0:0", True),
    ("1234_7       train    gpu    acct    64  COMPLETED      0:0", True),
    ("5610044.0        python  COMPLETED      0:0", False),
    ("5610044        gpt1b-pr     FAILED      1:0", False),
    ("5610044        gpt1b-pr  COMPLETED      0:9", False),
    # kubectl describe pod: every container exited 0
    ("Status:           Succeeded", True),
    ("  Pods Statuses:  0 Active / 1 Succeeded", False),
])
def test_the_schedulers_record_of_a_normal_end(line, ended):
    assert ("job.finished" in set(matched(line))) is ended
