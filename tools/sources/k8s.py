"""Kubernetes records that engineers paste next to a failed job: `kubectl describe pod`, `kubectl get events` /
`kubectl events`, and the status conditions of the training operators (Kubeflow PyTorchJob/MPIJob/TFJob, JobSet).

Format note (what the cluster prints, by producer; every line below is real output or the producer's own template):
- `kubectl describe pod` (k8s.io/kubectl pkg/describe/describe.go, tab-aligned by tabwriter, so columns are spaces):
      Node:         gpu-node-17/10.0.3.17
      Status:       Failed
      Reason:       Evicted
      Message:      The node was low on resource: memory. Container trainer was using 120Gi, which exceeds its ...
      ...
          Last State:     Terminated
            Reason:       OOMKilled          (also Error, Completed, ContainerCannotRun, StartError, DeadlineExceeded)
            Exit Code:    137
            Signal:       9                  (only when the runtime reports one)
            Started:      Fri, 15 Sep 2023 09:56:14 +0200
          Restart Count:  3
  and the `Events:` table `Type  Reason  Age  From  Message` (`Warning  BackOff  33s (x70 over 15m)  kubelet,
  minikube  Back-off restarting failed container`; before 1.14 `From` held `kubelet, <node>`). The lines carry
  no absolute time (ages are relative), so these hits are untimed and compete by strength (tools/diagnose.py).
- Events (`kubectl get events`: `LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`, e.g. `53m  Warning  SystemOOM
  node/hans-laptop  System OOM encountered, victim process: nginx, pid: 9295`; pre-1.14 `LASTSEEN FIRSTSEEN COUNT
  NAME KIND SUBOBJECT TYPE REASON SOURCE MESSAGE`). The messages are the emitters' templates:
  kubelet eviction (pkg/kubelet/eviction/helpers.go) `The node was low on resource: %v. ` [+ `Threshold quantity:
  %v, available: %v. `] + `Container %s was using %s, which exceeds its request of %s. ` (≥1.26: `..., request is
  %s, has larger consumption of %v. `), `The node had condition: %v. `, `Pod ephemeral local storage usage exceeds
  the total limit of containers %s. `, `Usage of EmptyDir volume %q exceeds the limit %q. `, `Container %s
  exceeded its local ephemeral storage limit %q. `; scheduler `0/64 nodes are available: 8 Insufficient
  nvidia.com/gpu, 56 node(s) didn't match Pod's node affinity/selector. preemption: ...` (≤1.10: `No nodes are
  available that match all of the following predicates:: Insufficient nvidia.com/gpu (3).`); `Successfully
  assigned ns/pod to node`; kubelet OOM watcher `System OOM encountered, victim process: %s, pid: %d`;
  node-problem-detector's `OOMKilling` event carries the kernel's own `Memory cgroup out of memory: Killed process
  ...` line (kernel.oom_kill matches it); node lifecycle `Node is not ready` (pod) / `Node %s status is now:
  NodeNotReady` (node); kubelet `Stopping container %s`, `Container %s failed liveness probe, will be restarted`;
  job controller `Job was active longer than specified deadline`, kubelet `Pod was active on the node longer than
  the specified deadline`, `Job has reached the specified backoff limit`.
- Kubeflow training-operator (`pkg/controller.v1/*`): `PyTorchJob %s is failed because %d %s replica(s) failed.`
  (also `is restarting because`), JobSet (`pkg/constants`): `jobset failed due to one or more job failures`,
  `jobset failed due to reaching max number of restarts`. These say that replicas failed, not why: cascade.

Categories (TAXONOMY.md): an OOMKilled container, a memory eviction, a SystemOOM are `oom` (host memory, whatever
the exit code says; tools/rules/oom.py `container_oom`). An exit 137 / signal 9 with no memory evidence anywhere in
the bundle is `infrastructure` (the taxonomy's SIGKILL edge case; tools/rules/infra.py `container_sigkill`), exit
139 (SIGSEGV) is `software`, exit 1 alone is nothing (the trainer's own traceback says more). An eviction for
ephemeral-storage / inodes / an emptyDir limit is `infrastructure`, not `storage_io`: the job's own I/O did not
fail (no ENOSPC/EIO reached it), the kubelet reclaimed the node's disk or enforced a pod limit, a container limit
that is not memory, like a too-small /dev/shm. FailedScheduling means the pod never ran (tools/rules/scheduler.py
`k8s_unschedulable`, status cancelled, never completed); it is noise once the pod was scheduled after all.
NodeNotReady names the node to drain (tools/rules/infra.py `k8s_node_lost`).
"""

