"""The regex-only baseline the real diagnosis must beat: the first tier-1 catalog match wins.

One scan (tools.scan.summary.scan_bundle); among the tier-1 patterns that matched, the hit that is first by time (lines
with a dated time before undated ones), then by file order and line; its pattern's category hint is the category
('software' where the pattern has no hint), the rank and node of its line are the culprit. No tier-1 match:
category `none`, status completed. No cross-rank reasoning, no roles, no cascade suppression: exactly the
"grep for the first scary line" that a human does first, and that misleads on every hang (the first watchdog
timeout is a victim, not the culprit).

It returns a minimal tools.model.Diagnosis (the matched line is its only citation) so that eval.score scores it
exactly as it scores the real one.
"""

from __future__ import annotations

from trainlog_debugger.tools.bundle.source import natural_key
from trainlog_debugger.tools.model import Diagnosis, Finding, Role, Status
from trainlog_debugger.tools.lines.timestamps import order_then_place
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.scan.result import ScanResult

NO_HINT_CATEGORY = "software"


def first_tier1(scan: ScanResult):
    """(PatternSummary, Evidence) of the first tier-1 hit, or None."""
    best, best_key = None, None
    for p in scan.patterns:
        if p.tier != 1 or p.first is None:
            continue
        key = order_then_place(p.first.time, natural_key(p.first.file), p.first.line, p.id)
        if best_key is None or key < best_key:
            best, best_key = (p, p.first), key
    return best


def baseline_from_scan(scan: ScanResult) -> Diagnosis:
    hit = first_tier1(scan)
    if hit is None:
        return Diagnosis(status=Status.completed, category="none", headline="no tier-1 pattern matched")
    p, ev = hit
    role = Role(p.role) if p.role in Role.__members__ else Role.root_candidate
    return Diagnosis(
        status=Status.crashed, category=p.category or NO_HINT_CATEGORY,
        culprit_ranks=[ev.rank] if ev.rank is not None else [], culprit_nodes=[ev.node] if ev.node else [],
        confidence="low", headline=f"first tier-1 match: {p.id}",
        chain=[Finding(id=p.id, summary=p.summary, role=role, category=p.category, tier=p.tier,
                       ranks=[ev.rank] if ev.rank is not None else [], nodes=[ev.node] if ev.node else [],
                       evidence=[ev])])


def baseline_diagnosis(bundle, *, workers: int | None = None) -> Diagnosis:
    """The baseline's Diagnosis of an open bundle."""
    return baseline_from_scan(scan_bundle(bundle, workers=workers))
