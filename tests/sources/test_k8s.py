"""tools/sources/k8s.py: `kubectl describe pod`, `kubectl get events` and training-operator lines (real formats, see
the module's docstring), near misses that must not match, and whole bundles through the pipeline: an OOMKilled
describe paste next to the killed worker's log, a pod that was never scheduled, an eviction, a bare exit 137."""

from __future__ import annotations

import pytest
from matching import check, params

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import run

LINES = [
    ("describe: OOMKilled last state", "      Reason:       OOMKilled", {"k8s.oomkilled": dict(reason="OOMKilled")}),
    ("get pod -o yaml", "        reason: OOMKilled", {"k8s.oomkilled": {}}),
    ("get pod -o json (compact)", '"lastState":{"terminated":{"reason":"OOMKilled","exitCode":137}}',
     {"k8s.oomkilled": {}}),
    ("kubectl get pods STATUS column", "trainer-worker-3   0/1     OOMKilled   3          3m45s", {"k8s.oomkilled": {}}),
    ("describe: exit 137", "      Exit Code:    137", {"k8s.exit_code": dict(exit_code=137)}),
    ("yaml exitCode", "        exitCode: 137", {"k8s.exit_code": dict(exit_code=137)}),
    ("describe: exit 139 is the segfault pattern only", "      Exit Code:    139", {"k8s.exit_segv": dict(exit_code=139)}),
    ("describe: signal", "      Signal:       9", {"k8s.signal": dict(signal=9)}),
    ("restart count", "    Restart Count:  3", {"k8s.restart_count": dict(restart_count=3)}),
    ("runtime could not start the container", "      Reason:       ContainerCannotRun", {"k8s.container_cannot_run": {}}),
    ("crash loop, old event wording", "  Warning  BackOff    33s (x70 over 15m)  kubelet, minikube  Back-off restarting "
     "failed container", {"k8s.crashloop": {}}),
    ("describe header: node", "Node:         gpu-node-17/10.0.3.17",
     {"k8s.pod_node": dict(node="gpu-node-17", node_ip="10.0.3.17")}),
    ("scheduled event", "  Normal   Scheduled  2m  default-scheduler  Successfully assigned ml/trainer-worker-0 to "
     "gke-a3-pool-7f3c2b1a-x9kq", {"k8s.scheduled": dict(pod="ml/trainer-worker-0", node="gke-a3-pool-7f3c2b1a-x9kq")}),
    ("eviction reason", "Reason:       Evicted", {"k8s.evicted": {}}),
    ("eviction for memory, pre-1.26 wording", "Message:      The node was low on resource: memory. Container trainer "
     "was using 121Gi, which exceeds its request of 64Gi. ",
     {"k8s.evicted_memory": dict(resource="memory", container="trainer", usage="121Gi", request="64Gi")}),
    ("eviction for ephemeral storage (Azure's real message)", "  Message:        The node was low on resource: "
     "ephemeral-storage. Container controller was using 16372Ki, which exceeds its request of 0.  ",
     {"k8s.evicted_storage": dict(resource="ephemeral-storage", usage="16372Ki", request="0")}),
    ("emptyDir over its limit", "  Warning  Evicted  1m  kubelet  Usage of EmptyDir volume \"dshm\" exceeds the limit "
     "\"16Gi\". ", {"k8s.evicted_storage": {}}),
    ("node condition", "Message:      The node had condition: [DiskPressure]. ",
     {"k8s.evicted_other": dict(resource="DiskPressure")}),
    ("FailedScheduling, one type of shortage", "  Warning  FailedScheduling  3m  default-scheduler  0/3 nodes are "
     "available: 3 Insufficient nvidia.com/gpu.",
     {"k8s.failed_scheduling": dict(available=0, nodes=3, why="3 Insufficient nvidia.com/gpu")}),
    ("FailedScheduling, pre-1.11 wording", "  Warning  FailedScheduling  1m (x8 over 3m)  default-scheduler  No nodes "
     "are available that match all of the following predicates:: Insufficient nvidia.com/gpu (3).",
     {"k8s.failed_scheduling": dict(why="Insufficient nvidia.com/gpu (3)")}),
    ("SystemOOM as a describe-node event row", "  Warning  SystemOOM  6m57s  kubelet  System OOM encountered, victim "
     "process: go-oom-test, pid: 3419", {"k8s.system_oom": dict(proc="go-oom-test", pid=3419)}),
    ("NodeNotReady on the pod (node-controller)", "  Warning  NodeNotReady  3m  node-controller  Node is not ready",
     {"k8s.node_not_ready": {}}),
    ("NodeNotReady, old get-events columns", "54m        54m         1         127.0.0.1   Node                  Normal "
     "   NodeNotReady            {controllermanager }   Node 127.0.0.1 status is now: NodeNotReady",
     {"k8s.node_not_ready": dict(node="127.0.0.1")}),
    ("liveness probe kill", "  Normal   Killing    4m    kubelet  Container trainer failed liveness probe, will be "
     "restarted", {"k8s.liveness_kill": dict(container="trainer")}),
    ("mount timed out (the generic 'timed out' fallback is kept beside it)", "  Warning  FailedMount  3m (x7 over 15m)  "
     "kubelet  Unable to attach or mount volumes: unmounted volumes=[checkpoints], unattached volumes=[checkpoints "
     "dshm]: timed out waiting for the condition", {"k8s.failed_mount": dict(volumes="checkpoints"), "io.timed_out": {}}),
    ("missing secret", "  Warning  FailedMount  2m (x9 over 20m)  kubelet  MountVolume.SetUp failed for volume "
     "\"hf-token\" : secret \"hf-token\" not found", {"k8s.failed_mount_config": dict(kind="secret", name="hf-token")}),
    ("kubelet active deadline", "Message:      Pod was active on the node longer than the specified deadline",
     {"k8s.deadline_exceeded": {}}),
    ("JobSet failure condition", '{"type":"Failed","status":"True","reason":"FailedJobs","message":"jobset failed due '
     'to one or more job failures"}', {"k8s.operator_failed": dict(why="one or more job failures")}),
    ("MPIJob restarting", "  Warning  MPIJobRestarting  1m  mpi-job-controller  MPIJob ml/bert is restarting because 1 "
     "Launcher replica(s) failed.", {"k8s.operator_failed": dict(kind="MPIJob", state="restarting", failed=1)}),
]

