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

__all__ = ["NOT_LOGS", "holds_training_logs", "recognised", "speaks_training", "unrelated_inputs"]

NOT_LOGS = ("no training-job logs recognised in {root}: {files} file(s) read, none has a line of PyTorch, NCCL, a "
            "launcher, a scheduler, a trainer or a storage daemon")

# A log line of a training stack that no catalog pattern knows yet (a JAX/XLA job, a new NCCL wording): a library,
# launcher or training word and a failure word on one line (`cuMemAllocAsync failed to allocate`, `Failed to create
# NCCL communicator`, `RuntimeError: ... cuda:2 and cpu`: an exception's class name counts as its failure word).
# One such line makes a bundle a job's log; a config file that merely names CUDA does not.
_STACK = (rb"(?:(?-i:cu[A-Z][a-zA-Z]+)|nccl\w*|cuda\w*|cudnn|cublas|torch\w*|pytorch|jax\w*|xla\w*|tpu|gpu\w*|nvidia\w*|"
          rb"rocm|rccl|gloo|horovod|deepspeed|megatron|nemo|lightning|accelerate|slurm\w*|srun|sbatch|mpirun|torchrun|"
          rb"rank|world_size|epoch|iteration|train(?:ing|er)?|optimizer|checkpoint\w*|dataloader)")
# (an errno is the kernel's own failure word: `ioctl(0x44 /dev/nvidiactl, ...) = 0 errno=22 (invalid argument)` in
# a sandbox's or strace's trace of a GPU job)
# (a warning class by its CamelCase name only, `UserWarning`: any word that merely ends in `warn`, case-blind, is one
# random base64 run in a few hundred, and 1 MiB of random text would read as a log)
_FAILURE_WORDS = (rb"\w*error|warn(?:ing)?|(?-i:[A-Z][a-z]\w*Warning)|fail(?:ed|ure)?|\w*exception|fatal|abort(?:ed)?|"
                  rb"timeout|timed out|killed|"
                  rb"segfault|segmentation fault|traceback|out of memory|resource_exhausted|errno|invalid argument")
