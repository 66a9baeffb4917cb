"""Re-read every cited line from the raw files before a diagnosis is shown: nothing reaches a report uncited, and
nothing cited may differ from the file.

Why here and not trusted from the scan: evidence is assembled by several tools (some lines are derived, e.g. a
traceback's final exception line), an LLM may add citations later, and the claim "rank 17, file:line, this text"
is what the user acts on at 3 AM. One streaming pass per cited file; only the chunks that hold cited lines are
split into lines.
"""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import READ_ERRORS
from trainlog_debugger.tools.bundle.chunks import chunks
from trainlog_debugger.tools.model import Diagnosis, Evidence, Status

CHUNK = 64 << 20


def _norm(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


def read_lines(source, wanted: set[int]) -> dict[int, str]:
    """The text of the wanted 1-based line numbers of one source, in one pass."""
    out: dict[int, str] = {}
    if not wanted:
        return out
    targets = sorted(wanted)
    ti, base = 0, 0
    with source.open() as fh:
        for ch in chunks(fh, CHUNK):
            buf = ch.buf
            n = buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1)
            if targets[ti] <= base + n:
                lines = buf.split(b"\n")
                while ti < len(targets) and targets[ti] <= base + n:
                    out[targets[ti]] = _norm(lines[targets[ti] - base - 1])
                    ti += 1
            base += n
            if ti >= len(targets):
                break
    return out


def check(diag: Diagnosis, bundle) -> list[str]:
    """Problems found: cited files that are not in the bundle, lines that do not exist or differ."""
    by_rel = {s.rel: s for s in bundle.sources}
    wanted: dict[str, set[int]] = {}
    for ev in diag.evidence():
        wanted.setdefault(ev.file, set()).add(ev.line)
    actual: dict[tuple[str, int], str] = {}
    problems: list[str] = []
    for rel, lines in wanted.items():
        src = by_rel.get(rel)
        if src is None:
            problems.append(f"{rel}: cited file is not in the bundle")
            continue
        if src.kind == "fr_dump":  # binary dumps: a "line" is an entry index, its text the entry's JSON rendering
            from trainlog_debugger.tools.sources.flight_recorder.analyze import verify_entry
            for ev in (e for e in diag.evidence() if e.file == rel):
                if verify_entry(src, ev.line, ev.text):
                    actual[(rel, ev.line)] = ev.text
                else:
                    problems.append(f"{ev.cite()}: cited entry differs from the dump")
            continue
        try:
            got = read_lines(src, lines)
        except READ_ERRORS as e:
            problems.append(f"{rel}: cannot re-read ({e})")
            continue
        actual.update({(rel, n): t for n, t in got.items()})
    for ev in diag.evidence():
        if ev.file not in by_rel or by_rel[ev.file].kind == "fr_dump":
            continue  # reported above
        if (ev.file, ev.line) not in actual:
            problems.append(f"{ev.cite()}: no such line")
        elif actual[(ev.file, ev.line)] != ev.text:
            problems.append(f"{ev.cite()}: cited text differs from the file")
    return sorted(set(problems))


def verified(diag: Diagnosis, bundle) -> Diagnosis:
    """The diagnosis with every unverifiable citation removed, `verified` set, and the problems in `notes`. A
    trigger that loses its proof turns the diagnosis inconclusive."""
    problems = check(diag, bundle)
    if not problems:
        return diag.model_copy(update={"verified": True})
    bad = {p.split(": ", 1)[0] for p in problems}
    bad_files = {p.split(":", 1)[0] for p in problems if p.endswith("not in the bundle")}

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
                                   "notes": diag.notes + [f"citation dropped: {p}" for p in problems]})
