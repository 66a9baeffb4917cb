"""Managed training services' own verdicts on a replica: Vertex AI custom jobs (and the legacy AI Platform
Training), as the job's error and Cloud Logging print them; SageMaker training jobs' FailureReason (out of host
memory, no capacity, an internal error), as the SDK's UnexpectedStatusException and the console print it.

Format note. Vertex AI's documented error messages ("Understand the custom training service", docs.cloud.google.com
…/training/understanding-training-service, table "Handle common errors"):
    The replica REPLICA_NAME exited with a non-zero status of EXIT_CODE. Termination reason: REASON.
    The replica REPLICA_NAME ran out of memory and exited with a non-zero status of EXIT_CODE.
    Resources are insufficient in region: REGION_NAME. Try a different region or use a different accelerator.
    Internal error occurred for the current attempt
REPLICA_NAME is the task name, `workerpool{pool}-{replica}` (FORMATS.md §8; real: "The replica workerpool0-0
exited with a non-zero status of 1."); legacy AI Platform Training names it `master 0` / `worker 3` and spells
"The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)" (real, a Google blog's
log). REASON is the container's Kubernetes termination reason (OOMKilled, Error). Vertex retries exit codes that
may be transient (SIGABRT 6/134, SIGSEGV 11/139).

How these lines reach the scanner: a `gcloud logging read --format=json` export is sniffed as `cloud_logging`
(tools/sources/detect.py) and scanned as text, one physical line at a time (tools/scan/filepass.py): the
patterns below match inside a JSONL entry's `"textPayload": "..."` / `"message": "..."` string or on the
`"textPayload": ...` line of a pretty-printed array alike (they are not anchored and need no quotes), and this
source's hook on the kind (entry_context, KIND_HOOKS) gives each kept hit of such a file the node (the entry's
`task_name` label) and the time of the enclosing entry, for any pattern's hit. The same text in
`gcloud ai custom-jobs describe` output (`error: message: ...`) or a console paste matches too.

Categories (TAXONOMY.md): "ran out of memory" / "Termination reason: OOMKilled" → `oom` (tools/rules/oom.py
`container_oom`); status 137 or 9 without memory evidence → `infrastructure` (tools/rules/infra.py
`container_sigkill`); 139/11 (SIGSEGV) → `software`; any other status (1) is only how the replica ended: the
trainer's traceback says why. A stockout means the job never ran (`infrastructure`, status cancelled).
"""

from __future__ import annotations

import json
import re

from trainlog_debugger.tools.lines.timestamps import parse_stamp
from trainlog_debugger.tools.sources.declare import Detector, Head, PathRule, json_head
from trainlog_debugger.tools.sources.pattern import HitContext, Hook, P

_REPLICA = r"The replica (?P<replica>[\w-]+(?: \d{1,6})?) "
_STATUS = r"non-zero status of (?P<exit_code>\d{1,10})(?:\((?P<signal_name>SIG[A-Z]+)\))?"