_FAILURE = rb"(?:" + _FAILURE_WORDS + rb")"
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
    # GPUs counted or asked for (`Using 8 GPUs`, a scheduler's `0.0/1.0 GPU`, `num_gpus=4`, `CUDA_VISIBLE_DEVICES=0,1`):
    # a job's resources, which no config of a GPU stack's own (a driver or runtime config) writes this way
    # (not a model number: `RTX 3090 GPU`, `A100 GPU`)
    rb"|(?<![A-Z])(?<![A-Z] )\b\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)? ?(?-i:GPUs?)\b"
    rb"|\b(?:num_gpus|n_gpus|gpus_per_node|CUDA_VISIBLE_DEVICES)\s*[:=]\s*\d"
    # a training quantity said to have gone non-finite in words (`Loss is NaN, stopping training`, `grad norm became
    # inf`): the line a numerical failure's paste often is, with no number beside the word
    rb"|\b(?:loss|grad(?:ient)?s?|grad_norm|gradient norm)\b[^\n]{0,24}?\b(?:nan|inf|infinite|non-finite)\b"
    rb"|(?:^|\s)File \"[^\"\n]+\", line \d+, in \S"  # behind any prefix: `[rank8]: `, Ray's `(pid=12) `, pytest's `E   `
    # a native stack's frame as gdb (`bt`, `thread apply all bt`, pstack, py-spy --native's gdb-style) prints it
    # (gdb/stack.c print_frame: `#1  0x00007f3b21d4e5c2 in ncclCommInitRankFunc(...) () from .../libnccl.so.2`, or
    # `#3  train_step (x=...) at train.cc:42`) and as lldb does (`frame #1: 0x00007f3b21d4e5c2 libnccl.so.2`...):
    # a stack attached to a hang report, which only a running (or dumped) process has
    rb"|^\s*#\d{1,5} +(?:0x[0-9a-f]{1,16} in \S|[\w:~<>]+ \([^\n]*\) at \S+:\d)|^\s*(?:\* )?frame #\d{1,5}: 0x[0-9a-f]{1,16} \S"
    # NCCL's own lines without their host:pid:tid prefix, or with it and without the word NCCL (NCCL 2.3 and older);
    # an absl/gRPC status as JAX, XLA and TensorFlow print it
    # (`FAILED_PRECONDITION: ...`); a Ray worker process's title (`ray::WorkerDict.generate`)
    rb"|\bNCCL (?:INFO|WARN|ERROR|TRACE)\b|^\S+:\d+:\d+ \[\d+\] (?:INFO|WARN) "
    rb"|(?-i:\b(?:FAILED_PRECONDITION|RESOURCE_EXHAUSTED|DEADLINE_EXCEEDED|UNAVAILABLE|INVALID_ARGUMENT|INTERNAL|"
    rb"ABORTED|UNIMPLEMENTED|DATA_LOSS|OUT_OF_RANGE|PERMISSION_DENIED|ALREADY_EXISTS|UNAUTHENTICATED): \S)"
    rb"|\bray::[A-Za-z_]\w*"
    # a loop's tqdm bar (HF Trainer, Accelerate, Lightning's TQDM bar): `12/11084 [00:14<6:56:29,  2.26s/it]`
    # and a data-preparation bar of the same loop (HF datasets' `Map`/`Running tokenizer on dataset`: examples/s,
    # older `ba/s`; a sampler's samples/s or tokens/s), not a download's bytes a second
    rb"|\b\d+/\d+ \[\d+:\d\d(?::\d\d)?<[\d:?]+, +[\d.?]+ ?(?:s/it|it/s|examples/s|ex/s|ba/s|samples/s|tokens/s)\b"
    # Lightning's Trainer banner and model summary, printed at the start of every fit whatever the accelerator
    # (lightning/pytorch/trainer/setup.py:164-167 `GPU available: False, used: False`, `TPU available: True, using: 8
    # TPU cores`; utilities/model_summary/model_summary.py:479 `Trainable params`, which PEFT's summary prints too;
    # 0.7's `training on 8 TPU cores` (trainer.py:605) and its summary table's `| Name | Type | Params` header
    # (core/memory.py:142))
    rb"|\b(?-i:[GTIH]PU) available: (?-i:True|False)\b|\btrainable params\b|\btraining on \d+ (?-i:TPU|GPU) cores?\b"
    rb"|(?-i:\|\s*Name\s*\|\s*Type\s*\|\s*Params)\b"
    # how a job is launched, echoed by the script or pasted above its output (torchrun, the older
    # `python -m torch.distributed.launch`, `accelerate launch`, the deepspeed launcher, their per-node options)
    rb"|\btorch\.distributed\.(?:launch|run)\b|\btorchrun\b|\baccelerate launch\b|\bdeepspeed --\w"
    rb"|--(?:nproc[_-]per[_-]node|nnodes|node[_-]rank|num[_-]processes|num[_-]gpus)\b"
    # the HF examples' and Trainer's banners and the counts they print (transformers trainer.py `***** Running
    # training *****`, `Num Epochs = 3`; the 2019 examples' `Process rank: -1, device: cuda:0, n_gpu: 4`), and a
    # line of a training library's own logger in the examples' format `%(asctime)s - %(levelname)s - %(name)s -`
    rb"|\*{5} Running (?:training|evaluation|prediction|predict|eval)\b|\bProcess rank: -?\d|\bn_gpu\b:? ?\d"
    rb"|\bNum (?:examples|Epochs|train epochs) = \d"
    rb"| - (?-i:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) - (?:transformers|pytorch_transformers|pytorch_pretrained_bert|"
    rb"torch|lightning|pytorch_lightning|deepspeed|accelerate|datasets|peft|trl|megatron|nemo)\b)")
