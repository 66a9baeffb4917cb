"""Whether a bundle holds a training job's logs at all: the one check every analysis command makes before it
answers (issue 29: `scan`, `nccl`, `steps`, `diff` and `grep` on /etc/apt printed an empty report and exited 0
where `ask` exited 2). A source tree, /etc or a folder of images has no training line, and any report on it would
be made up; anything that speaks of training is read (issue 25: never refuse a training log).

Light on purpose (no rules, no pipeline): the fast path of `debugger scan` calls it.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.sources.detect import GENERIC

__all__ = ["NOT_LOGS", "holds_training_logs", "recognised"]

NOT_LOGS = ("no training-job logs recognised in {root}: {files} file(s) read, none has a line of PyTorch, NCCL, a "
            "launcher, a scheduler, a trainer or a storage daemon")

# A log line of a training stack that no catalog pattern knows yet (a JAX/XLA job, a new NCCL wording): a library,
# launcher or training word and a failure word on one line (`cuMemAllocAsync failed to allocate`, `Failed to create
# NCCL communicator`). One such line makes a bundle a job's log; a config file that merely names CUDA does not.
_STACK = (rb"(?:(?-i:cu[A-Z][a-zA-Z]+)|nccl\w*|cuda\w*|cudnn|cublas|torch\w*|pytorch|jax\w*|xla\w*|tpu|gpu\w*|nvidia\w*|"
          rb"rocm|rccl|gloo|horovod|deepspeed|megatron|nemo|lightning|accelerate|slurm\w*|srun|sbatch|mpirun|torchrun|"
          rb"rank|world_size|epoch|iteration|train(?:ing|er)?|optimizer|checkpoint\w*|dataloader)")
_FAILURE = (rb"(?:error|warn(?:ing)?|fail(?:ed|ure)?|exception|fatal|abort(?:ed)?|timeout|timed out|killed|segfault|"
            rb"traceback|out of memory|resource_exhausted)")
_STACK_LOG_LINE = re.compile(rb"(?im)^[^\n]*?(?:\b" + _STACK + rb"\b[^\n]*\b" + _FAILURE + rb"\b|\b" + _FAILURE
                             + rb"\b[^\n]*\b" + _STACK + rb"\b)")
# What a training job prints even when nothing failed and no library is named (issue 25: a user's own per-rank
# prints, a loop's progress): a training quantity followed by its value (`rank 3`, `[Rank 0]`, `epoch: 2`,
# `step=100`, `loss 2.31`, `GPU 4`), or a frame of a Python traceback (`File "...", line N, in f`), which only a
# running program prints. A config file (`checkpoint_timeout = 5min`), a hosts file (`gpu-node-12`) or a library
# path (`cuda-12.4`) has neither; program source is skipped before the scan (tools.bundle.open).
_TRAINING_LINE = re.compile(
    rb"(?im)(?:\b(?:rank|local_rank|global_rank|world_size|epoch|global_step|step|iter|iteration|loss|train_loss|"
    rb"val_loss|batch|batch_size|micro_batch|gpu|device|lr|learning_rate|grad_norm|tokens)\b['\"]?\s*[:=#]?\s*\[?\s*"
    rb"(?:\d|nan\b|inf\b)"
    rb"|^\s*File \"[^\"\n]+\", line \d+, in \S"
    # NCCL's own lines without their host:pid:tid prefix, or with it and without the word NCCL (NCCL 2.3 and older);
    # an absl/gRPC status as JAX, XLA and TensorFlow print it
    # (`FAILED_PRECONDITION: ...`); a Ray worker process's title (`ray::WorkerDict.generate`)
    rb"|\bNCCL (?:INFO|WARN|ERROR|TRACE)\b|^\S+:\d+:\d+ \[\d+\] (?:INFO|WARN) "
    rb"|(?-i:\b(?:FAILED_PRECONDITION|RESOURCE_EXHAUSTED|DEADLINE_EXCEEDED|UNAVAILABLE|INVALID_ARGUMENT|INTERNAL|"
    rb"ABORTED|UNIMPLEMENTED|DATA_LOSS|OUT_OF_RANGE|PERMISSION_DENIED|ALREADY_EXISTS|UNAUTHENTICATED): \S)"
    rb"|\bray::[A-Za-z_]\w*)")
_HEAD_BYTES = 64 << 10
_HEAD_FILES = 512


def recognised(scan, bundle) -> bool:
    """Whether anything in the bundle is a training job's log: a catalog line (any tier, job facts included), a
    rank label, a file the detector recognised as a known producer (not merely `generic` text), or, failing all
    that, in the head of a file, a training-stack failure line (_STACK_LOG_LINE) or a line of a training loop or a
    traceback (_TRAINING_LINE). A source tree, /etc or a folder of images has none of these, and a verdict on it
    would be made up; anything that speaks of training is read (issue 25: never refuse a training log)."""
    return bool(scan.patterns or scan.coverage.seen_ranks or any(s.kind != GENERIC for s in bundle.sources)
                or _heads_speak(bundle))


def holds_training_logs(bundle, scan=None) -> bool:
    """`recognised` for a command that made no catalog scan of its own (`scan`: the one it made, if any): the
    producers and the files' heads first (no pass over the bytes); only a bundle where those find nothing is
    scanned, so a big bundle of real logs never pays for the check."""
    if scan is not None:
        return recognised(scan, bundle)
    if any(s.kind != GENERIC for s in bundle.sources) or _heads_speak(bundle):
        return True
    from trainlog_debugger.tools.scan.driver import scan_bundle
    return recognised(scan_bundle(bundle), bundle)


def _heads_speak(bundle) -> bool:
    for src in bundle.sources[:_HEAD_FILES]:
        try:
            with src.open() as fh:
                head = fh.read(_HEAD_BYTES)
                if _STACK_LOG_LINE.search(head) or _TRAINING_LINE.search(head):
                    return True
        except READ_ERRORS:
            continue
    return False
