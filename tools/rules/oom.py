"""Out of memory: the GPU's (CUDA caching allocator) or the host's (kernel / cgroup OOM killer)."""

from __future__ import annotations

from trainlog_debugger.tools.model import Finding, Role
from trainlog_debugger.tools.lines.attribution import named_in_text
from trainlog_debugger.tools.rules.base import RuleInputs, candidate
from trainlog_debugger.tools.rules.infra import (container_kills, full_before, srun_task_rank, memory_kills,
                                                 pod_nodes, sigkilled_workers)
from trainlog_debugger.tools.sources.k8s import MEMORY_KILLED, is_sigkill


def cuda_oom(f: RuleInputs):
    evs = f.hits("cuda.oom")
    if not evs:
        return []
    fx = f.fields_of(evs[0], "cuda.oom")
    ranks = f.ranks_of("cuda.oom")
    entry = f.failure_entry(evs[0]) if not ranks else None  # torchrun's failure entry that quotes it (`rank : 2`)
    if entry is not None:
        ranks = [entry[0]]
    what = f"CUDA out of memory on rank(s) {', '.join(map(str, ranks[:8]))}" if ranks else \
        "CUDA out of memory, on a rank no line names"
    if fx.get("requested"):
        what += f" (tried to allocate {fx['requested']}" + (f", {fx['free']} free of {fx['total']}" if fx.get("free") else "") + ")"
    return [candidate("oom.cuda", "oom", what, 0.95, evs[:3], f, ranks=ranks,
                 recommendations=["reduce the micro-batch size or sequence length, or enable activation checkpointing",
                                  "if reserved-but-unallocated memory is large: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"])]


def accelerator_alloc(f: RuleInputs):
    """XLA/JAX and the CUDA driver's pool report an out-of-memory in their own words, not PyTorch's."""
    evs = f.hits("cuda.alloc_failed")
    if not evs:
        return []
    size = f.fields_of(evs[0], "cuda.alloc_failed").get("requested")
    what = "an accelerator memory allocation failed" + (f" ({size} bytes requested)" if size else "")
    return [candidate("oom.accelerator", "oom", what, 0.9, evs[:3], f,
                      recommendations=["reduce the per-device batch, sequence length or model shard size, or enable "
                                       "rematerialisation / activation checkpointing",
                                       "JAX: check XLA_PYTHON_CLIENT_MEM_FRACTION / preallocation settings"])]


def host_oom(f: RuleInputs):
    evs = memory_kills(f)
    if evs:  # a DataLoader worker's SIGKILL is memory only beside a kill line that says so (TAXONOMY)
        evs += [e for e in f.hits("loader.worker_killed") if "signal: Killed" in e.text]
    killed_evs = len(evs)
    evs += f.hits("process.host_alloc_failed")
    if not evs:
        return []
    # no kill in the logs, only a process whose own allocation failed: say that, not that a killer came
    said = "the host OOM killer killed training processes (CPU memory)" if killed_evs else \
        "host (CPU) memory ran out: a process's own allocation failed (DefaultCPUAllocator, MemoryError, std::bad_alloc)"
    if killed_evs and all("xceeded" in e.text for e in evs[:killed_evs]):  # Slurm's own enforcement, no OOM killer
        said = "Slurm killed the step for exceeding its memory limit (host memory, JobAcctGather's enforcement)"
    if killed_evs and all("instance type with more memory" in e.text or "Please use a larger instance" in e.text
                          for e in evs[:killed_evs]):  # the service's verdict, not the kernel's line
        said = "the managed training service (SageMaker) says the instance ran out of host memory"
    # the launcher's line that names the process the kill hit (srun's `task 5: Killed`, mpirun's `process rank 1
    # ... on node w1 exited on signal 9`) says whose process it was, where the kernel's line names only a pid
    # srun's `task 3: Out Of Memory` is the line of whose task it was: its host, and its task's rank where srun's
    # tasks are the job's ranks
    killed = sigkilled_workers(f)[:2] + [e for e in evs[:killed_evs] if "Out Of Memory" in e.text][:2]
    ranks, nodes = None, None
    if killed and not any(e.rank is not None for e in evs):
        named = [named_in_text(e.text) for e in killed]
        srun = {(e.file, e.line) for e in f.hits("slurm.task_exit")}
        tasks = [e for e in killed if (e.file, e.line) in srun]
        ranks = sorted({e.rank for e in killed if e.rank is not None} | {r for r, _h in named if r is not None}
                       | {r for e in tasks if (r := srun_task_rank(f, e)) is not None})
        hosts = {h for e in tasks if (h := f.fields_of(e, "slurm.task_exit").get("hosts")) and "[" not in h}
        nodes = (f.nodes_of(killed) or sorted({h for _r, h in named if h} | hosts)) or None
    return [candidate("oom.host", "oom", said, 0.85,
                      evs[:3] + killed, f, ranks=ranks, nodes=nodes,
                      recommendations=["lower DataLoader num_workers / prefetch, check for host memory leaks, or "
                                       "request more memory per task"])]


