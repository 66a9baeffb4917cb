"""THE re-reader of cited lines: every claim that reaches a user says `file:line` and quotes the line, and this is
the one place that goes back to the bytes to check it.

Three callers, one reader, so they can never disagree about what a line says: tools/verify.py (before a
diagnosis is shown), the eval's grounding score (eval/score.py), and the agent's read-window tool (a window of
lines around a citation, bounded, for the model to read). Lines are normalised once, here: UTF-8 with
replacement characters for bad bytes, the `\\r` of CRLF files dropped, exactly as the scanner reports them.
A file of a kind that has no lines (a flight-recorder dump: its "line" is a 1-based entry index and its text the
entry's canonical JSON) is checked by its source's own verifier instead: the sources declare them by kind
(`VERIFIERS = {kind: "package.module:function"}`, function(source, line, text) -> bool), and this module
resolves the ones a check needs, knowing none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks
from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.lines import LINE_BREAK
from trainlog_debugger.tools.model import Evidence

MAX_WINDOW_LINES = 400  # a read window never holds more, whatever was asked
MAX_WINDOW_CHARS = 64_000
MAX_LINE_CHARS = 2_000  # one line's text in a window (a 2 GB line must not become a 2 GB answer)


def normalise(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def read_lines(source, wanted: Iterable[int], *, chunk_size: int = CHUNK) -> dict[int, str]:
    """The text of the wanted 1-based line numbers of one source, in one streaming pass that stops after the last
    wanted line. Only chunks that hold a wanted line are split into lines."""
    targets = sorted({n for n in wanted if n >= 1})
    out: dict[int, str] = {}
    if not targets:
        return out
    ti, base = 0, 0
    with lines_of(source) as fh:
        for ch in chunks(fh, chunk_size):
            buf = ch.buf
            n = buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1)
            if targets[ti] <= base + n:
                lines = buf.split(b"\n")
                while ti < len(targets) and targets[ti] <= base + n:
                    out[targets[ti]] = normalise(lines[targets[ti] - base - 1])
                    ti += 1
            base += n
            if ti >= len(targets):
                break
    return out


CR_PROBE = 64 << 10  # as the scan decides (tools/scan/labels.py cr_lines): a file whose first 64 KiB hold CRs, no LF


class _CrAsLf:
    """A stream whose CR line ends read as LF: the line numbers the scan gave a CR-only file (classic Mac output,
    progress redraws) are the lines a citation of it names (issue 30: every citation of such a file was dropped
    as 'no such line', turning its answer inconclusive)."""

    def __init__(self, fh, head: bytes):
        self.fh, self.head = fh, head

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out.replace(b"\r", b"\n")
        return self.fh.read(n).replace(b"\r", b"\n")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def lines_of(source):
    """`source` opened for reading by lines as the scan numbered them (a CR-only file's CRs as line ends)."""
    fh = source.open()
    try:
        head = fh.read(CR_PROBE)
    except BaseException:
        fh.close()
        raise
    if b"\n" not in head and head.count(b"\r") >= 2:
        return _CrAsLf(fh, head)
    return _Prefixed(fh, head)


class _Prefixed(_CrAsLf):
    """The stream with its probed head given back first, as it was."""

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.fh.read(n)


def _one_of_its_lines(line: str, cited: str) -> bool:
    """Whether `cited` is one of the lines a line of the file holds escaped (a JSON-lines log's traceback string,
    its breaks shown as tools.lines.LINE_BREAK): the traceback reader cites the exception's own line of it."""
    return LINE_BREAK in line and cited in line.split(LINE_BREAK)


@dataclass(frozen=True)
class Window:
    """Lines `first`..`last` of `file` (1-based, inclusive), each with its number; what was cut, in words."""

    file: str
    first: int
    last: int
    lines: list[tuple[int, str]]
    cut: list[str]


def read_window(source, line: int, before: int = 20, after: int = 20, *, max_lines: int = MAX_WINDOW_LINES,
                max_chars: int = MAX_WINDOW_CHARS) -> Window:
    """The lines around `line`, whole, numbered. Every number asked for is clamped before it sizes anything: the
    window holds at most `max_lines` lines (never more than MAX_WINDOW_LINES) and `max_chars` characters, a long
    line is shortened to MAX_LINE_CHARS with a marker, and what was cut is said in `cut`."""
    asked_before = int(before)
    max_lines = max(1, min(int(max_lines), MAX_WINDOW_LINES))
    max_chars = max(1, min(int(max_chars), MAX_WINDOW_CHARS))
    line = max(1, int(line))
    before = max(0, min(int(before), max_lines - 1))
    after = max(0, min(int(after), max_lines - 1 - before))
    first, last = max(1, line - before), line + after
    got = read_lines(source, range(first, last + 1))
    cut: list[str] = []
    if line - asked_before < first and first > 1:
        cut.append(f"showing from line {first}: at most {max_lines} lines per window")
    rows: list[tuple[int, str]] = []
    used = 0
    for n in range(first, last + 1):
        if n not in got:
            break  # past the end of the file
        text = got[n]
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + f" … [line cut: {len(got[n])} characters]"
        if used + len(text) > max_chars and rows:
            cut.append(f"stopped at line {rows[-1][0]}: {max_chars} characters per window")
            break
        rows.append((n, text))
        used += len(text)
    if line not in got:
        cut.append(f"the file has no line {line}")
    return Window(getattr(source, "rel", str(source)), rows[0][0] if rows else first,
                  rows[-1][0] if rows else first - 1, rows, cut)


class ProblemKind(str, Enum):
    """Why a citation cannot stand.

    file_not_in_bundle: the cited file is not one of the bundle's sources;
    unreadable: the file is there but reading it failed (I/O error, truncated archive member);
    no_such_line: the file has fewer lines than the citation says;
    text_differs: the line exists and says something else;
    entry_differs: a flight-recorder dump has no such entry, or the entry renders to other JSON.
    """

    file_not_in_bundle = "file_not_in_bundle"
    unreadable = "unreadable"
    no_such_line = "no_such_line"
    text_differs = "text_differs"
    entry_differs = "entry_differs"


_SAYS = {ProblemKind.file_not_in_bundle: "cited file is not in the bundle", ProblemKind.no_such_line: "no such line",
         ProblemKind.text_differs: "cited text differs from the file",
         ProblemKind.entry_differs: "cited entry differs from the dump"}


@dataclass(frozen=True)
class CitationProblem:
    """One citation that failed its re-read. `line` is None when the whole file is the problem."""

    file: str
    line: int | None
    kind: ProblemKind
    detail: str = ""
    cited: str | None = None  # the text the citation claimed (None for a whole-file problem)

    def cite(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def __str__(self) -> str:
        says = f"cannot re-read ({self.detail})" if self.kind == ProblemKind.unreadable else _SAYS[self.kind]
        return f"{self.cite()}: {says}"


Verifier = Callable[[Any, int, str], bool]


def verifiers() -> dict[str, str]:
    """File kind → "module:function" of the verifier its source declares (VERIFIERS), over every source."""
    from trainlog_debugger.tools.sources import declared  # the registry: only when citations are checked
    out: dict[str, str] = {}
    for _src, table in declared("VERIFIERS"):
        out.update(cast("dict[str, str]", table))
    return out


def check_citations(evidence: Iterable[Evidence], sources: Mapping[str, object]) -> list[CitationProblem]:
    """Every citation re-read: one pass per cited text file, one load per cited entry of a kind with a verifier.
    `sources`: bundle-relative path → source (tools.bundle.open.Source). Problems come once each, file problems
    before line problems."""
    from trainlog_debugger.tools.sources import resolve
    declared_by_kind = verifiers()
    resolved: dict[str, Verifier] = {}

    def verifier(src: object) -> Verifier | None:
        kind = getattr(src, "kind", None)
        if not isinstance(kind, str) or kind not in declared_by_kind:
            return None
        if kind not in resolved:
            resolved[kind] = cast(Verifier, resolve(declared_by_kind[kind]))
        return resolved[kind]

    evs = list(evidence)
    wanted: dict[str, set[int]] = {}
    for ev in evs:
        wanted.setdefault(ev.file, set()).add(ev.line)
    actual: dict[tuple[str, int], str] = {}
    whole: dict[str, CitationProblem] = {}
    for rel, lines in wanted.items():
        src = sources.get(rel)
        if src is None:
            whole[rel] = CitationProblem(rel, None, ProblemKind.file_not_in_bundle)
        elif getattr(src, "kind", None) not in declared_by_kind:
            try:
                actual.update({(rel, n): t for n, t in read_lines(src, lines).items()})
            except READ_ERRORS as e:
                whole[rel] = CitationProblem(rel, None, ProblemKind.unreadable, str(e))
    out: dict[tuple, CitationProblem] = {(p.file, None, None): p for p in whole.values()}
    for ev in evs:
        if ev.file in whole:
            continue
        src, kind = sources[ev.file], None
        verify = verifier(src)
        if verify is not None:
            kind = None if verify(src, ev.line, ev.text) else ProblemKind.entry_differs
        elif (ev.file, ev.line) not in actual:
            kind = ProblemKind.no_such_line
        elif actual[(ev.file, ev.line)] != ev.text and not _one_of_its_lines(actual[(ev.file, ev.line)], ev.text):
            kind = ProblemKind.text_differs
        if kind is not None:
            out.setdefault((ev.file, ev.line, ev.text), CitationProblem(ev.file, ev.line, kind, cited=ev.text))
    return list(out.values())