NEAR_MISSES = [
    ("a completed container's exit code", "      Exit Code:    0", {"k8s.exit_code": dict(exit_code=0)}),
    ("the container is running", "    State:          Running", {}),
    ("a healthy node", "  Normal   NodeReady  2m  kubelet  Node gpu-node-17 status is now: NodeReady", {}),
    ("a pending pod has no node yet", "Node:         <none>", {}),
    ("the trainer's own log about memory", "INFO train: step 11 loss 2.0454 rss_mb 317 memory ok", {}),
    ("a node with enough memory", "  Normal   NodeHasSufficientMemory  50m  kubelet  Node gpu-node-17 status is now: "
     "NodeHasSufficientMemory", {}),
    ("exit 1390 is not 139", "      Exit Code:    1390", {"k8s.exit_code": dict(exit_code=1390)}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


# ------------------------------------------------------------------------------------------ whole bundles

DESCRIBE_OOM = """\
Name:             llama-pretrain-worker-1
Namespace:        ml
Priority:         0
Service Account:  default
Node:             gpu-node-17/10.0.3.17
Start Time:       Tue, 05 Nov 2024 11:58:01 +0000
Labels:           training.kubeflow.org/job-name=llama-pretrain
                  training.kubeflow.org/replica-index=1
                  training.kubeflow.org/replica-type=worker
Status:           Failed
IP:               10.12.4.9
Containers:
  pytorch:
    Container ID:  containerd://5fb8adf9ee62afc6d3f6f3d9590041818750b392dff015d7091eaaf99cf1c945
    Image:         nvcr.io/nvidia/pytorch:24.10-py3
    Port:          23456/TCP
    Command:
      torchrun
      --nproc-per-node=4
      train.py
    State:          Terminated
      Reason:       OOMKilled
      Exit Code:    1
      Started:      Tue, 05 Nov 2024 11:58:40 +0000
      Finished:     Tue, 05 Nov 2024 12:34:57 +0000
    Ready:          False
    Restart Count:  0
    Limits:
      memory:          64Gi
      nvidia.com/gpu:  4
    Requests:
      memory:          64Gi
      nvidia.com/gpu:  4
Conditions:
  Type              Status
  Initialized       True
  Ready             False
  ContainersReady   False
  PodScheduled      True
Events:
  Type    Reason     Age   From               Message
  ----    ------     ----  ----               -------
  Normal  Scheduled  37m   default-scheduler  Successfully assigned ml/llama-pretrain-worker-1 to gpu-node-17
  Normal  Pulled     37m   kubelet            Container image "nvcr.io/nvidia/pytorch:24.10-py3" already present on machine
  Normal  Created    37m   kubelet            Created container pytorch
  Normal  Started    37m   kubelet            Started container pytorch
"""


def _worker_log(killed_rank: int = 5, world: int = 8) -> str:
    """The killed pod's torchrun console (torch 2.5 format): steps, then the agent's report of a SIGKILLed worker."""
    steps = [f"[default{r % 4}]:[rank{r}]:2024-11-05 12:34:{50 + s:02d},000 INFO train: step {1200 + s} loss 1.93"
             for s in range(5) for r in range(4, 8)]
    return "\n".join(steps + [
        "W1105 12:34:57.038000 140213 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 30739 "
        "closing signal SIGTERM",
        "E1105 12:34:57.237000 140213 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        f"local_rank: {killed_rank % 4} (pid: 30743) of binary: /usr/bin/python",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-11-05_12:34:57",
        "  host      : llama-pretrain-worker-1",
        f"  rank      : {killed_rank} (local_rank: {killed_rank % 4})",
        "  exitcode  : -9 (pid: 30743)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 30743",
        "============================================================",
    ]) + "\n"


def _diagnose(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with open_bundle(tmp_path) as b:
        return run(b).diagnosis


def test_oomkilled_pod_next_to_the_killed_worker_is_oom_citing_the_describe_line(tmp_path):
    d = _diagnose(tmp_path, {"describe-worker-1.txt": DESCRIBE_OOM, "worker-1.log": _worker_log()})
    assert d.category == "oom", d.headline
    first = d.chain[0].evidence[0]
    assert first.file == "describe-worker-1.txt" and first.text.strip() == "Reason:       OOMKilled"
    assert d.culprit_ranks == [5] and d.culprit_nodes == ["gpu-node-17"], (d.culprit_ranks, d.culprit_nodes)
    assert any("SIGKILL" in e.text for f in d.chain for e in f.evidence)  # the worker's side of the same story
    assert d.verified


def test_the_killed_worker_alone_stays_infrastructure(tmp_path):
    """The control: without the describe paste the same worker log is a kill from outside (TAXONOMY edge case),
    so the describe paste is what makes it oom."""
    d = _diagnose(tmp_path, {"worker-1.log": _worker_log()})
    assert d.category == "infrastructure", d.headline


def test_failed_scheduling_only_is_infrastructure_and_never_completed(tmp_path):
    events = "\n".join([
        "LAST SEEN   TYPE      REASON             OBJECT                        MESSAGE",
        "12m         Normal    SuccessfulCreate   pytorchjob/llama-pretrain     Created pod: llama-pretrain-worker-0",
        "2m          Warning   FailedScheduling   pod/llama-pretrain-worker-0   0/64 nodes are available: 8 "
        "Insufficient nvidia.com/gpu, 56 node(s) didn't match Pod's node affinity/selector. preemption: 0/64 nodes are "
        "available: 8 No preemption victims found for incoming pod, 56 Preemption is not helpful for scheduling.",
    ]) + "\n"
    d = _diagnose(tmp_path, {"events.txt": events})
    assert d.category == "infrastructure" and d.status == Status.cancelled, d.headline
    assert d.status != Status.completed and "Insufficient nvidia.com/gpu" in d.headline
    assert "FailedScheduling" in d.chain[0].evidence[0].text


def test_failed_scheduling_then_scheduled_is_not_the_answer(tmp_path):
    """The autoscaler added a node and the pod ran: the FailedScheduling lines are history, not the cause."""
    describe = DESCRIBE_OOM.replace(
        "  Normal  Scheduled",
        "  Warning  FailedScheduling  38m  default-scheduler  0/63 nodes are available: 63 Insufficient nvidia.com/gpu.\n"
        "  Normal  Scheduled")
    d = _diagnose(tmp_path, {"describe.txt": describe})
    assert d.category == "oom" and not d.headline.startswith("cancelled"), d.headline


def test_memory_eviction_is_oom_and_disk_eviction_is_infrastructure(tmp_path):
    evicted = """\
Name:             llama-pretrain-worker-2
Namespace:        ml
Node:             gpu-node-09/10.0.3.9
Status:           Failed
Reason:           Evicted
Message:          The node was low on resource: {res}. Threshold quantity: 100Mi, available: 51200Ki. Container pytorch was using 121Gi, request is 64Gi, has larger consumption of {res}. 
Events:
  Type     Reason   Age   From     Message
  ----     ------   ----  ----     -------
  Warning  Evicted  4m    kubelet  The node was low on resource: {res}. Threshold quantity: 100Mi, available: 51200Ki. Container pytorch was using 121Gi, request is 64Gi, has larger consumption of {res}. 
  Normal   Killing  4m    kubelet  Stopping container pytorch
"""
    (tmp_path / "mem").mkdir()
    (tmp_path / "disk").mkdir()
    d = _diagnose(tmp_path / "mem", {"describe.txt": evicted.format(res="memory")})
    assert d.category == "oom" and d.culprit_nodes == ["gpu-node-09"], (d.headline, d.culprit_nodes)
    d = _diagnose(tmp_path / "disk", {"describe.txt": evicted.format(res="ephemeral-storage")})
    assert d.category == "infrastructure" and "ephemeral" in d.chain[0].evidence[0].text, d.headline


def test_exit_137_without_memory_evidence_is_infrastructure_and_with_it_oom(tmp_path):
    bare = DESCRIBE_OOM.replace("Reason:       OOMKilled", "Reason:       Error").replace(
        "Exit Code:    1\n", "Exit Code:    137\n")
    (tmp_path / "bare").mkdir()
    (tmp_path / "mem").mkdir()
    d = _diagnose(tmp_path / "bare", {"describe.txt": bare})
    assert d.category == "infrastructure" and "137" in d.chain[0].evidence[0].text, d.headline
    assert d.culprit_nodes == ["gpu-node-17"]
    node_events = ("  Warning  SystemOOM   3m57s  kubelet  System OOM encountered, victim process: python, pid: "
                   "3103923\n")
    d = _diagnose(tmp_path / "mem", {"describe.txt": bare, "describe-node.txt": node_events})
    assert d.category == "oom", d.headline


def test_node_not_ready_names_the_node_to_drain(tmp_path):
    events = ("2m23s       Normal    NodeNotReady   node/gpu-node-23   Node gpu-node-23 status is now: NodeNotReady\n"
              "2m20s       Warning   NodeNotReady   pod/llama-pretrain-worker-3   Node is not ready\n")
    d = _diagnose(tmp_path, {"events.txt": events})
    assert d.category == "infrastructure" and d.culprit_nodes == ["gpu-node-23"], d.headline
    assert "gpu-node-23" in d.restart


def test_segfault_exit_is_software(tmp_path):
    d = _diagnose(tmp_path, {"describe.txt": DESCRIBE_OOM.replace("Reason:       OOMKilled", "Reason:       Error")
                             .replace("Exit Code:    1\n", "Exit Code:    139\n")})
    assert d.category == "software", d.headline