from trainlog_debugger.tools.sources.pattern import P

#: Lines that prove a container or a node ran out of host memory (rules: oom.container_oom; infra.container_sigkill
#: stays quiet when any of these, or the kernel's / SLURM's OOM lines, are in the bundle).
MEMORY_KILLED = ("k8s.oomkilled", "k8s.evicted_memory", "k8s.system_oom", "cloud.vertex_oom")
HOST_MEMORY = MEMORY_KILLED + ("kernel.oom_kill", "slurm.oom_kill")
#: Lines that say which node ran the pod (field `node`).
POD_NODE = ("k8s.pod_node", "k8s.scheduled")

SIGKILL_EXIT = 137  # 128 + SIGKILL(9): how runtimes report a container killed by SIGKILL


def is_sigkill(facts: dict) -> bool:
    """An exit record (k8s.exit_code, k8s.signal, cloud.vertex_exit) that says SIGKILL: exit 137 or signal 9."""
    return facts.get("exit_code") in (SIGKILL_EXIT, 9) or facts.get("signal") == 9


_EVICT_USAGE = (r"(?:.*?The node was low on resource: (?P<resource>[\w-]+)\.?)?(?:.*?Container (?P<container>\S+) was "
                r"using (?P<usage>[^,\s]+), (?:which exceeds its request of|request is) (?P<request>[^,.\s]+))?")
_NODE_OBJ = r"(?:.*?[Nn]ode/(?P<node>[\w.-]+))?"

