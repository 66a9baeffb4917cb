"""Re-read every cited line from the raw files before a diagnosis is shown: nothing reaches a report uncited, and
nothing cited may differ from the file.

Why here and not trusted from the scan: evidence is assembled by several tools (some lines are derived, e.g. a
traceback's final exception line), an LLM may add citations later, and the claim "rank 17, file:line, this text"
is what the user acts on at 3 AM. The reading itself is tools/bundle/reread.py's (one reader for every caller);
this module decides what a failed citation does to the diagnosis.
"""

from __future__ import annotations

from trainlog_debugger.tools.bundle.reread import CitationProblem, check_citations
from trainlog_debugger.tools.model import Diagnosis, Evidence, Status


def check(diag: Diagnosis, bundle) -> list[CitationProblem]:
    """Every citation of the diagnosis that does not stand: files not in the bundle, lines that do not exist or
    differ, dump entries that differ."""
    return check_citations(diag.evidence(), {s.rel: s for s in bundle.sources})


def verified(diag: Diagnosis, bundle) -> Diagnosis:
    """The diagnosis with every unverifiable citation removed, `verified` set, and the problems in `notes`. A
    trigger that loses its proof turns the diagnosis inconclusive."""
    problems = check(diag, bundle)
    if not problems:
        return diag.model_copy(update={"verified": True})
    bad = {p.cite() for p in problems if p.line is not None}
    bad_files = {p.file for p in problems if p.line is None}

    def ok(ev: Evidence) -> bool:
        return ev.cite() not in bad and ev.file not in bad_files

    chain = []
    for i, f in enumerate(diag.chain):
        evs = [e for e in f.evidence if ok(e)]
        if evs:
            chain.append(f.model_copy(update={"evidence": evs}))
        elif i == 0:
            diag = diag.model_copy(update={"status": Status.inconclusive, "confidence": "low"})
    timeline = [t for t in diag.timeline if ok(t.evidence)]
    alts = [a.model_copy(update={"evidence": [e for e in a.evidence if ok(e)]}) for a in diag.alternatives]
    return diag.model_copy(update={"chain": chain, "timeline": timeline, "alternatives": alts, "verified": False,
                                   "notes": diag.notes + [f"citation dropped: {p}" for p in sorted(set(map(str, problems)))]})
