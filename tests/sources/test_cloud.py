"""tools/sources/cloud.py: Vertex AI's (and legacy AI Platform's) verdicts on a replica, as lines and inside a real
Cloud Logging export (FORMATS.md §8) run through the whole pipeline."""

from __future__ import annotations

import json

import pytest
from matching import check, params

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run
from trainlog_debugger.tools.sources.detect import sniff

LINES = [
    ("Vertex OOM", "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137.",
     {"cloud.vertex_oom": dict(replica="workerpool0-0", exit_code=137)}),
    # the termination reason is the container's Kubernetes reason: the k8s pattern reads it too (both say oom)
    ("Vertex: termination reason OOMKilled", "The replica workerpool1-2 exited with a non-zero status of 137. "
     "Termination reason: OOMKilled.", {"cloud.vertex_oom": dict(replica="workerpool1-2", exit_code=137),
                                        "k8s.oomkilled": {}}),
    ("legacy AI Platform OOM", "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)",
     {"cloud.vertex_oom": dict(replica="master 0", exit_code=9, signal_name="SIGKILL")}),
    ("exit 1: how it ended, no more", "The replica workerpool0-0 exited with a non-zero status of 1.",
     {"cloud.vertex_exit": dict(replica="workerpool0-0", exit_code=1)}),
    ("exit 137, reason Error", "The replica workerpool0-1 exited with a non-zero status of 137. Termination reason: "
     "Error.", {"cloud.vertex_exit": dict(exit_code=137, reason="Error")}),
    ("SIGSEGV", "The replica workerpool1-3 exited with a non-zero status of 139. Termination reason: Error.",
     {"cloud.vertex_segv": dict(exit_code=139)}),
    ("stockout", "Resources are insufficient in region: europe-west4. Try a different region or use a different "
     "accelerator.", {"cloud.vertex_stockout": dict(region="europe-west4")}),
    ("internal error", "Internal error occurred for the current attempt.", {"cloud.vertex_internal": {}}),
    # SageMaker's FailureReason, as the SDK raises it
    ("SageMaker OOM", "sagemaker.exceptions.UnexpectedStatusException: Error for Training job bert-ft-2025-06-11: "
     "Failed. Reason: ClientError: Please use an instance type with more memory, or reduce the size of job data "
     "processed on an instance.", {"cloud.sagemaker_oom": {}}),
    ("SageMaker capacity", "CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
     "different ML instance type.", {"cloud.sagemaker_capacity": {}}),
    ("SageMaker internal", "InternalServerError: We encountered an internal error.  Please try again.",
     {"cloud.sagemaker_internal": {}}),
]

NEAR_MISSES = [
    ("a kubecfg wrapper's own wording", "Process exited with a non-zero status of 1", {}),
    ("status 1390 is not a segfault", "The replica workerpool0-0 exited with a non-zero status of 1390.",
     {"cloud.vertex_exit": dict(exit_code=1390)}),
    ("Vertex provisioning", "Waiting for job to be provisioned.", {}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


def _entry(task: str, ts: str, text: str, severity: str = "ERROR", service: bool = False) -> dict:
    e = {"insertId": f"{abs(hash((task, ts))) % 10**12:x}", "logName": f"projects/ml-prod/logs/{task}",
         "resource": {"type": "ml_job", "labels": {"job_id": "1234567890123456789", "project_id": "ml-prod",
                                                   "task_name": task}},
         "severity": severity, "timestamp": ts, "receiveTimestamp": ts}
    if service:
        e["jsonPayload"] = {"message": text, "levelname": severity}
    else:
        e["textPayload"] = text
    return e


def _export(entries: list[dict], pretty: bool) -> str:
    return json.dumps(entries, indent=2) if pretty else "\n".join(json.dumps(e) for e in entries) + "\n"


@pytest.mark.parametrize("pretty", [True, False], ids=["gcloud-json-array", "jsonl"])
def test_vertex_export_with_an_oom_replica_is_oom_citing_the_service_line(tmp_path, pretty):
    entries = [_entry("workerpool0-1", f"2024-11-05T12:34:{s:02d}.123456789Z",
                      f"[rank{r}]:2024-11-05 12:34:{s:02d},000 INFO train: step {1200 + s} loss 1.93", "INFO")
               for s in range(5) for r in (4, 5)]
    entries.append(_entry("workerpool0-1", "2024-11-05T12:35:40.000000000Z", "The replica workerpool0-1 ran out of "
                          "memory and exited with a non-zero status of 137.", service=True))
    text = _export(entries[::-1], pretty)  # gcloud prints newest first
    (tmp_path / "vertex-logs.json").write_text(text)
    assert sniff("vertex-logs.json", text.encode()) == "cloud_logging"
    with open_bundle(tmp_path) as b:
        d = run(b).diagnosis
    assert d.category == "oom", d.headline
    ev = d.chain[0].evidence[0]
    assert "ran out of memory" in ev.text and ev.node == "workerpool0-1" and ev.time is not None


def test_vertex_exit_137_alone_is_infrastructure(tmp_path):
    (tmp_path / "error.txt").write_text("The replica workerpool0-0 exited with a non-zero status of 137. Termination "
                                        "reason: Error.\n")
    with open_bundle(tmp_path) as b:
        d = run(b).diagnosis
    assert d.category == "infrastructure", d.headline


def test_sagemaker_s_memory_verdict_names_the_killer_of_a_sigkilled_worker(tmp_path):
    """A worker ended by SIGKILL with nothing of its own, and the service's FailureReason after it: SageMaker's
    verdict is the memory evidence the kill needs (TAXONOMY: SIGKILL with memory evidence is oom)."""
    (tmp_path / "notebook_output.txt").write_text("\n".join([
        "2024-08-14 02:30:00,000 sagemaker-training-toolkit INFO     Invoking user script",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-08-14_02:37:09",
        "  host      : algo-1",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -9 (pid: 263)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 263",
        "============================================================",
        "2024-08-14 02:37:42 Failed - Training job failed",
        "UnexpectedStatusException: Error for Training job llm-ft-2024-08-14-02-10-05-118: Failed. Reason: "
        "ClientError: Please use an instance type with more memory, or reduce the size of job data processed on an "
        "instance."]) + "\n")
    with open_bundle(tmp_path) as b:
        d = run(b).diagnosis
    assert d.category == "oom" and "SageMaker" in d.headline, d.headline
