"""JAX's distributed runtime (XLA's coordination service): which task a multi-process job lost.

Real lines (jaxlib 0.4-0.6, xla/tsl/distributed_runtime/coordination): the service and every surviving client name
the failed tasks by their path, one per line under the status that lists them, or inside a heartbeat timeout:

    F1105 14:31:55.011000   22000 client.h:77] Terminating process because the JAX distributed service detected
        fatal errors. This most likely indicates that another task died; see the other task logs for an error ...
    /job:jax_worker/replica:0/task:1
    UNAVAILABLE: Task /job:jax_worker/replica:0/task:7 heartbeat timeout. This indicates that the remote task has
        failed, got preempted, or crashed unexpectedly.

A task's number is its `jax.process_index()`, the job's rank: the one task the survivors name is the one whose own
error (often a line that names no rank: its host's OOM, its GPU) is the trigger (tools.diagnose). The connection
lines (`/job:jax_worker/replica:0/task:3 has connected to coordination service`) name every task and are not these.
"""

from __future__ import annotations

from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    P("jax.task_named_failed", 0, None, "context",
      r"/replica:\d+/task:\d", "/replica:",
      "/job:jax_worker/replica:0/task:1",
      "the coordination service names a task it lost (a line of its own under the status, or a heartbeat timeout)",
      fields=r"/job:[\w-]+/replica:\d+/task:(?P<task>\d{1,7})", ints=("task",),
      verify=r"(?:^|[\s:\]])/job:[\w-]+/replica:\d+/task:\d{1,7}(?:\s*$| heartbeat timeout)"),
]
