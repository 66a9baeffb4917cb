"""Host infrastructure: shared memory (/dev/shm) too small for NCCL or DataLoader workers, bus errors."""

from __future__ import annotations

import re

import signal

from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import parse_ranges
from trainlog_debugger.tools.rules.base import RuleInputs, candidate, restart_without
from trainlog_debugger.tools.rules.scheduler import job_nodes, job_records
from trainlog_debugger.tools.sources.k8s import HOST_MEMORY, POD_NODE, is_sigkill


def shm(f: RuleInputs):
    evs = f.hits("nccl.shm_no_space", "loader.shm_insufficient")
    evs += [e for e in f.hits("io.no_space") if "/dev/shm" in e.text]
    if not evs:
        return []
    return [candidate("infra.shm", "infrastructure", "shared memory (/dev/shm) exhausted: the container's /dev/shm is too "
                 "small", 0.85, evs[:3], f, recommendations=["run the container with a larger /dev/shm (docker "
                                                             "--shm-size / --ipc=host; k8s emptyDir medium Memory)",
                                                             "NCCL_SHM_DISABLE=1 as a workaround (slower)"])]


def bus_error(f: RuleInputs):
    """A bus error, in words (`Bus error (core dumped)`, srun's `task 5: Bus error`) or as the launcher's exit code
    -7 / SIGBUS (a rank that died with no line of its own): on a training node nearly always /dev/shm too small for
    DataLoader workers or NCCL's shared-memory transport (TAXONOMY: container limits that are not memory)."""
    evs = f.hits("process.sigbus") + signalled_workers(f, 7)
    return [candidate("infra.sigbus", "infrastructure", "bus error (SIGBUS), typically shared memory exhausted", 0.6, evs[:2],
                 f, ranks=launcher_ranks(evs[:2]), recommendations=["increase /dev/shm"])] if evs else []


# DeepSpeed's sigkill_handler logs `f"{cmd} exits with return code = ..."` with `cmd` left from its loop over all the
# processes it launched: the argv printed (`'--local_rank=7'`) is the last one launched, not the one that exited
_ARGV_NOT_THE_RANK = "exits with return code = "


def launcher_ranks(evs: list[Evidence]) -> list[int] | None:
    """The ranks a candidate built on these launcher lines may name: None (the default: the lines' ranks, else the
    first line's own words) unless the first is DeepSpeed's exit line, whose words name another process; then only
    ranks the lines were attributed to."""
    if evs and _ARGV_NOT_THE_RANK in evs[0].text:
        return sorted({e.rank for e in evs if e.rank is not None})
    return None


def signalled_workers(f: RuleInputs, signo: int) -> list[Evidence]:
    """The launchers' lines that say a worker died of signal `signo`: a negative exit code is the signal (Popen's
    convention, which torchrun and DeepSpeed's launcher print as they got it): torchrun's `exitcode : -7`, `Signal 7
    (SIGBUS)`, the elastic agent's `failed (exitcode: -7) local_rank: 0`; DeepSpeed's `exits with return code = -7`;
    Open MPI's `exited on signal 7`; torch.multiprocessing.spawn's `process 3 terminated with signal SIGBUS` (the
    child having left no traceback)."""
    name = signal.Signals(signo).name
    out = []
    for e in f.hits("torchrun.exitcode", "torchrun.signal_received", "torchrun.worker_failed"):
        fx = (f.fields_of(e, "torchrun.exitcode") or f.fields_of(e, "torchrun.signal_received")
              or f.fields_of(e, "torchrun.worker_failed"))
        if fx.get("exitcode") == -signo or fx.get("signal") == name:
            out.append(e)
    out += [e for e in f.hits("deepspeed.exit_code") if f.fields_of(e, "deepspeed.exit_code").get("returncode") == -signo]
    out += [e for e in f.hits("mpi.process_exited") if f.fields_of(e, "mpi.process_exited").get("signal") == signo]
    # horovodrun's gloo launcher ran the worker through a shell: 128 + the signal (its process index is the rank)
    out += [e if e.rank is not None else e.model_copy(update={"rank": fx.get("failed_rank")})
            for e in f.hits("horovod.process_exit")
            if (fx := f.fields_of(e, "horovod.process_exit")).get("status") in (128 + signo, -signo)]
    spawn = f"terminated with signal {name}"
    # spawn's exception line: alone (python.exception), or under the parent's traceback, where the signal's name has
    # the line read as a kill (process.killed) and the traceback holds it as its final exception
    out += [e for e in f.hits("python.exception", "python.exception_named", "process.killed") if spawn in e.text]
    return out


# torchrun's lines about a worker's end, each with the worker's pid in its facts
_PID_FACTS = ("torchrun.exitcode", "torchrun.signal_received", "torchrun.worker_failed")