def host_memory_full(f: RuleInputs):
    """A worker (or a container: exit 137) ended by SIGKILL after the host's last memory reading showed it nearly
    full (DeepSpeed's `CPU Virtual Memory: ... percent = 97.1%`, tools.rules.infra.host_memory_full; not dated after
    the kill, not on another node: infra.full_before), and no kill line in the bundle: the kernel's OOM killer, almost
    certainly, whose own line (dmesg) is not here. TAXONOMY: a SIGKILL with memory evidence is oom. Weaker than the
    kill line itself (host_oom), which owns the story when it is there."""
    if memory_kills(f):
        return []
    killed = sigkilled_workers(f) + container_kills(f)
    full = full_before(f, killed)
    if not full:
        return []
    pct = f.fields_of(full[0], "deepspeed.host_memory").get("percent")
    ranks = sorted({e.rank for e in killed if e.rank is not None}) or None
    return [candidate("oom.host_memory_full", "oom", f"a worker was killed with SIGKILL after host memory reached "
                      f"{pct}% in use: the kernel's OOM killer, almost certainly (its own line, in the kernel log, is "
                      f"not in the bundle)", 0.75, full[:1] + killed[:2], f, ranks=ranks,
                      recommendations=["cut host memory: ZeRO offload to NVMe instead of CPU, fewer DataLoader "
                                       "workers, load the checkpoint on one rank per node or memory-mapped",
                                       "confirm with the node's kernel log at that time (dmesg -T | grep -i oom)"])]


def container_oom(f: RuleInputs):
    """The platform says a container or replica was killed for memory: Kubernetes `OOMKilled` (whatever exit code
    it shows: a worker killed under torchrun leaves the agent to exit 1), a memory eviction, the kubelet's SystemOOM,
    Vertex's "ran out of memory". When the workers' own logs show the kill (a rank ended by SIGKILL with nothing
    of its own), the two are one story across sources: the platform's record explains the rank's silent death, so
    the candidate is marked cross-source (tools/diagnose.py prefers it to the worker-side view, whose lines carry
    times that the describe/event lines lack)."""
    evs = f.hits(*MEMORY_KILLED)
    if not evs:
        return []
    exits = [e for pid in ("k8s.exit_code", "k8s.signal", "cloud.vertex_exit") for e in f.hits(pid)
             if is_sigkill(f.fields_of(e, pid)) and e.file in {x.file for x in evs}]
    nodes = list(dict.fromkeys([n for e in evs if (n := f.fields_of(e, "k8s.system_oom").get("node"))]
                               + pod_nodes(f, evs)))
    killed = sigkilled_workers(f)
    ranks = sorted({e.rank for e in killed if e.rank is not None})
    what = "the platform killed the container for memory (host/cgroup memory, not the GPU's)"
    recs = ["raise the pod's memory limit/request (or the machine type), or cut host memory: DataLoader num_workers "
            "and prefetch, pinned-memory buffers, dataset caches held in RAM"]
    c = candidate("oom.container", "oom", what, 0.9, evs[:2] + exits[:1], f, ranks=ranks, nodes=nodes,
                  recommendations=recs)
    if c is None:  # never: `evs` is not empty, and candidate is None only without evidence
        return []
    if killed:
        worker = Finding(id="oom.container.worker_killed", role=Role.context, category="oom", ranks=ranks,
                         summary=(f"rank(s) {', '.join(map(str, ranks))}" if ranks else "a worker") +
                                 " died of SIGKILL: the kill the platform reports", evidence=killed[:2])
        c.facts["cross_source"] = True
        c.story = [c.finding, worker]
    return [c]


RULES = [cuda_oom, accelerator_alloc, host_oom, host_memory_full, container_oom]