PATTERNS = [
    P("cloud.vertex_oom", 1, "oom", "root_candidate",
      r"ran out(?: of |-of-)memory and exited with a non-zero status|exited with a non-zero status of [0-9]+\. "
      r"Termination reason: OOMKilled",
      ("memory and exited with a non-zero status", "Termination reason: OOMKilled"),
      "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137.",
      "the managed training service says a replica ran out of memory",
      fields=_REPLICA + r"(?:ran out(?: of |-of-)memory and )?exited with a " + _STATUS, ints=("exit_code",)),
    P("cloud.vertex_exit", 1, None, "cascade",
      r"The replica \S+(?: [0-9]+)? exited with a non-zero status of [0-9]", "exited with a non-zero status of",
      "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error.",
      "the managed training service reports how a replica exited",
      fields=_REPLICA + r"exited with a " + _STATUS + r"(?:\.? Termination reason: (?P<reason>\w+))?",
      ints=("exit_code",), fallback=True),
    P("cloud.vertex_segv", 1, "software", "root_candidate",
      r"exited with a non-zero status of (?:139|11)\b", "exited with a non-zero status of",
      "The replica workerpool1-3 exited with a non-zero status of 139. Termination reason: Error.",
      "a replica died of a segmentation fault (status 139/11 = SIGSEGV)",
      fields=_REPLICA + r"exited with a " + _STATUS, ints=("exit_code",), weight=0.55,
      advice="a native extension or library crashed: enable `python -X faulthandler` in the container to get the "
             "crashing frame; check for mismatched CUDA/torch/extension builds"),
    P("cloud.vertex_stockout", 1, "infrastructure", "root_candidate",
      r"Resources are insufficient in region", "Resources are insufficient in region",
      "Resources are insufficient in region: us-central1. Try a different region or use a different accelerator.",
      "the cloud had no capacity for the requested machines (stockout): the job never ran",
      fields=r"insufficient in region: (?P<region>[\w-]+)", weight=0.8, status="cancelled",
      advice="retry later, in another region, or with another accelerator type; reservations or Dynamic Workload "
             "Scheduler avoid stockouts"),
    # The cloud took the machine away (TAXONOMY: preemption is the platform's). AWS Node Termination Handler's event
    # descriptions (aws/aws-node-termination-handler 62a8761: pkg/monitor/spotitn/spot-itn-monitor.go:93,
    # sqsevent/spot-itn-event.go:73, sqsevent/asg-lifecycle-event.go:98), which it logs and posts as the node's
    # events; Azure's Scheduled Events document (learn.microsoft.com, virtual-machines/linux/scheduled-events:
    # `"EventType": "Preempt"`, a Spot VM's eviction); Compute Engine's system event operation for a preempted Spot
    # or preemptible VM (`compute.instances.preempted`, cloud.google.com compute/docs preemptible history)
    P("cloud.instance_preempted", 1, "infrastructure", "root_candidate",
      r"Spot ITN received\. Instance will be interrupted at|Spot Interruption notice for instance \S+ was sent at|"
      r"ASG Lifecycle Termination event received\. Instance will be interrupted at|\"EventType\" ?: ?\"Preempt\"|"
      r"compute\.instances\.preempted",
      ("Spot ITN received", "Spot Interruption notice for instance", "ASG Lifecycle Termination event received",
       "Preempt\"", "compute.instances.preempted"),
      "2025/08/02 17:40:03 INF Adding new event to the event store event={\"AutoScalingGroupName\":\"\",\"Description\":"
      "\"Spot ITN received. Instance will be interrupted at 2025-08-02T17:42:03Z \\n\",\"Kind\":\"SPOT_ITN\"}",
      "the cloud reclaimed the machine (a Spot/preemptible interruption or an Auto Scaling termination): the ranks on "
      "it went away", weight=0.85, status="cancelled",
      advice="resume from the last checkpoint on other capacity; checkpoint on the interruption notice (SIGTERM), or "
             "run long jobs on on-demand or reserved machines"),
    # an EC2 scheduled event for the instance (Node Termination Handler: pkg/monitor/scheduledevent/
    # scheduled-event-monitor.go:106, `<code> will occur between <from> and <to> because <description>`; the codes
    # are EC2's scheduled event types): NTH drains the node before the window, so its pods are stopped
    P("cloud.instance_scheduled_event", 1, "infrastructure", "root_candidate",
      r"(?:instance-stop|instance-reboot|instance-retirement|system-reboot|system-maintenance) will occur between ",
      " will occur between ",
      "2025/10/14 09:00:13 INF Node successfully cordoned and drained node_name=ip-10-0-3-88.ec2.internal "
      "reason=\"instance-stop will occur between 2025-10-16T09:00:00Z and 2025-10-16T11:00:00Z because The instance is "
      "running on degraded hardware\\n\"",
      "the cloud scheduled the instance for a stop, reboot or retirement (maintenance or degraded hardware) and its "
      "node was drained", weight=0.7, status="cancelled",
      advice="move the job off that node before the window (or onto a fresh instance after it) and resume from the "
             "last checkpoint"),
    # SageMaker's training job FailureReason (the DescribeTrainingJob field; the SDK raises it as `UnexpectedStatusException:
    # Error for Training job <name>: Failed. Reason: <FailureReason>`, the console and CloudWatch show it): the
    # service's own wordings for a job that ran out of host memory on its instance, found no capacity, or failed
    # inside the service (the strings AWS's own retry logic matches, e.g. SageMaker components' failure handling)
    P("cloud.sagemaker_oom", 1, "oom", "root_candidate",
      r"Please use an instance type with more memory, or reduce the size of job data processed on an instance|"
      r"Out of Memory\. Please use a larger instance",
      ("Please use an instance type with more memory", "Out of Memory. Please use a larger instance"),
      "ClientError: Please use an instance type with more memory, or reduce the size of job data processed on an "
      "instance.",
      "the managed training service (SageMaker) says the job ran out of host memory on its instance", weight=0.85,
      advice="use an instance type with more host memory, or cut the job's host memory (DataLoader workers and "
             "prefetch, a dataset held in memory, every process loading a full checkpoint on the CPU)"),
    P("cloud.sagemaker_capacity", 1, "infrastructure", "root_candidate",
      r"Unable to provision requested ML compute capacity", "Unable to provision requested ML compute capacity",
      "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance "
      "type.",
      "the cloud had no capacity for the requested instances (SageMaker): the job never ran", weight=0.8,
      status="cancelled",
      advice="retry later, in another region or availability zone, or with another instance type; a capacity "
             "reservation or training plan avoids it"),
    P("cloud.sagemaker_internal", 1, "infrastructure", "root_candidate",
      r"InternalServerError: We encountered an internal error\. +Please try again",
      "We encountered an internal error.",
      "InternalServerError: We encountered an internal error.  Please try again.",
      "the managed training service failed internally (SageMaker)", weight=0.5,
      advice="resubmit the job; if it repeats, open a support case with the training job's ARN"),
    P("cloud.vertex_internal", 1, "infrastructure", "root_candidate",
      r"Internal error occurred for the current attempt", "Internal error occurred for the current attempt",
      "Internal error occurred for the current attempt.",
      "the managed training service failed internally (its own retries also failed)", weight=0.5,
      advice="resubmit the job; if it repeats, open a support case with the job id"),
]


