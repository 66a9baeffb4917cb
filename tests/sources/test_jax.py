"""tools/sources/jax.py: the tasks JAX's coordination service names as lost, and the culprit they give a crash that
names no rank. Lines as xla/tsl's coordination service and client print them (jaxlib 0.4-0.6)."""

from __future__ import annotations

import pytest
from matching import check, params

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate

LOST = "jax.task_named_failed"

LINES = [
    ("a task on a line of its own, under the status that lists the lost tasks",
     "/job:jax_worker/replica:0/task:1", {LOST: dict(task=1)}),
    ("the same under srun's label", " 3: /job:jax_worker/replica:0/task:4", {LOST: dict(task=4)}),
    ("a heartbeat timeout names the task",
     "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Task /job:jax_worker/replica:0/task:7 heartbeat timeout. This "
     "indicates that the remote task has failed, got preempted, or crashed unexpectedly.", {LOST: dict(task=7)}),
]

NEAR_MISSES = [
    ("every task connects at start-up: no task is lost",
     "I0105 10:00:00.123456  48213 coordination_service.cc:580] /job:jax_worker/replica:0/task:3 has connected to "
     "coordination service. Incarnation: 4711", {}),
    ("the first task at a barrier is the one that came, not one lost (the line's `timed out` is read as such)",
     "The first task at the barrier: /job:jax_worker/replica:0/task:0. Some timed out task names:",
     {"io.timed_out": {}}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lost_tasks(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


_FATAL = ("F1105 14:31:55.011000   {pid} client.h:77] Terminating process because the JAX distributed service detected "
          "fatal errors. This most likely indicates that another task died; see the other task logs for an error.")


def _bundle(tmp_path, trigger: list[str], lost: int = 1):
    for t in range(4):
        lines = [f"completed step: 1200, seconds: 1.412, loss: 3.20{t}"]
        if t == lost:
            lines += trigger
        else:
            lines += [_FATAL.format(pid=22000 + t), f"/job:jax_worker/replica:0/task:{lost}",
                      "The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. "
                      "preemption, eviction) to debug further."]
        (tmp_path / f"host{t}.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


def test_the_one_task_the_survivors_name_is_the_culprit_of_a_crash_that_names_no_rank(tmp_path):
    """Task 1's data-loader worker was killed by the OOM killer (its own line names no rank); the three survivors
    name task 1 as lost. Task 1 is the culprit."""
    d = _bundle(tmp_path, ["RuntimeError: Worker process was terminated unexpectedly with exit code -9. Search the "
                           "logs above for the source of the crash.",
                           "[Tue Nov  5 14:31:50 2024] Out of memory: Killed process 22011 (python) total-vm:9812344kB, "
                           "anon-rss:8123412kB, file-rss:0kB, shmem-rss:0kB"])
    assert d.category == "oom" and d.culprit_ranks == [1], d.headline


def test_a_survivors_own_report_does_not_take_the_lost_tasks_rank(tmp_path):
    """The only failure line is in a file that itself names the lost task: that file is a survivor's, and its line
    is no evidence of which rank failed."""
    (tmp_path / "host0.log").write_text("\n".join([
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        _FATAL.format(pid=22000), "/job:jax_worker/replica:0/task:2"]) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks != [2], d.headline