_HEAD_BYTES = 64 << 10
PASTE_MAX = 64 << 10
# a setting or a comment, not a report: `log_min_messages = warning`, `# retries on failure` (not `key: value`: that
# is also how log lines open, `srun: error: ...`, `RuntimeError: ...`)
_SETTING_LINE = re.compile(rb"\s*(?:[#;]|//|[\w.\-\[\]]+\s*=)")
# a failure reported in words, as a line of a paste (what _failure_paste reads): the failure words above and the
# ones the ecosystem's messages use for a resource that gave out or refused
_PASTE_FAILURE = re.compile(rb"(?i)\b(?:" + _FAILURE_WORDS + rb"|overflow\w*|refused|denied|unreachable|"
                            rb"corrupt\w*|unable to|cannot|could not|not found|no such|exhausted|lost|crash\w*|"
                            rb"hang(?:s|ing)?|hung|stuck|terminated|core dumped|terminate called|bad_alloc|"
                            # how a process's end is reported when it was not a normal one (`Exited with exit code
                            # 137`, `exit status 1`, `non-zero exit`, `received signal 9`, `SIGSEGV`), and a mismatch
                            # (`size mismatch`, Lua torch's `THTensorMath.c:706`; a version mismatch)
                            rb"exit(?:ed)? (?:with )?(?:exit )?(?:code|status) [1-9]\d*|non-zero|signal \d+|"
                            rb"SIG(?:KILL|TERM|SEGV|ABRT|BUS|ILL|FPE|INT|HUP)|mismatch\w*)\b"
                            # the same words as a Chinese-speaking user's paste says them (error, failed, exception,
                            # timed out, ran out of GPU / host memory, crashed, stuck): many training threads are
                            rb"|(?-i:\xe9\x94\x99\xe8\xaf\xaf|\xe5\xa4\xb1\xe8\xb4\xa5|\xe5\xbc\x82\xe5\xb8\xb8|"
                            rb"\xe8\xb6\x85\xe6\x97\xb6|\xe6\x98\xbe\xe5\xad\x98\xe4\xb8\x8d\xe8\xb6\xb3|"
                            rb"\xe5\x86\x85\xe5\xad\x98\xe4\xb8\x8d\xe8\xb6\xb3|\xe5\xb4\xa9\xe6\xba\x83|"
                            rb"\xe5\x8d\xa1\xe4\xbd\x8f)")
_HEAD_FILES = 512
# what a one-file paste speaks of when it speaks of training (issue 25: "a file that speaks of ranks, GPUs, CUDA,
# NCCL, torch, epochs, steps, loss or batches is read"): the training stack's own names as words (not inside a path,
# a host name or a file name: `/usr/local/cuda-12.4/lib`, `gpu-node-12`, `cuda.conf` name no job), and the loop's
# quantities only counted (`120 batches`, `steps: 1000`): as bare English words (`to step to`, `LOSS OF USE`) they are
# every manual's and licence's. Read on lines that are neither a setting nor a comment (_SETTING_LINE).
# The other stacks' own names count the same: JAX, XLA and TPUs (absl/glog INFO lines of a multi-host start-up,
# `Connecting to JAX distributed service`), AMD's ROCm and RCCL, gloo, MPI's launcher, TensorFlow and Keras.
_PASTE_TRAINING = re.compile(rb"(?i)(?<![\w/-])(?:(?:py)?torch(?:run)?|cuda|nccl|gpus?|dataloader|deepspeed|megatron|"
                             rb"nvidia-smi|horovod|slurm|srun|sbatch|jax|xla|tpus?|rocm|rccl|gloo|mpirun|tensorflow|"
                             rb"keras)(?![\w/-])(?!\s*[<>=!~])"  # not `torch<=2.4` (pip)
                             rb"(?!\.(?:conf|cfg|ini|so|h|hpp|cc?|py|txt|ya?ml|json|toml|log|sh|deb|rpm)\b)"
                             rb"|\b\d+ (?:ranks|epochs|steps|batches|iterations)\b"
                             rb"|\b(?:ranks?|epochs?|steps?|loss|batch(?:es)?|iterations?)\s*[:=]\s*\d")
# a training loop's words: one alone is every manual's (`to step to`, `LOSS OF USE`), two different ones on the
# lines of one paste (`loss` and `epoch`, `rank` and `gradient`) are a job's
_LOOP_WORD = re.compile(rb"(?i)\b(rank|epoch|step|loss|batch|iteration|gradient|optimizer|learning rate|checkpoint|"
                        rb"training|trainer)(?:e?s)?\b")


def recognised(scan, bundle) -> bool:
    """Whether anything in the bundle is a training job's log: a catalog line (any tier, job facts included), a
    rank label, a file the detector recognised as a known producer (not merely `generic` text), or, failing all
    that, in the head of a file, a training-stack failure line (_STACK_LOG_LINE) or a line of a training loop or a
    traceback (_TRAINING_LINE). A source tree, /etc or a folder of images has none of these, and a verdict on it
    would be made up; anything that speaks of training is read (issue 25: never refuse a training log)."""
    return bool(scan.patterns or scan.coverage.seen_ranks or any(s.kind != GENERIC for s in bundle.sources)
                or _heads_speak(bundle) or _failure_paste(bundle))


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


def speaks_training(head: bytes) -> bool:
    """Whether the first bytes of a stream hold a training-stack failure line or a training loop's line (what a
    piped log is judged by before it is copied whole)."""
    return bool(_STACK_LOG_LINE.search(head) or _TRAINING_LINE.search(head))


