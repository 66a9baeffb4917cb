"""What `debugger ask` knows about one bundle (`Investigation`), and the unit that adds to it (`Stage`).

Why one typed record and not a bag per consumer: the rules, the agent's tools, the HTML page and the eval all read
the same reports, and before this record the rules had their own copy (`RuleInputs` with nine optional fields)
while the stack dumps and hardware snapshots never reached the agent or the page at all. Every report a stage makes
now lands in one field here, and the rules read it through a read-only view (tools.rules.base.RuleInputs).

Why stages: each analysis beyond the scan is paid only when the bundle or the answer so far calls for it (a
flight-recorder dump in the bundle; no fault found, so: was it slow?). A stage says when it runs and what it makes;
tools.pipeline.STAGES lists them in the order they run, and its loop is the only code that calls them:

    when(ctx) -> bool              read the bundle and the investigation so far (ctx.inv), never the disk
    run(ctx)  -> (report, notes)   the report goes into Investigation.<fills>; the notes (what the input made the
                                   analysis refuse or cut) into Investigation.notes, and from there into the answer
    redraws(report) -> bool        a follow-up after the first answer: whether the answer is drawn again with it

Adding an analysis: its field below, a `stage.py` in its package exporting STAGE, one entry in
tools.pipeline.STAGES, and the rule that reads the field (tools/rules/).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainlog_debugger.tools.bundle.open import Bundle
    from trainlog_debugger.tools.model import Diagnosis, Evidence
    from trainlog_debugger.tools.rankdiff.report import DiffResult
    from trainlog_debugger.tools.rules.base import RuleInputs
    from trainlog_debugger.tools.scan.result import ScanResult
    from trainlog_debugger.tools.sources.ais.analyze import AisReport
    from trainlog_debugger.tools.sources.flight_recorder.report import FRReport
    from trainlog_debugger.tools.sources.hw.record import Record
    from trainlog_debugger.tools.sources.pyspy.report import Stack
    from trainlog_debugger.tools.sources.pytorch.collectives import NcclReport
    from trainlog_debugger.tools.steps.report import StepReport


@dataclass
class Investigation:
    """Every report the deterministic pipeline made for one bundle, and the verified diagnosis drawn from them.

    The field order is the order the host-masking redactor numbers names in for the HTML page
    (tools.redact.redact_tree walks fields in order): fields added later go at the end, so the page of a bundle
    without them stays the same.
    """

    scan: ScanResult
    """The one pass over every line of every rank (always, before any stage)."""
    nccl: NcclReport | None = None
    """The per-rank collective state (always, by the first stage that runs on every bundle)."""
    diagnosis: Diagnosis | None = None
    """What `debugger ask` prints, every citation re-read from disk. None only while the stages run: the first
    answer is a stage of its own, drawn again by the follow-ups that find something."""
    fr: FRReport | None = None
    """Flight-recorder dumps (only when the bundle holds some)."""
    ais: AisReport | None = None
    """The storage side (only with AIStore daemon logs, correlated with the worker scan and `nccl`)."""
    steps: StepReport | None = None
    """Step times (only when no fault was found, to tell `slow` from the rest); the agent fills it on request."""
    diff: DiffResult | None = None
    """The rank diff (only when the answer is not decisive and enough ranks have logs); the agent fills it on
    request."""
    stacks: list[Stack] = field(default_factory=list)
    """Each dumped process's main-thread stack (py-spy, faulthandler, probing dumps), with the rank the job's own
    lines gave its pid; empty: no dump in the bundle."""
    hardware: list[Record] = field(default_factory=list)
    """Hardware and fabric snapshot values, each with its node (nvidia-smi -q, ibstat, perfquery, nccl-tests, dcgmi,
    topo); empty: no snapshot in the bundle."""
    activity: dict[int, list[Evidence]] = field(default_factory=dict)
    """A straggler's last lines before the hang's own reports, by rank, the latest first (read only when the collective
    analysis found a straggler: tools/activity.py)."""
    tails: list[Evidence] = field(default_factory=list)
    """Where logs stop inside a stack trace whose exception line is cut off (read only when nothing else failed
    visibly)."""
    notes: list[str] = field(default_factory=list)
    """What the input made a stage refuse or cut, in stage order: said in the answer, never silent."""


@dataclass
class Context:
    """What a stage reads: the open bundle, the investigation so far, the rules' view of it (`hits`, `fields_of`:
    the stack dumps name their processes by the pids the job's own lines state), the caller's worker count, and
    what the scan's own pass read for a later stage (the step times of files without a fatal line, by file index:
    tools.scan.driver)."""

    bundle: Bundle
    inv: Investigation
    rules: RuleInputs
    workers: int | None = None
    read_in_scan: dict = field(default_factory=dict)


def _never(_report: Any) -> bool:
    return False


@dataclass(frozen=True)
class Stage:
    """One analysis of the pipeline. `fills`: the Investigation field its report goes into (see the module docstring
    for `when`, `run` and `redraws`)."""

    fills: str
    when: Callable[[Context], bool]
    run: Callable[[Context], tuple[Any, list[str]]]
    redraws: Callable[[Any], bool] = _never
