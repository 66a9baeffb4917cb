"""`debugger ask` without an LLM: the named stages, in order. Open → scan → collectives → extras → rules →
diagnosis → verification.

`run` returns every stage's report, not only the answer, because three callers need more than the Diagnosis: the
eval's regex baseline reads the same scan (no second pass over the bytes), the agent's evidence node hands the
reports to its tools, and `ask` prints the diagnosis. They all start from this one function, so they can never
disagree about what the logs showed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from trainlog_debugger.tools.bundle.open import READ_ERRORS, BundleError
from trainlog_debugger.tools.bundle.parallel import fewer_collections
from trainlog_debugger.tools.diagnose import diagnose
from trainlog_debugger.tools.model import Diagnosis, Status
from trainlog_debugger.tools.rankdiff.analyze import DiffResult, diff_bundle
from trainlog_debugger.tools.rules.asymmetry import MIN_RANKS
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.scan.result import ScanResult
from trainlog_debugger.tools.sources.detect import GENERIC, HW_KINDS
from trainlog_debugger.tools.sources.messages import catalog
from trainlog_debugger.tools.sources.ais.analyze import AisReport, correlate, is_ais, read_sources
from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
from trainlog_debugger.tools.sources.flight_recorder.report import FRReport
from trainlog_debugger.tools.sources.pytorch.collectives import NcclReport, analyze
from trainlog_debugger.tools.steps.analyze import scan_steps
from trainlog_debugger.tools.steps.report import StepReport
from trainlog_debugger.tools.verify import verified


@dataclass
class Investigation:
    """Every report the deterministic pipeline made for one bundle, and the verified diagnosis drawn from them.

    scan: the one pass over every line of every rank (always); nccl: the per-rank collective state (always);
    fr: flight-recorder dumps (only when the bundle holds some); ais: the storage side (only with AIStore daemon
    logs); steps: step times (only when no fault was found, to tell `slow` from the rest: read in the scan's own
    pass from every file without a fatal line, which is every file of such a bundle, the others read after the
    scan only then); diff: the rank diff (only when the answer is not decisive and at least MIN_RANKS
    ranks have logs: the rank that differs, for failures the catalog does not know; another pass, paid only then);
    diagnosis: what `debugger ask` prints, every citation re-read from disk.
    """

    scan: ScanResult
    nccl: NcclReport
    diagnosis: Diagnosis
    fr: FRReport | None = None
    ais: AisReport | None = None
    steps: StepReport | None = None
    diff: DiffResult | None = None


def run(bundle, *, progress: Callable[[int, int], None] | None = None, workers: int | None = None,
        scan: ScanResult | None = None) -> Investigation:
    """All stages over an open bundle. `scan`: a ScanResult of this bundle already made (it is not made again).

    The cycle collector runs less often for the whole run, not only the scan (tools.bundle.parallel
    .fewer_collections): the stages after the scan keep its ~500,000 objects alive at 4,096 ranks, and each full
    collection re-walked them (a third of the diagnosis's 0.9 s there)."""
    with fewer_collections():
        return _run(bundle, progress, workers, scan)


def _run(bundle, progress, workers, scan) -> Investigation:
    read_steps: dict = {}  # step times of files without fatal lines, read in the scan's own pass (tools.scan.driver)
    scan = scan if scan is not None else scan_bundle(bundle, workers=workers, progress=progress, steps_out=read_steps)
    if not recognised(scan, bundle):
        raise BundleError(f"no training-job logs recognised in {bundle.root}: {len(scan.files)} file(s) read, none "
                          "has a line of PyTorch, NCCL, a launcher, a scheduler, a trainer or a storage daemon")
    fr = analyze_bundle(bundle) if any(s.kind == "fr_dump" for s in bundle.sources) else None
    nccl = analyze(scan)
    ais = None
    ais_src = [s for s in bundle.sources if is_ais(s)]
    if ais_src:  # the storage side, read once and correlated with the worker scan we already have
        files, _skipped = read_sources(ais_src)
        ais = correlate(files, scan, nccl) if files else None
    stacks, stack_notes = None, []
    framed = {f.rel for f in scan.files if any(h.pattern.startswith("pyspy.") for h in f.hits)}
    if framed or any(s.kind == "pyspy" for s in bundle.sources):  # stack dumps of a hung job: a record per process
        from trainlog_debugger.tools.stacks.read import read_stacks
        stacks, stack_notes = read_stacks(bundle, framed)
    hardware, hw_notes = None, []
    if any(s.kind in HW_KINDS for s in bundle.sources):  # hardware/fabric snapshots: records per node, compared
        from trainlog_debugger.tools.hw.read import read_hardware
        hardware, hw_notes = read_hardware(bundle, scan, HW_KINDS)
    inputs = RuleInputs(scan, nccl, fr=fr, ais=ais, stacks=stacks, hardware=hardware, messages=catalog)
    if stacks:  # dumps named by pid only: the rank the job's own lines gave that pid (NCCL init, torchrun's report)
        from trainlog_debugger.tools.stacks.report import attach_ranks, launcher_pids
        attach_ranks(stacks, launcher_pids(inputs))
    diag = diagnose(inputs)
    if diag.category == "none":
        # no fault found (a proven normal end, or no proof either way): was it slow? The scan read the step times of
        # every file without a fatal line (all of them, in such a bundle); the rest are read here
        inputs.steps = scan_steps(bundle, workers=workers, done=read_steps)
        if inputs.steps.outliers or inputs.steps.regressions:
            diag = diagnose(inputs)
    if diag.category == "none" and diag.status == Status.inconclusive:
        # nothing failed visibly: do the logs stop inside a stack trace whose header or exception was cut off (a
        # paste of frames)? A frame is printed only when something raised
        inputs.tails, unread = traceback_tails(bundle, scan)
        if inputs.tails:
            diag = diagnose(inputs)
        if unread:
            stack_notes = stack_notes + [f"the ends of {len(scan.files) - unread} of {len(scan.files)} files were read "
                                         f"for a cut-off stack trace (at most {_TAIL_FILES} files, each of at most "
                                         f"{_TAIL_MAX_BYTES >> 20} MiB; no other file was looked at for one)"]
    if diag.status == Status.inconclusive and len(scan.coverage.seen_ranks) >= MIN_RANKS:
        inputs.diff = diff_bundle(bundle, workers=workers)
        if inputs.diff.only:
            diag = diagnose(inputs)
    # what the input itself made the analysis refuse or cut (an implausible number, a budget, a partial file, a
    # capped dump) is said in the answer, never silent: for every caller (ask, eval, the agent, Slack)
    extra = [n for n in stack_notes + hw_notes + scan.input_notes() if n not in diag.notes]
    if extra:
        diag = diag.model_copy(update={"notes": list(diag.notes) + extra})
    return Investigation(scan=scan, nccl=nccl, diagnosis=verified(diag, bundle), fr=fr, ais=ais, steps=inputs.steps,
                         diff=inputs.diff)


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


# a frame of a Python traceback or of c10's C++ backtrace (`frame #3: c10d::ProcessGroupNCCL::watchdogHandler()`)
_FRAME = re.compile(r'^\s*(?:File "[^"\n]+", line \d+, in \S|frame #\d+: \S)')
_TAIL_LINES = 40
_TAIL_FILES = 64
_TAIL_MAX_BYTES = 64 << 20  # the tail is read through the re-reader, from the start: only files this small


def traceback_tails(bundle, scan: ScanResult) -> tuple[list, int]:
    """(the last frame line in the last _TAIL_LINES lines of each file, as Evidence: where a log stops inside a stack
    trace, read from disk and numbered as the file is; how many files were left unread by the caps: at most
    _TAIL_FILES files, of at most _TAIL_MAX_BYTES each)."""
    from trainlog_debugger.tools.bundle.reread import read_window
    from trainlog_debugger.tools.model import Evidence

    sources = {s.rel: s for s in bundle.sources}
    out = []
    unread = max(0, len(scan.files) - _TAIL_FILES)
    for fs in scan.files[:_TAIL_FILES]:
        src = sources.get(fs.rel)
        if src is None or fs.kind in HW_KINDS or not fs.lines:
            continue
        if (getattr(src, "size", 0) or 0) > _TAIL_MAX_BYTES:
            unread += 1
            continue
        try:
            w = read_window(src, fs.lines, before=_TAIL_LINES, after=0)
        except READ_ERRORS:
            continue
        frames = [(n, t) for n, t in w.lines if _FRAME.match(t)]
        if frames:
            n, t = frames[-1]
            rank = next(iter(fs.ranks), None) if len(fs.ranks) == 1 else None
            out.append(Evidence(file=fs.rel, line=n, text=t, kind=fs.kind, rank=rank))
    return out, unread


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
    return run(bundle, progress=progress, workers=workers).diagnosis
