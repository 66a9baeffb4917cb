"""Out of memory: the GPU's (CUDA caching allocator) or the host's (kernel / cgroup OOM killer)."""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate


def cuda_oom(f: RuleInputs):
    evs = f.hits("cuda.oom")
    if not evs:
        return []
    fx = f.fields_of(evs[0], "cuda.oom")
    ranks = f.ranks_of("cuda.oom")
    what = f"CUDA out of memory on rank(s) {', '.join(map(str, ranks[:8])) or '?'}"
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
    evs = f.hits("kernel.oom_kill", "slurm.oom_kill")
    evs += [e for e in f.hits("slurm.task_exit") if "Out Of Memory" in e.text]
    evs += [e for e in f.hits("loader.worker_killed") if "Killed" in e.text]
    evs += f.hits("process.host_alloc_failed")
    if not evs:
        return []
    return [candidate("oom.host", "oom", "the host OOM killer killed training processes (CPU memory)", 0.85, evs[:3], f,
                 recommendations=["lower DataLoader num_workers / prefetch, check for host memory leaks, or request more "
                                  "memory per task"])]


RULES = [cuda_oom, accelerator_alloc, host_oom]
