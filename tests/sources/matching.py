"""What the scanner records for one line, computed the way tools/scan/filepass.py does it, for the per-source tables.

`matched(line)` applies EVERY catalog pattern (not only the source under test) to the line, then applies the
fallback rule: `fallback` patterns are dropped when any specific pattern matched the same line. It also checks
that the scanner's engines would have offered the line at all: the pure-Python engine only looks at lines that
contain one of a pattern's `anchors`, and the Hyperscan engine must agree with Python `re`. A pattern whose
trigger matches but whose anchors are missing from the line would be silently lost without Hyperscan, so the
helper fails loudly on that instead.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from trainlog_debugger.tools.sources import by_id, patterns
from trainlog_debugger.tools.scan.engine import HyperscanEngine, ReEngine, available_engines


@lru_cache(maxsize=1)
def _engines():
    pats = patterns()
    engines = [ReEngine(pats)]
    if "hyperscan" in available_engines():
        engines.append(HyperscanEngine(pats))
    return engines


def _verified(engine, line: str) -> set[str]:
    pats = engine.patterns
    return {pats[i].id for start, i in engine.candidates(line.encode()) if start == 0 and pats[i].match(line)}


def _fallback_rule(hits: list) -> set[str]:
    least = min((p.fallback for p in hits), default=0)
    return {p.id for p in hits if p.fallback == least}


def matched(line: str) -> set[str]:
    """Pattern ids the scanner records for `line` (after the fallback rule), checked against both engines."""
    assert "\n" not in line, "one physical line at a time"
    hits = [p for p in patterns() if p.match(line)]
    raw = {p.id for p in hits}
    for engine in _engines():
        seen = _verified(engine, line)
        assert seen == raw, f"{engine.name} engine disagrees with Python re on {line!r}: {seen ^ raw}"
    return _fallback_rule(hits)


def fields(pattern_id: str, line: str) -> dict:
    """Typed fields `pattern_id` extracts from `line`."""
    return by_id()[pattern_id].extract(line)


LAST_RESORT = "generic.error_line"  # recorded on any unexplained line with a failure word: tests/rules/test_meaning.py


def check(line: str, expected: dict[str, dict]) -> None:
    """Assert what the scanner records for `line`: exactly the pattern ids in `expected` (empty: nothing), and for
    each id the fields it extracts, as a subset (keys not listed are not compared; a value None means absent).
    The last resort (generic.error_line, a line with a failure word that nothing else explains) is left out of the
    comparison unless `expected` names it: these tables are about the specific patterns."""
    got = matched(line)
    if LAST_RESORT not in expected:
        got.discard(LAST_RESORT)
    assert got == set(expected), f"{line!r}\n  expected {sorted(expected)}\n  got      {sorted(got)}"
    for pid, want in expected.items():
        out = fields(pid, line)
        sub = {k: out.get(k) for k in want}
        assert sub == want, f"{pid} on {line!r}\n  expected {want}\n  got      {out}"


def params(rows):
    """`pytest.param(line, expected, id=name)` for each (name, line, expected) row of a per-source table."""
    return [pytest.param(line, expected, id=name) for name, line, expected in rows]