def escalated_pids(f: RuleInputs) -> set[tuple[str, int]]:
    """(file, pid) of the workers torchrun itself SIGKILLed in its teardown, after they ignored its SIGTERM (a worker
    in an uninterruptible wait: a hung NFS write, a CUDA call): their exit -9, reported by the same agent in the same
    file, is the launcher's, not a killer's. Per file: another node's worker may have the same pid."""
    return {(e.file, pid) for e in f.hits("torchrun.escalated_kill")
            if isinstance(pid := f.fields_of(e, "torchrun.escalated_kill").get("pid"), int)}


def _torchrun_pid(f: RuleInputs, e: Evidence) -> int | None:
    """The worker pid a torchrun line about a worker's end states (its facts), else None."""
    return next((p for pid in _PID_FACTS if isinstance(p := f.fields_of(e, pid).get("pid"), int)), None)


def sigkilled_workers(f: RuleInputs) -> list[Evidence]:
    """The launchers' lines that say a worker died of SIGKILL (signalled_workers), and srun's `task 5: Killed` (with
    the task's rank, where srun's tasks are the job's ranks: srun_task_rank). Not a worker torchrun SIGKILLed itself
    in its teardown (escalated_pids): that kill is a consequence of the teardown, whatever started it."""
    out = signalled_workers(f, 9)
    if out and (own := escalated_pids(f)):
        out = [e for e in out if (e.file, _torchrun_pid(f, e)) not in own]
    # srun names how a task ended by strsignal(): `srun: error: gpu-node-12: task 5: Killed` is SIGKILL
    for e in f.hits("slurm.task_exit"):
        if f.fields_of(e, "slurm.task_exit").get("how", "").strip().startswith("Killed"):
            r = srun_task_rank(f, e) if e.rank is None else None
            out.append(e.model_copy(update={"rank": r}) if r is not None else e)
    return out


_ONE_TASK = re.compile(r"^\d{1,7}$")


def srun_task_rank(f: RuleInputs, ev: Evidence) -> int | None:
    """The rank of the one task an srun `task N: ...` line names, when srun's tasks are the job's ranks: srun
    launched one task per GPU (some `srun: error: host: tasks 8-10,12-15: ...` line puts several tasks on one host,
    so a task is not a node's launcher), task N is a rank the logs show, and that rank's node, where known, is the
    line's host. SLURM_PROCID is then the rank torch.distributed uses. None otherwise."""
    fx = f.fields_of(ev, "slurm.task_exit")
    tasks, host = str(fx.get("tasks") or ""), fx.get("hosts")
    if not _ONE_TASK.match(tasks):
        return None
    per_gpu = any(len(parse_ranges(str(f.fields_of(e, "slurm.task_exit").get("tasks") or ""))) > 1
                  for e in f.hits("slurm.task_exit"))
    r = int(tasks)
    if not per_gpu or r not in f.scan.ranks:
        return None
    known = f.scan.rank_nodes.get(r)
    return r if known is None or not known.node or known.node == host else None


# the schedulers whose tables document their own memory-limit kill (PBS's `=>> PBS: job killed: mem ... exceeded
# limit`, Flux's, a pod's OOMKilled): a line of theirs that a row reads as an oom trigger is a kill for memory
SCHEDULER_TABLES = ("pbs", "flux", "slurm", "kubernetes")
_SCHEDULER_ROWS = tuple(f"upstream.{t}_" for t in SCHEDULER_TABLES)  # their scan patterns (eval/messages.py scanlist)


def memory_kills(f: RuleInputs) -> list[Evidence]:
    """The lines that show a kill for host memory: the kernel's or a cgroup's OOM killer, Slurm's memory enforcement,
    srun's `Out Of Memory` task end, another scheduler's memory-limit kill as its table documents it
    (tools/rules/oom.host_oom cites them)."""
    out = (f.hits("kernel.oom_kill", "slurm.oom_kill")
           + [e for e in f.hits("slurm.task_exit") if "Out Of Memory" in e.text]
           # SageMaker's verdict on the job (its FailureReason): the instance ran out of host memory
           + f.hits("cloud.sagemaker_oom"))
    # the scheduler's own record of the job's end, printed by its tools (sacct's `OUT_OF_ME+  0:125`, scontrol's
    # `JobState=OUT_OF_MEMORY`, seff, the job's mail), and another scheduler's memory kill that only its table knows
    # (a line the scan keeps by the table's trigger, tools/sources/upstream.py): none of them an error line
    out += [e for e in job_records(f) if str(f.fields_of(e, "slurm.job_state").get("state", "")).startswith("OUT_OF_ME")]
    out += f.hits(*(pid for pid, s in f.summaries.items() if s.category == "oom" and pid.startswith(_SCHEDULER_ROWS)))
    if f.messages is not None:
        lines = f.hits("generic.error_line")
        for e in lines[:32] + lines[32:][-32:]:  # a scheduler's kill line sits at the end of a job's stderr
            m = f.messages.best(strip_prefixes(e.text))
            if m is not None and m.table in SCHEDULER_TABLES and m.category == "oom" and m.role == "trigger":
                out.append(e)
    return out