ENTRY_BACK = 1 << 20  # how far back the opening of a pretty-printed entry is looked for


def entry_context(ctx: HitContext) -> None:
    """The node and time of a kept hit in a Cloud Logging export, from the entry that holds its line, where the
    line itself states none: the entry's `task_name` label (resource.labels, else labels) and its `timestamp`.
    One entry per line (JSONL), or a pretty-printed array whose entries open with `  {` and close with `  }`:

        {"textPayload": "The replica workerpool0-0 exited with a non-zero status of 1.", "resource": {"type":
         "ml_job", "labels": {"task_name": "workerpool0-0"}}, "timestamp": "2024-05-01T10:00:03.123Z"}
    """
    buf, start, end = ctx.buf, ctx.start, ctx.end
    line = buf[start:end].strip().rstrip(b",")
    obj = None
    if line.startswith(b"{") and line.endswith(b"}"):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
    if obj is None:
        s = buf.rfind(b"\n  {", max(0, start - ENTRY_BACK), start + 1)
        e = buf.find(b"\n  }", end)
        if s != -1 and e != -1:
            try:
                obj = json.loads(buf[s + 1: e + 4])
            except ValueError:
                obj = None
    if not isinstance(obj, dict):
        return
    task = _str_at(obj, "resource", "labels", "task_name") or _str_at(obj, "labels", "task_name")
    if task and not ctx.node:
        ctx.node = task[:200]
    ts = obj.get("timestamp")
    if ctx.time is None and isinstance(ts, str) and len(ts) < 64:
        ctx.time = parse_stamp(ts)


def _str_at(obj: object, *keys: str) -> str | None:
    """obj[k1][k2]... when every step is a dict and the value a string; None otherwise. A Cloud Logging export
    edited or produced by another tool may carry numbers, lists or null where the LogEntry schema has strings
    (resource: null, task_name: 5): what has the expected type is read, the rest is not."""
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj if isinstance(obj, str) else None


KIND_HOOKS = {"cloud_logging": Hook(entry_context)}


# ---- detection: an export is a JSON document of LogEntry objects, whatever the file is called
CLOUD_LOGGING = "cloud_logging"
KINDS = {CLOUD_LOGGING: "worker"}
_PAYLOAD = re.compile(r'"(?:textPayload|jsonPayload|protoPayload)"\s*:')
_META = re.compile(r'"(?:resource|logName|timestamp|insertId|receiveTimestamp)"\s*:')


def _export(h: Head) -> str | None:
    if json_head(h.text) and _PAYLOAD.search(h.text) and len(set(_META.findall(h.text))) >= 2:
        return CLOUD_LOGGING
    return None


DETECT = (Detector("content", 20, _export, ("export.json", b'[{"textPayload": "NCCL WARN", "resource": {"type": '
                                               b'"ml_job"}, "timestamp": "2024-11-05T12:00:01Z", "logName": "x"}]')),)

# ---- path hints: a Vertex AI custom job names each replica `workerpool<pool>-<index>` in its log paths
_VERTEX = re.compile(r"(?:^|[^\w])(workerpool\d+-\d+)(?=$|[^\w\-])")
PATH_HINTS = (PathRule("part", 50, lambda part: ("vertex_task", {"node": m.group(1)}) if (m := _VERTEX.search(part))
                       else None, "logs/workerpool0-1/stderr.txt"),)
