"""`debugger ask` without an LLM: the named stages, in order. Open → scan → collectives → extras → rules →
diagnosis → verification. The agent (later) starts from exactly this Diagnosis."""

from __future__ import annotations

from collections.abc import Callable

from trainlog_debugger.tools.diagnose import diagnose
from trainlog_debugger.tools.sources.ais.analyze import correlate, is_ais, read_sources
from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
from trainlog_debugger.tools.model import Diagnosis, Status
from trainlog_debugger.tools.steps.analyze import scan_steps
from trainlog_debugger.tools.sources.pytorch.collectives import analyze
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.summary import scan_bundle
from trainlog_debugger.tools.verify import verified


def investigate(bundle, *, progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> Diagnosis:
    scan = scan_bundle(bundle, workers=workers, progress=progress)
    fr = analyze_bundle(bundle) if any(s.kind == "fr_dump" for s in bundle.sources) else None
    nccl = analyze(scan)
    ais = None
    ais_src = [s for s in bundle.sources if is_ais(s)]
    if ais_src:  # the storage side, read once and correlated with the worker scan we already have
        files, _skipped = read_sources(ais_src)
        ais = correlate(files, scan, nccl) if files else None
    facts = RuleInputs(scan, nccl, fr=fr, ais=ais)
    diag = diagnose(facts)
    if diag.status == Status.completed:
        # nothing failed: was it slow? Step times need their own pass over the bytes, paid only here
        facts.steps = scan_steps(bundle, workers=workers)
        if facts.steps.outliers or facts.steps.regressions:
            diag = diagnose(facts)
    return verified(diag, bundle)