PATTERNS = [
    # ---- container state (describe pod, get pod -o yaml/json) --------------------------------------------------
    P("k8s.oomkilled", 1, "oom", "root_candidate",
      r"[Rr]eason\"?: *\"?OOMKilled|[0-9]/[0-9]+ +OOMKilled +[0-9]", "OOMKilled",
      "      Reason:       OOMKilled",
      "Kubernetes reports the container OOMKilled (its memory limit, or the node's memory)",
      fields=r"(?P<reason>OOMKilled)"),
    P("k8s.exit_code", 1, None, "context",
      r"Exit Code: +[0-9]|\"?exitCode\"?: *[0-9]", ("Exit Code:", "exitCode"),
      "      Exit Code:    1",
      "a container's exit code (137 = SIGKILL, 139 = SIGSEGV; 1 = the program's own error)",
      fields=r"(?:Exit Code|exitCode)\"?: *(?P<exit_code>\d{1,10})", ints=("exit_code",), fallback=True),
    P("k8s.exit_segv", 1, "software", "root_candidate",
      r"Exit Code: +139\b|\"?exitCode\"?: *139\b", ("Exit Code:", "exitCode"),
      "      Exit Code:    139",
      "a container died of a segmentation fault (exit 139 = SIGSEGV)",
      fields=r"(?:Exit Code|exitCode)\"?: *(?P<exit_code>139)", ints=("exit_code",), weight=0.55,
      advice="a native extension or library crashed: run the failing rank with `python -X faulthandler` (or "
             "gdb/core dumps) to get the crashing frame; check for mismatched CUDA/torch/extension builds"),
    P("k8s.signal", 1, None, "context",
      r"Signal: +[0-9]", "Signal:",
      "      Signal:       9",
      "the signal that ended a container (describe pod)", fields=r"Signal: +(?P<signal>\d{1,3})", ints=("signal",)),
    P("k8s.restart_count", 0, None, "context",
      r"Restart Count: +[0-9]", "Restart Count:",
      "    Restart Count:  3",
      "how often the container was restarted", fields=r"Restart Count: +(?P<restart_count>\d{1,10})",
      ints=("restart_count",)),
    P("k8s.container_cannot_run", 1, "config", "root_candidate",
      r"[Rr]eason\"?: *\"?(?:ContainerCannotRun|StartError)|OCI runtime create failed|failed to create shim task",
      ("ContainerCannotRun", "StartError", "OCI runtime create failed", "failed to create shim task"),
      "      Reason:       ContainerCannotRun",
      "the container runtime could not start the container (entrypoint, image, mounts or devices)", weight=0.55,
      fields=r"(?P<reason>ContainerCannotRun|StartError|OCI runtime create failed|failed to create shim task)",
      advice="read the container state's Message line: a command not found in the image is the launch "
             "configuration; an nvidia-container-cli error is the node's GPU driver (drain it)"),
    # the NVIDIA Container Toolkit's prestart hook (nvidia-container-cli) failing is the node's GPU stack, not the
    # pod spec: `initialization error: nvml error: driver not loaded`, `load library failed: libnvidia-ml.so.1`,
    # `device error: 3: unknown device`; except its `requirement error`, which is the image asking for a newer
    # driver than the node has (the image or the node pool was chosen wrong)
    P("k8s.nvidia_container_cli", 1, "infrastructure", "root_candidate",
      r"nvidia-container-cli: (?:initialization|device|mount|detection|ldcache) error", "nvidia-container-cli: ",
      "stderr: Auto-detected mode as 'legacy' nvidia-container-cli: initialization error: nvml error: driver not "
      "loaded: unknown",
      "the node's GPU driver or container toolkit failed when the container started (driver not loaded, NVML or a "
      "GPU missing)", weight=0.65,
      fields=r"nvidia-container-cli: (?P<cli_error>[a-z]+ error: [^:\n]{0,80})",
      advice="drain the node and check its driver (nvidia-smi on the host, dmesg for NVRM/Xid), reload or reinstall "
             "it, then reschedule the pod"),
    P("k8s.nvidia_driver_too_old", 1, "config", "root_candidate",
      r"nvidia-container-cli: requirement error: unsatisfied condition: cuda ?>= ?\d", "requirement error: unsatisfied condition",
      "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a "
      "newer version, or use an earlier cuda container: unknown",
      "the image needs a newer CUDA driver than the node has", weight=0.65,
      fields=r"unsatisfied condition: cuda ?>= ?(?P<cuda_required>[\d.]+)",
      advice="run the image on a node pool whose driver supports that CUDA version, or use an image built for an "
             "older CUDA (NVIDIA_DISABLE_REQUIRE only hides the check)"),
    P("k8s.crashloop", 1, None, "cascade",
      r"Back-off restarting failed container|[Rr]eason\"?: *\"?CrashLoopBackOff",
      ("Back-off restarting failed container", "CrashLoopBackOff"),
      "  Warning  BackOff    11s (x4 over 58s)   kubelet            Back-off restarting failed container trainer in pod "
      "trainer-worker-3_ml(b50a7fa8-bb90-46f1-aba4-f17a2bb67161)",
      "the kubelet waits before restarting a container that keeps failing (a consequence)",
      fields=r"(?:Back-off restarting failed container|CrashLoopBackOff) (?P<container>[\w.-]+)"),
    # ---- pod status and eviction ----------------------------------------------------------------------------------
    P("k8s.pod_node", 0, None, "context",
      r"Node: +[\w.-]+/[0-9a-fA-F]", "Node:",
      "Node:         gpu-node-17/10.0.3.17",
      "the node that ran the pod (describe pod header)", fields=r"Node: +(?P<node>[\w.-]+)/(?P<node_ip>[0-9a-fA-F.:]+)"),
    P("k8s.scheduled", 0, None, "context",
      r"Successfully assigned \S+ to \S", "Successfully assigned",
      "  Normal   Scheduled  12m   default-scheduler  Successfully assigned ml/trainer-worker-3 to gpu-node-17",
      "the scheduler placed the pod on a node", fields=r"Successfully assigned (?P<pod>\S+) to (?P<node>[\w.-]+)"),
    P("k8s.evicted", 1, None, "cascade",
      r"[Rr]eason\"?: *\"?Evicted\b", "Evicted",
      "Reason:       Evicted",
      "the kubelet evicted the pod (its Message line says which resource ran low)"),
    # Volcano's scheduler evicted the pod for another job (volcano-sh/volcano pkg/scheduler/cache: `Pod is evicted,
    # because of %v`, the reason being its action: preempt, reclaim, shuffle): the platform's decision
    P("k8s.volcano_evicted", 1, "infrastructure", "root_candidate",
      r"Pod is evicted, because of \w", "Pod is evicted, because of",
      "  Warning  Evict      3m    volcano  Pod is evicted, because of preempt",
      "the batch scheduler (Volcano) evicted the pod to give its resources to another job (preempt or reclaim)",
      fields=r"because of (?P<why>\w+)", weight=0.8, status="cancelled",
      advice="resume from the last checkpoint; give the job a higher priority class or a queue that is not reclaimed "
             "(Volcano: PriorityClass, queue reclaimable=false, minAvailable), and checkpoint more often"),
    P("k8s.evicted_memory", 1, "oom", "root_candidate",
      r"The node was low on resource: memory\b", "The node was low on resource: memory",
      "Message:      The node was low on resource: memory. Container trainer was using 121Gi, which exceeds its "
      "request of 64Gi. ",
      "the kubelet evicted the pod because the node ran out of memory",
      fields=_EVICT_USAGE),
    P("k8s.evicted_storage", 1, "infrastructure", "root_candidate",
      r"The node was low on resource: (?:ephemeral-storage|inodes)|Pod ephemeral local storage usage exceeds the total "
      r"limit|exceeded its local ephemeral storage limit|Usage of EmptyDir volume \S+ exceeds the limit",
      ("The node was low on resource: ", "Pod ephemeral local storage usage", "local ephemeral storage limit",
       "Usage of EmptyDir volume"),
      "  Warning  Evicted    7m    kubelet            The node was low on resource: ephemeral-storage. Threshold "
      "quantity: 10Gi, available: 9140Mi. Container trainer was using 48Gi, request is 0, has larger consumption "
      "of ephemeral-storage.",
      "the kubelet evicted the pod for local disk (ephemeral storage, inodes or an emptyDir over its limit)",
      fields=_EVICT_USAGE, weight=0.8,
      advice="write checkpoints, caches and datasets to a mounted volume (PVC), not the container's writable layer "
             "or an emptyDir; set ephemeral-storage requests/limits that match what the job writes"),
    P("k8s.evicted_other", 1, "infrastructure", "root_candidate",
      r"The node was low on resource: pids|The node had condition: ", ("The node was low on resource: pids",
                                                                        "The node had condition: "),
      "Message:      The node had condition: [DiskPressure]. ",
      "the kubelet evicted the pod under node pressure", fields=r"(?:resource: |condition: \[?)(?P<resource>\w+)",
      weight=0.7, advice="check the node's conditions (`kubectl describe node`) and what else runs there"),
    # ---- events -----------------------------------------------------------------------------------------------------
    P("k8s.failed_scheduling", 1, "infrastructure", "root_candidate",
      # Volcano's scheduler words it `0/12 nodes are unavailable: 12 Insufficient nvidia.com/gpu.`
      # (volcano-sh/volcano pkg/scheduler/api/unschedule_info.go)
      r"[0-9]+/[0-9]+ nodes are (?:un)?available: |No nodes are available that match all of the",
      ("nodes are available: ", "nodes are unavailable: ", "No nodes are available that match"),
      "  Warning  FailedScheduling  2m (x25 over 1h)  default-scheduler  0/64 nodes are available: 8 Insufficient "
      "nvidia.com/gpu, 56 node(s) didn't match Pod's node affinity/selector. preemption: 0/64 nodes are available: "
      "8 No preemption victims found for incoming pod, 56 Preemption is not helpful for scheduling.",
      "the scheduler found no node for the pod",
      fields=r"(?:(?P<available>\d{1,9})/(?P<nodes>\d{1,9}) nodes are (?:un)?available: |following predicates:+ )"
             r"(?P<why>.{1,400}?)(?:\.? preemption:|\.?$)", ints=("available", "nodes")),
    P("k8s.system_oom", 1, "oom", "root_candidate",
      r"System OOM encountered", "System OOM encountered",
      "53m         Warning   SystemOOM    node/gpu-node-17   System OOM encountered, victim process: python, pid: 9295",
      "the kubelet saw the kernel OOM killer on the node",
      fields=_NODE_OBJ + r".*?System OOM encountered(?:, victim process: (?P<proc>[^,\s]+), pid: (?P<pid>\d{1,10}))?",
      ints=("pid",)),
    P("k8s.node_not_ready", 1, "infrastructure", "root_candidate",
      r"Node is not ready|status is now: NodeNotReady", ("Node is not ready", "status is now: NodeNotReady"),
      "2m23s       Normal    NodeNotReady   node/gpu-node-17   Node gpu-node-17 status is now: NodeNotReady",
      "a node stopped reporting ready (kubelet down, node lost or rebooted)",
      fields=r"(?:Node (?P<node>[\w.-]+) status is now|Node is not ready)"),
    P("k8s.killing", 1, None, "cascade",
      r"Stopping container \S|Killing container with id ", ("Stopping container", "Killing container with id"),
      "  Normal   Killing    3m    kubelet            Stopping container trainer",
      "the kubelet stopped a container (after an eviction, a deletion or a failed probe)",
      fields=r"(?:Stopping container |Killing container with id \S+?:?)(?P<container>[\w.-]+)"),
    P("k8s.liveness_kill", 1, "config", "root_candidate",
      r"failed liveness probe, will be restarted", "failed liveness probe, will be restarted",
      "  Normal   Killing    4m    kubelet            Container trainer failed liveness probe, will be restarted",
      "the kubelet killed a container whose liveness probe failed", weight=0.6,
      fields=r"Container (?P<container>\S+) failed liveness probe",
      advice="a training step, checkpoint save or data-index build can outlast the probe: raise its timeoutSeconds/"
             "failureThreshold, or drop the liveness probe from training pods"),
    P("k8s.failed_mount_config", 1, "config", "root_candidate",
      r"MountVolume\.SetUp failed for volume \S+ : (?:configmap|secret) \S+ not found", "MountVolume.SetUp failed",
      "  Warning  FailedMount  2m (x9 over 20m)  kubelet  MountVolume.SetUp failed for volume \"hf-token\" : secret "
      "\"hf-token\" not found",
      "a volume refers to a ConfigMap or Secret that does not exist", weight=0.7,
      fields=r"for volume \"?(?P<volume>[^\" ]+)\"? : (?P<kind>configmap|secret) \"?(?P<name>[^\" ]+)",
      advice="create the missing ConfigMap/Secret in the pod's namespace, or fix its name in the job spec"),
    P("k8s.failed_mount", 1, "storage_io", "root_candidate",
      r"MountVolume\.(?:SetUp|MountDevice) failed for volume|Unable to attach or mount volumes: ",
      ("MountVolume.", "Unable to attach or mount volumes"),
      "  Warning  FailedMount  2m (x5 over 10m)  kubelet  MountVolume.MountDevice failed for volume \"pvc-0a1b2c3d\" : "
      "rpc error: code = Aborted desc = an operation with the given Volume ID pvc-0a1b2c3d already exists",
      "the kubelet could not mount a volume of the pod", weight=0.5, fallback=True,
      fields=r"(?:for volume \"?(?P<volume>[^\" ]+)|unmounted volumes=\[(?P<volumes>[^\]\n]*)\])",
      advice="check the volume's claim and backend (`kubectl describe pvc`, the CSI driver's pods, the NFS/Lustre "
             "server) for that node"),
    P("k8s.deadline_exceeded", 1, "infrastructure", "root_candidate",
      r"Job was active longer than specified deadline|Pod was active on the node longer than the specified deadline"
      r"|[Rr]eason\"?: *\"?DeadlineExceeded",
      ("Job was active longer than specified deadline", "Pod was active on the node longer", "DeadlineExceeded"),
      "2m30s       Warning   DeadlineExceeded   job/llama-pretrain   Job was active longer than specified deadline",
      "Kubernetes stopped the job at its activeDeadlineSeconds (a time limit)", weight=0.8, status="cancelled",
      advice="resume from the last checkpoint; raise activeDeadlineSeconds or checkpoint more often"),
    P("k8s.backoff_limit", 1, None, "cascade",
      r"Job has reached the specified backoff limit", "Job has reached the specified backoff limit",
      "3m          Warning   BackoffLimitExceeded   job/llama-pretrain   Job has reached the specified backoff limit",
      "the Job's pods failed more times than backoffLimit (a consequence: the pods' own failures say why)"),
    # ---- training operators -----------------------------------------------------------------------------------------
    P("k8s.operator_failed", 1, None, "cascade",
      r"Job \S+ is (?:failed|restarting) because [0-9]+ \S+ replica\(s\) failed|jobset failed due to ",
      ("replica(s) failed", "jobset failed due to "),
      "  Normal   PyTorchJobFailed  5m  pytorchjob-controller  PyTorchJob ml/llama-pretrain is failed because 1 Worker "
      "replica(s) failed.",
      "the training operator marked the job failed because replicas failed (which one, and why, is in the pods)",
      fields=r"(?:(?P<kind>\w*Job) (?P<job>\S+) is (?P<state>failed|restarting) because (?P<failed>\d{1,9}) "
             r"(?P<replica_type>\S+) replica|jobset failed due to (?P<why>[^\".]{1,200}))", ints=("failed",)),
]
