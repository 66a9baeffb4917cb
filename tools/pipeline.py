"""`debugger ask` without an LLM: the scan, then the stages in STAGES, in order. Open → scan → flight recorder →
collectives → storage → stack dumps → hardware → first answer → step times → traceback tails → rank diff
→ verification.

`run` returns every stage's report (an Investigation), not only the answer, because three callers need more than
the Diagnosis: the eval's regex baseline reads the same scan (no second pass over the bytes), the agent's evidence
node hands the reports to its tools, and `ask` prints the diagnosis (and `--html` draws the reports). They all
start from this one function, so they can never disagree about what the logs showed.

Adding an analysis: a field on tools.investigation.Investigation, a `stage.py` in its package exporting a Stage, one
entry in STAGES below (where it must run: what it reads must be filled before it), and the rule that reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.bundle.open import BundleError
from trainlog_debugger.tools.bundle.parallel import fewer_collections
from trainlog_debugger.tools.diagnose import diagnose
from trainlog_debugger.tools.investigation import Context, Investigation, Stage
from trainlog_debugger.tools.model import Diagnosis
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import SharedReader, scan_bundle
from trainlog_debugger.tools.scan.result import ScanResult
from trainlog_debugger.tools.sources import resolve
from trainlog_debugger.tools.sources.detect import GENERIC
from trainlog_debugger.tools.sources.messages import catalog
from trainlog_debugger.tools.verify import verified

__all__ = ["STAGES", "Investigation", "investigate", "recognised", "run"]


def _first_answer(ctx: Context) -> tuple[object, list[str]]:
    return diagnose(ctx.rules), []  # the module's `diagnose`, looked up when called (tests replace it)


# The diagnosis drawn from the evidence stages: the follow-ups below read it to decide whether they run.
FIRST_ANSWER = Stage("diagnosis", when=lambda _ctx: True, run=_first_answer)

# Every analysis after the scan, in the order it runs: each entry names its source's Stage ("module:attribute",
# imported when the pipeline first runs: tools.sources.resolve) or is the pipeline's own. The order is the data
# flow: the collective state before the storage correlation that reads it; the stack dumps after it (a dump's pid is
# ranked by the job's own lines); the follow-ups after the first answer, whose conditions they read.
STAGES: tuple[str | Stage, ...] = (
    "trainlog_debugger.tools.sources.flight_recorder.stage:STAGE",  # fr: flight-recorder dumps in the bundle
    "trainlog_debugger.tools.sources.pytorch.stage:STAGE",          # nccl: every rank's collective state (always)
    "trainlog_debugger.tools.sources.ais.stage:STAGE",              # ais: AIStore daemon logs, tied to `nccl`
    "trainlog_debugger.tools.sources.pyspy.stage:STAGE",            # stacks: py-spy / faulthandler dumps
    "trainlog_debugger.tools.sources.hw.stage:STAGE",               # hardware: nvidia-smi, ibstat, ... snapshots
    FIRST_ANSWER,                                                   # diagnosis
    "trainlog_debugger.tools.steps.stage:STAGE",                    # steps: no fault found: was it slow?
    "trainlog_debugger.tools.tails:STAGE",                          # tails: still nothing: a cut-off traceback?
    "trainlog_debugger.tools.rankdiff.stage:STAGE",                 # diff: still undecided: the rank that differs
)


def stages() -> list[Stage]:
    """STAGES as Stage objects (a reference is imported on first use)."""
    out = []
    for entry in STAGES:
        stage = resolve(entry) if isinstance(entry, str) else entry
        if not isinstance(stage, Stage):
            raise TypeError(f"{entry!r} names a {type(stage).__name__}, not a tools.investigation.Stage")
        out.append(stage)
    return out


def run(bundle, *, progress: Callable[[int, int], None] | None = None, workers: int | None = None,
        scan: ScanResult | None = None) -> Investigation:
    """All stages over an open bundle. `scan`: a ScanResult of this bundle already made (it is not made again).

    The cycle collector runs less often for the whole run, not only the scan (tools.bundle.parallel
    .fewer_collections): the stages after the scan keep its ~500,000 objects alive at 4,096 ranks, and each full
    collection re-walked them (a third of the diagnosis's 0.9 s there)."""
    with fewer_collections():
        return _run(bundle, progress, workers, scan)


def _run(bundle, progress, workers, scan) -> Investigation:
    from trainlog_debugger.tools.steps.parse import read_in_scan
    # step times of files without fatal lines, read in the scan's own pass (a reader passed to tools.scan.driver)
    read_steps = SharedReader(read_in_scan)
    scan = scan if scan is not None else scan_bundle(bundle, workers=workers, progress=progress, readers=[read_steps])
    if not recognised(scan, bundle):
        raise BundleError(f"no training-job logs recognised in {bundle.root}: {len(scan.files)} file(s) read, none "
                          "has a line of PyTorch, NCCL, a launcher, a scheduler, a trainer or a storage daemon")
    inv = Investigation(scan=scan)
    ctx = Context(bundle, inv, RuleInputs(inv, messages=catalog), workers=workers, read_in_scan=read_steps.got)
    for stage in stages():
        if not stage.when(ctx):
            continue
        report, notes = stage.run(ctx)
        setattr(inv, stage.fills, report)
        inv.notes += notes
        if inv.diagnosis is not None and stage.redraws(report):
            inv.diagnosis = diagnose(ctx.rules)
    diag = inv.diagnosis
    if diag is None:
        raise RuntimeError("tools.pipeline.STAGES drew no diagnosis (FIRST_ANSWER is missing)")
    # what the input itself made the analysis refuse or cut (an implausible number, a budget, a partial file, a
    # capped dump) is said in the answer, never silent: for every caller (ask, eval, the agent, Slack)
    extra = [n for n in inv.notes + scan.input_notes() if n not in diag.notes]
    if extra:
        diag = diag.model_copy(update={"notes": list(diag.notes) + extra})
    inv.diagnosis = verified(diag, bundle)
    return inv


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


def recognised(scan: ScanResult, bundle) -> bool:
    """Whether anything in the bundle is a training job's log: a catalog line (any tier, job facts included), a
    rank label, a file the detector recognised as a known producer (not merely `generic` text), or, failing all
    that, in the head of a file, a training-stack failure line (_STACK_LOG_LINE) or a line of a training loop or a
    traceback (_TRAINING_LINE). A source tree, /etc or a folder of images has none of these, and a verdict on it
    would be made up; anything that speaks of training is read (issue 25: never refuse a training log)."""
    if scan.patterns or scan.coverage.seen_ranks or any(s.kind != GENERIC for s in bundle.sources):
        return True
    for src in bundle.sources[:_HEAD_FILES]:
        try:
            with src.open() as fh:
                head = fh.read(_HEAD_BYTES)
                if _STACK_LOG_LINE.search(head) or _TRAINING_LINE.search(head):
                    return True
        except READ_ERRORS:
            continue
    return False


def investigate(bundle, *, progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> Diagnosis:
    """The verified Diagnosis alone (what `debugger ask` prints)."""
    diag = run(bundle, progress=progress, workers=workers).diagnosis
    if diag is None:  # run() draws one or raises
        raise RuntimeError("tools.pipeline.run returned no diagnosis")
    return diag