def _failure_paste(bundle) -> bool:
    """One text file (a paste) with a line that reports a failure in any words (`Cassini Event Queue overflow`,
    `connection refused`, `Killed`), or that speaks of training at all (the GPUs, torch, a counted step:
    _PASTE_TRAINING; two different words of a training loop: _LOOP_WORD): a user asking about the text in front of
    them, which `ask` reads and answers as far as it supports (inconclusive when nothing knows it; never `completed`
    without an end). A line that is a setting or a comment (`log_min_messages = warning`) says nothing. Not a folder:
    /etc, a source tree or a dataset folder has many files, and their single files (a hosts file, a sources list)
    report no failure. A long file is judged by its two ends (_ends: where a console's failure is, after however
    long a preamble of installs and downloads)."""
    if len(bundle.sources) != 1:
        return False
    text = _ends(bundle.sources[0], PASTE_MAX)
    if any(True for _m in _said(_PASTE_FAILURE, text)) or any(True for _m in _said(_PASTE_TRAINING, text)):
        return True
    words = set()
    for m in _said(_LOOP_WORD, text):
        words.add(m.group(1).lower())
        if len(words) >= 2:
            return True
    return False


def _ends(src, n: int) -> bytes:
    """The first `n` bytes of a source and, when it is longer, its last `n` from the first line start in them (a
    compressed source: the first `n` only, a tail of it costs its whole decompression); b"" when unreadable."""
    try:
        with src.open() as fh:
            head = fh.read(n)
            if src.gzip or src.size <= 2 * n:
                return head + fh.read(n) if not src.gzip and len(head) == n else head
            fh.seek(src.size - n)
            tail = fh.read(n)
    except READ_ERRORS:
        return b""
    return head + b"\n" + tail[tail.find(b"\n") + 1:]


def _said(rx: re.Pattern, text: bytes):
    """The matches of `rx` in `text` on lines that are neither a setting nor a comment (_SETTING_LINE)."""
    for m in rx.finditer(text):
        if not _SETTING_LINE.match(text, text.rfind(b"\n", 0, m.start()) + 1, m.end()):
            yield m


def _heads_speak(bundle) -> bool:
    """Whether the head or the tail (_ends) of one of the first _HEAD_FILES files speaks training: a rank's log
    whose first 64 KiB are a preamble (installs, a config dump) says it at its end, where it failed."""
    return any(speaks_training(_ends(src, _HEAD_BYTES)) for src in bundle.sources[:_HEAD_FILES])


UNRELATED_GAP_S = 6 * 3600  # two inputs whose logs are this far apart in time, on no common host: not one job


def unrelated_inputs(bundle, scan) -> str | None:
    """One line saying why two inputs of one command are not one job, or None. Several paths are read as ONE job
    (a node's directory each, the launcher's log beside the ranks'): that is right when they share a host or their
    times overlap. Two inputs on disjoint hosts whose logs are more than UNRELATED_GAP_S apart are two jobs, and
    merging them made one job whose time range ran backwards (issue 29). Inputs whose times or hosts are unknown
    are not judged (nothing says they differ)."""
    inputs = getattr(bundle, "inputs", [])
    if len(inputs) < 2:
        return None
    facts = []
    for name in inputs:
        files = [f for f in scan.files if f.rel == name or f.rel.startswith(f"{name}/")]
        nodes = set().union(*(f.nodes for f in files)) if files else set()
        times = [t for f in files for t in (f.first_time, *(ll.time for ll in f.last_lines.values()))
                 if t is not None and (t.job_seconds() is not None)]
        secs = [t.job_seconds() for t in times]
        years = {t.year for t in times if t.year is not None}
        facts.append((name, nodes, (min(secs), max(secs)) if secs else None, years))
    for i, (a, na, sa, ya) in enumerate(facts):
        for b, nb, sb, yb in facts[i + 1:]:
            if not (na and nb and sa and sb) or na & nb:
                continue
            years_apart = bool(ya and yb and not ya & yb)
            gap = max(sb[0] - sa[1], sa[0] - sb[1])
            if years_apart or gap > UNRELATED_GAP_S:
                apart = "in different years" if years_apart else f"{gap / 3600:.0f} h apart"
                return (f"{a} and {b} look like two jobs (no host in common, their logs {apart}): analyse them "
                        f"separately, or give one job's files together")
    return None
