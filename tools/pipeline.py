"""`debugger ask` without an LLM: the scan, then the stages in STAGES, in order. Open → scan → flight recorder →
collectives → storage → stack dumps → hardware → a straggler's last activity → first answer → step times →
traceback tails → rank diff → verification.

`run` returns every stage's report (an Investigation), not only the answer, because three callers need more than
the Diagnosis: the eval's regex baseline reads the same scan (no second pass over the bytes), the agent's evidence
node hands the reports to its tools, and `ask` prints the diagnosis (and `--html` draws the reports). They all
start from this one function, so they can never disagree about what the logs showed.

Adding an analysis: a field on tools.investigation.Investigation, a `stage.py` in its package exporting a Stage, one
entry in STAGES below (where it must run: what it reads must be filled before it), and the rule that reads it.
"""

from __future__ import annotations

from collections.abc import Callable

from trainlog_debugger.tools.bundle.open import BundleError
from trainlog_debugger.tools.bundle.recognise import NOT_LOGS, recognised, unrelated_inputs
from trainlog_debugger.tools.bundle.parallel import fewer_collections
from trainlog_debugger.tools.diagnose import diagnose
from trainlog_debugger.tools.investigation import Context, Investigation, Stage
from trainlog_debugger.tools.model import Diagnosis
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import SharedReader, scan_bundle
from trainlog_debugger.tools.scan.result import ScanResult
from trainlog_debugger.tools.sources import resolve
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
    "trainlog_debugger.tools.activity:STAGE",                       # activity: a straggler: what was it doing?
    FIRST_ANSWER,                                                   # diagnosis
    "trainlog_debugger.tools.steps.stage:STAGE",                    # steps: no fault, or a time limit: slow? hung?
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
        raise BundleError(NOT_LOGS.format(root=bundle.root, files=len(scan.files)))
    if (why := unrelated_inputs(bundle, scan)):
        raise BundleError(why)
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
    extra = [n for n in inv.notes + scan.input_notes() + not_read(inv, bundle) if n not in diag.notes]
    if extra:
        diag = diag.model_copy(update={"notes": list(diag.notes) + extra})
    inv.diagnosis = verified(diag, bundle)
    return inv




def not_read(inv: Investigation, bundle, cap: int = 6) -> list[str]:
    """What of the input the answer does not rest on, in words (issue 30: `ask` never mentioned refused
    flight-recorder dumps or a file deleted mid-run): dumps the flight-recorder reader refused, files whose reading
    stopped on an error, and how many files were skipped and why. At most `cap` of each, then how many more."""
    out: list[str] = []
    fr = getattr(inv, "fr", None)
    refused = list(getattr(fr, "skipped", None) or [])
    out += [f"flight-recorder dump {s.get('file')} not read: {s.get('reason')}" for s in refused[:cap]]
    broken = [f for f in inv.scan.files if f.error]
    out += [f"{f.rel}: read stopped ({f.error}); the lines before it were read" for f in broken[:cap]]
    skipped = [s for s in getattr(bundle, "skipped", []) if not s.reason.startswith("case label file")]
    if skipped:
        reasons: dict[str, int] = {}
        for s in skipped:
            reasons[s.reason.split(":")[0][:60]] = reasons.get(s.reason.split(":")[0][:60], 0) + 1
        out.append(f"{len(skipped)} file(s) not read: " + "; ".join(f"{r} ({n})" for r, n in list(reasons.items())[:4])
                   + (" …" if len(reasons) > 4 else "") + " (`--json` coverage.skipped lists them)")
    more = len(refused) - cap + max(0, len(broken) - cap)
    return out + ([f"{more} more file(s) not read in full (`debugger scan`)"] if more > 0 else [])


def investigate(bundle, *, progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> Diagnosis:
    """The verified Diagnosis alone (what `debugger ask` prints)."""
    diag = run(bundle, progress=progress, workers=workers).diagnosis
    if diag is None:  # run() draws one or raises
        raise RuntimeError("tools.pipeline.run returned no diagnosis")
    return diag