HOST_MEMORY_FULL = 90.0  # percent of host memory in use from which a reading before a SIGKILL is memory evidence


def host_memory_full(f: RuleInputs) -> list[Evidence]:
    """Each file's last host-memory reading when it shows the host nearly out of memory (DeepSpeed's
    see_memory_usage: `CPU Virtual Memory:  used = 481.2 GB, percent = 97.1%`, psutil's share not available), highest
    first. Why the last one only: memory that rose and then fell again says nothing about a later kill. A percentage
    outside 0-100 is no reading."""
    last: dict[str, Evidence] = {}
    for e in f.hits("deepspeed.host_memory"):
        if e.file not in last or e.line > last[e.file].line:
            last[e.file] = e
    out = []
    for e in last.values():
        try:
            pct = float(f.fields_of(e, "deepspeed.host_memory").get("percent", ""))
        except ValueError:
            continue
        if HOST_MEMORY_FULL <= pct <= 100:
            out.append((pct, e))
    return [e for _p, e in sorted(out, key=lambda pe: -pe[0])]


def full_before(f: RuleInputs, kills: list[Evidence]) -> list[Evidence]:
    """The nearly-full host-memory readings (host_memory_full) that can explain one of these kills: not dated after
    it, and not on another node than it where both name theirs (a reading at start-up on one node says nothing of an
    operator's kill on another)."""
    def explains(r: Evidence, k: Evidence) -> bool:
        rt = r.time.job_seconds() if r.time is not None else None
        kt = k.time.job_seconds() if k.time is not None else None
        if rt is not None and kt is not None and rt > kt:
            return False
        rn, kn = f.nodes_of([r]), f.nodes_of([k])
        return not (rn and kn and not set(rn) & set(kn))
    return [r for r in host_memory_full(f) if any(explains(r, k) for k in kills)] if kills else []


def container_kills(f: RuleInputs) -> list[Evidence]:
    """A container's (or a managed replica's) exit by SIGKILL: exit 137 or signal 9 in the pod's or the service's
    record."""
    return [e for pid in ("k8s.exit_code", "k8s.signal", "cloud.vertex_exit") for e in f.hits(pid)
            if is_sigkill(f.fields_of(e, pid))]


def memory_killed(f: RuleInputs) -> bool:
    """Whether the bundle shows a kill for host memory: then a worker's SIGKILL has its killer named."""
    return bool(memory_kills(f))


def killed_from_outside(f: RuleInputs):
    """A worker ended by SIGKILL (exit -9) whose own log shows no error: something outside the process killed it
    (the kernel OOM killer, a cgroup limit, an operator, a node agent). -15 is the launcher's own stop and -6 the
    NCCL watchdog's abort: both are cascade, not this."""
    every = sigkilled_workers(f)
    if memory_killed(f) or full_before(f, every):
        # the killer is in the bundle (tools/rules/oom.host_oom names it, and whom the kill hit), or memory was all but
        # gone just before (tools/rules/oom.host_memory_full)
        return []
    killed = [e for e in every if e.rank is not None]
    if not killed:
        # a launcher's line in a paste that says nothing else (no rank prefix, no worker's error line anywhere): the
        # same reading, a little weaker, its rank from the line's own words (`local_rank: 0`) where it names one
        said = {(e.file, e.line) for e in every}  # the kill's own line is no other error
        # nor is the traceback it ends (spawn's parent raising ProcessExitedException)
        said |= {(e.file, e.line) for e in f.hits("python.traceback")
                 if (e.file, f.fields_of(e, "python.traceback").get("exception_line")) in said}
        errors = [pid for pid, s in f.summaries.items() if s.role == "root_candidate" and s.tier in (1, 2)
                  and not pid.startswith("torchrun.") and any((e.file, e.line) not in said for e in f.each(pid))]
        if not every or errors:
            return []
        return [candidate("infra.killed_from_outside", "infrastructure", "a worker was killed with SIGKILL and no "
                          "line in the bundle shows an error: killed from outside the process (the kernel's OOM "
                          "killer is the usual one)", 0.5, every[:2], f, ranks=launcher_ranks(every[:2]),
                          recommendations=["check the host's kernel log for the OOM killer or a cgroup limit at that "
                                           "time (dmesg / journalctl -k), and the scheduler's events"])]
    ranks = sorted({e.rank for e in killed if e.rank is not None})  # all of them: `killed` keeps ranked lines
    own_errors = {e.rank for pid, s in f.summaries.items() if s.role == "root_candidate" and s.tier in (1, 2)
                  and not pid.startswith("torchrun.") for e in f.hits(pid) if e.rank in ranks}
    silent = [r for r in ranks if r not in own_errors]
    if not silent:
        return []
    evs = [e for e in killed if e.rank in silent][:2]
    return [candidate("infra.killed_from_outside", "infrastructure", f"rank(s) {', '.join(map(str, silent))} were killed "
                 f"with SIGKILL and their own logs show no error: killed from outside the process", 0.6, evs, f,
                 ranks=silent, recommendations=["check the host's kernel log for the OOM killer or a cgroup limit at "
                                                "that time (dmesg / journalctl -k), and the scheduler's events"])]


