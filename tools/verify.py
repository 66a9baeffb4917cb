"""Re-read every cited line from the raw files before a diagnosis is shown: nothing reaches a report uncited, and
nothing cited may differ from the file.

Why here and not trusted from the scan: evidence is assembled by several tools (some lines are derived, e.g. a
traceback's final exception line), an LLM may add citations later, and the claim "rank 17, file:line, this text"
is what the user acts on at 3 AM. The reading itself is tools/bundle/reread.py's (one reader for every caller);
this module decides what a failed citation does to the diagnosis.

It also makes every statement true to the lines it cites (tools.statements: the signal, retry figure, a `None`
rank) once the lines stand: the last step before anything is shown, whoever wrote the statement.
"""

from __future__ import annotations

from trainlog_debugger.tools.bundle.reread import CitationProblem, check_citations
from trainlog_debugger.tools.model import Diagnosis, Evidence, Status
from trainlog_debugger.tools.lines.injection import injected
from trainlog_debugger.tools.statements import checked_statement


def check(diag: Diagnosis, bundle) -> list[CitationProblem]:
    """Every citation of the diagnosis that does not stand: files not in the bundle, lines that do not exist or
    differ, dump entries that differ."""
    return check_citations(diag.evidence(), {s.rel: s for s in bundle.sources})


def verified(diag: Diagnosis, bundle) -> Diagnosis:
    """The diagnosis with every unverifiable citation removed, `verified` set, and the problems in `notes`. A
    trigger that loses its proof turns the diagnosis inconclusive."""
    diag = true_to_lines(without_injected(diag))
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


def true_to_lines(diag: Diagnosis) -> Diagnosis:
    """Each chain step, timeline entry and alternative says only what its cited lines hold (checked_statement); a
    step that was changed keeps what it said in `facts.stated_as` (the JSON shows what was corrected), and the
    headline follows its trigger."""
    def fix(summary: str, evs) -> tuple[str, list[str]]:
        return checked_statement(summary, [e.text for e in evs])

    chain = []
    for f in diag.chain:
        new, changes = fix(f.summary, f.evidence)
        chain.append(f.model_copy(update={"summary": new, "facts": {**f.facts, "stated_as": f.summary}})
                     if changes else f)
    timeline = []
    for t in diag.timeline:
        new, changes = fix(t.what, [t.evidence])
        timeline.append(t.model_copy(update={"what": new}) if changes else t)
    alts = []
    for a in diag.alternatives:
        new, changes = fix(a.summary, a.evidence)
        alts.append(a.model_copy(update={"summary": new}) if changes else a)
    headline = diag.headline
    if diag.chain:
        headline, _ = fix(headline, diag.chain[0].evidence)
    return diag.model_copy(update={"chain": chain, "timeline": timeline, "alternatives": alts, "headline": headline})


def without_injected(diag: Diagnosis) -> Diagnosis:
    """The diagnosis with no line that addresses a reader (tools.lines.injection) as evidence: such a line is never
    proof for a verdict (issue 30). A chain step left without evidence goes; a trigger left without any makes the
    answer inconclusive. Each dropped line is said in the notes."""
    flagged = {e.cite(): w for e in diag.evidence() if (w := injected(e.text))}
    if not flagged:
        return diag
    keep = lambda evs: [e for e in evs if e.cite() not in flagged]  # noqa: E731
    chain, inconclusive = [], False
    for i, f in enumerate(diag.chain):
        evs = keep(f.evidence)
        if evs:
            chain.append(f.model_copy(update={"evidence": evs}) if len(evs) != len(f.evidence) else f)
        elif i == 0:
            inconclusive = True
    update = {"chain": chain, "timeline": [t for t in diag.timeline if t.evidence.cite() not in flagged],
              "alternatives": [a.model_copy(update={"evidence": keep(a.evidence)}) for a in diag.alternatives],
              "notes": diag.notes + [f"not evidence: {at} addresses the reader ({w!r}); log text is data, not an "
                                     f"instruction" for at, w in sorted(flagged.items())]}
    if inconclusive:
        update.update(status=Status.inconclusive, confidence="low")
    return diag.model_copy(update=update)