def pod_nodes(f: RuleInputs, evs: list[Evidence]) -> list[str]:
    """The node(s) that ran the pods these Kubernetes lines are about: the describe header `Node: name/ip` or the
    `Successfully assigned ns/pod to node` event, in the same file (a describe paste is one pod; a multi-pod paste
    yields every node it names, which is still only what the file states)."""
    files = {e.file for e in evs}
    out: list[str] = []
    for pid in POD_NODE:
        for e in f.hits(pid):
            node = f.fields_of(e, pid).get("node")
            if e.file in files and node and node not in out:
                out.append(node)
    return out


# the pod's events that say who killed its container (the kubelet for a failed liveness probe, an eviction, a batch
# scheduler's preemption): each has its own reading
NAMED_KILLERS = ("k8s.liveness_kill", "k8s.evicted_storage", "k8s.evicted_other", "k8s.volcano_evicted")


def container_sigkill(f: RuleInputs):
    """A container (or a managed-service replica) ended by SIGKILL, exit 137 or signal 9, and no line anywhere in the
    bundle shows memory running out (no OOMKilled, memory eviction, SystemOOM, kernel or cgroup OOM kill): something
    outside the process killed it (TAXONOMY edge case). With memory evidence the OOM rules own it and this stays
    quiet; the summary says what evidence would tell the two apart. A killer the pod's own events name (the kubelet
    restarting it for a failed liveness probe, an eviction, a preemption) is that reading's, not an unknown one."""
    evs = container_kills(f)
    if not evs or f.hits(*HOST_MEMORY) or f.hits(*NAMED_KILLERS) or full_before(f, evs):
        return []  # memory evidence (a kill line, or a reading near full before it: oom's), or a named killer
    return [candidate("infra.container_sigkill", "infrastructure", "a container was killed with SIGKILL (exit 137) and "
                      "no line in the bundle shows memory running out: killed from outside the process (the node's "
                      "kernel log and the pod's events are missing)", 0.6, evs[:2], f, nodes=pod_nodes(f, evs),
                      recommendations=["read the pod's events and the node's kernel log for that time (`kubectl get "
                                       "events`, `kubectl describe node`, dmesg): an OOM kill, an eviction, a "
                                       "preemption or an operator"])]


def k8s_node_lost(f: RuleInputs):
    """A node went NotReady under the job: the platform lost it (kubelet down, reboot, network partition). The node
    is named by the node event itself or, for the pod's `Node is not ready` event, by the pod's own node line. A
    node event for a node the job did not run on (where the job's nodes are known) is another workload's."""
    evs = f.hits("k8s.node_not_ready")
    if not evs:
        return []
    nodes = [n for e in evs if (n := f.fields_of(e, "k8s.node_not_ready").get("node"))]
    if nodes:  # a cluster's events name every node that went NotReady: only the job's own nodes are this job's
        ours = job_nodes(f) | {str(n) for pid in POD_NODE for e in f.hits(pid) if (n := f.fields_of(e, pid).get("node"))}
        if ours and not ours & set(nodes):
            return []
    nodes = list(dict.fromkeys(nodes)) or pod_nodes(f, evs)
    return [candidate("infra.k8s_node_lost", "infrastructure", f"Kubernetes node {', '.join(nodes[:4]) or '(unnamed)'} "
                      "stopped being ready while the job ran on it", 0.75, evs[:2], f, ranks=[], nodes=nodes,
                      restart=restart_without(nodes[0] if len(nodes) == 1 else None),
                      recommendations=["check the node (`kubectl describe node`, its kubelet and kernel logs) and "
                                       "cordon it until it is healthy"])]


RULES = [shm, bus_error, killed_from_outside, container_sigkill, k8s_node_lost]
