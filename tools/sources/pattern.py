"""The pattern type of the fatal-pattern catalog.

A pattern is data: an id, a tier, a category hint, a role hint, a trigger regex and an example line copied from
FORMATS.md or a real incident. The catalog test checks that every example matches its own trigger, so a
pattern cannot silently rot.

Two regexes per pattern, because the scan engine and the field extractor have different needs:
- `trigger` finds the line. It must be line-local, short and selective (no leading `.*`, no trailing
  wildcard: Hyperscan reports one match per end offset, so `foo.*` would call back once per character) and in
  the syntax subset that both Hyperscan and Python `re` accept the same way (no lookaround, no backrefs).
- `fields` (Python `re`, named groups) runs only on the lines the trigger found and extracts typed facts.
`anchors` are literals, one of which every matching line contains; the pure-Python engine uses them as a
`bytes.find` prefilter when Hyperscan is not installed.
`verify` (optional, Python `re`): when set, the trigger is only the engine's cheap, selective superset (literal
text Hyperscan can anchor on) and a line counts as a match only if `verify` also matches it. The scan already
confirms every engine candidate with `match()`, so the precise regex runs only on the few candidate lines. Why:
a trigger like `[Ll]oss[ a-z_]*: nan` makes Hyperscan confirm a near-miss on every `lm loss:` line (35 % of the
whole database's time, issue 16); `: nan` finds the same lines at no measurable cost. A line that `verify`
matches must also match `trigger` (tests/sources check it on the examples and near-misses).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from trainlog_debugger.tools.lines.timestamps import Stamp

TIERS = {
    0: "job facts",
    1: "process killers",
    2: "training-loop crashes",
    3: "data loading and I/O",
}


def __getattr__(name: str):
    """ROLES (a pattern's role hint is a Finding's role) and CATEGORIES (a line hints at a fault, never at "none"),
    what the catalog test checks every pattern against, read from the model on first use (PEP 562): the model
    imports pydantic, and a scan loads this module but needs neither."""
    if name not in ("ROLES", "CATEGORIES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from trainlog_debugger.tools.model import CATEGORIES, Role
    return tuple(r.value for r in Role) if name == "ROLES" else tuple(c for c in CATEGORIES if c != "none")


@dataclass(frozen=True)
class Pattern:
    id: str
    tier: int
    category: str | None
    role: str
    trigger: str
    anchors: tuple[str, ...]
    example: str
    summary: str
    fields: str | None = None
    int_fields: tuple[str, ...] = ()
    # generic catch-all: recorded only when no specific pattern matched the line; 2 = a last resort, recorded only
    # when no other pattern at all (fallbacks included) matched it (generic.error_line)
    fallback: bool | int = False
    # strength with which a hit alone is a root candidate (tools/rules/catalog.py), for wording families that need
    # no rule of their own; None: a specific rule reads this pattern (or it is context/cascade/noise)
    weight: float | None = None
    advice: str = ""  # the first thing to do when this pattern is the trigger (a recommendation)
    status: str = "crashed"  # what a run whose trigger is this line did: crashed, hung, slow
    verify: str | None = None  # the precise regex when `trigger` is the engine's looser literal superset

    # The Python regexes, compiled on first use: compiling the whole catalog's took ~170 ms of every start-up,
    # and a scan confirms candidates of only the few patterns the bundle hits (issue 16). Cached on the instance
    # (a frozen dataclass: cached_property writes its __dict__ directly) and left out of its pickled state.
    @cached_property
    def _rx(self) -> re.Pattern:
        return re.compile(self.verify or self.trigger)

    @cached_property
    def _frx(self) -> re.Pattern | None:
        return re.compile(self.fields) if self.fields else None

    def __getstate__(self) -> dict:
        """The pattern's data only, whether or not its regexes were compiled yet: a scan's engine recipe is keyed
        by the pickled patterns (tools.scan.driver) and must not change when a match() compiles one."""
        return {k: v for k, v in self.__dict__.items() if k not in _COMPILED}

    def match(self, line: str) -> bool:
        return self._rx.search(line) is not None

    def search(self, line: str) -> re.Match | None:
        """Where in the line the pattern matched (a renderer keeps that part of a long line in view)."""
        return self._rx.search(line)

    def extract(self, line: str) -> dict:
        """Typed facts from a line the trigger found; empty when the line has no extractable fields."""
        rx = self._frx or self._rx
        m = rx.search(line)
        if not m:
            return {}
        out: dict = {}
        for k, v in m.groupdict().items():
            if v is None:
                continue
            if k in self.int_fields:
                n = _bounded(v, MAX_RANKS if _sizes_ranks(k) else None)
                if n is not None:
                    out[k] = n
                elif v.strip().lstrip("+-").isdecimal():  # a number beyond any sane bound: a claim, not a size
                    out.setdefault(IMPLAUSIBLE, []).append(implausible_text(k, v.strip()))
                else:
                    out[k] = v
            else:
                out[k] = v.strip()
        return out


_COMPILED = ("_rx", "_frx")

IMPLAUSIBLE = "implausible"  # the facts key of int fields over their bound (tools.ranks): 'world_size=1000000000'
# The bounds of tools.ranks (MAX_RANKS, MAX_DIGITS), restated because a format module imports no analysis helper
# (tests/test_layers.py); tests/hostile/test_numbers.py checks that the two agree.
MAX_RANKS = 1_000_000
MAX_DIGITS = 20


def _bounded(v: str, ceiling: int | None) -> int | None:
    """An int field's text as an int: at most MAX_DIGITS digits (int() of 4,300+ raises), at most `ceiling`."""
    t = v.strip()
    digits = t[1:] if t[:1] in "+-" else t
    if not digits.isdecimal() or not digits.isascii() or len(digits) > MAX_DIGITS:
        return None
    n = int(t)
    return None if ceiling is not None and n > ceiling else n


def implausible_text(name: str, value: str) -> str:
    """How an implausible claim is named in a note: the field and at most 24 characters of the value."""
    return f"{name}={value}" if len(value) <= 24 else f"{name}={value[:12]}…({len(value)} digits)"


def _sizes_ranks(name: str) -> bool:
    """Int fields that name a rank or count ranks (world_size, nranks, pg_rank, failed_rank, ...): bounded by
    MAX_RANKS because readers size per-rank lists with them; other ints (bytes, ms, pids) only by digit count."""
    return "rank" in name or name in ("world_size", "nranks", "expected", "joined")


def P(id, tier, category, role, trigger, anchors, example, summary, fields=None, ints=(), fallback=False, weight=None,
      advice="", status="crashed", verify=None):
    """Terse constructor so that source modules read as tables."""
    if isinstance(anchors, str):
        anchors = (anchors,)
    if weight is not None and (role != "root_candidate" or category is None or not 0 < weight <= 1):
        raise ValueError(f"{id}: a weighted pattern is a root candidate with a category and 0 < weight <= 1")
    return Pattern(id, tier, category, role, trigger, tuple(anchors), example, summary, fields, tuple(ints), fallback,
                   weight, advice, status, verify)


# -- what a source adds to the scan besides its patterns (declared by name; tools.sources.declared) ----------------
#
# HOOKS = {pattern id: Hook(...)}: run on a hit of that pattern (python.traceback reads forward to the exception that
#   ended the traceback; io.retrying counts the retry escalation). tools.scan.filepass calls them without knowing them.
# KIND_HOOKS = {file kind: Hook(...)}: run on every kept hit line of a file of that kind, after the scanner read the
#   line's time and node, to fill what the line itself does not state (a Cloud Logging entry's task and timestamp).
# WORLD_SIZE = {pattern id: WorldSize(...)}: the patterns whose field states how many ranks the job has.
# KEEP_FIRST = {pattern id prefix: n}: how many first hits per (pattern, rank) are kept in full where 5 are too few
#   (collective-state lines, one per process group: tools.scan.keeper).
# SCAN_STEPS = {phase: "module:function"}: a source's steps over the per-file scans (tools.scan.summary says each
#   phase's contract): torchrun's local → global ranks and its failure report's hosts, srun's task → node lines,
#   NCCL's communicator ranks → nodes.
# VERIFIERS = {file kind: "module:function"}: how a citation into a file of that kind is re-read when the kind has
#   no lines (a flight-recorder dump: entry index and canonical JSON; tools.bundle.reread). The scan skips such
#   kinds as text (tools.scan.driver.text_skip_kinds).


class HitContext:
    """What a hook sees of one hit: the line (`buf[start:end]`, its 1-based number `line`, its decoded `text`), the
    hit's `rank` (the line's own, else its file's), `line_rank` (the rank the line's own prefixes state, None for an
    unlabelled line), its facts (`fields`, which a hook may add to), the FileScan being filled (`file`: its
    `notes`, `retries`), and `time` and `node` (a kind hook may fill them). `rank_of(text)` is the scanner's own
    remembered attribution of a line (the rank its prefixes state), for hooks that read the lines around the hit;
    `final`: the buffer is the file's last (a block that runs to its end ends with the file, not at a chunk's cut).

    A plain class with slots, made only for hits of a hooked pattern (or a hooked kind): no hook costs anything on
    a line without such a hit."""

    __slots__ = ("buf", "start", "end", "line", "text", "rank", "line_rank", "fields", "file", "rank_of", "time",
                 "node", "final")

    def __init__(self, buf: bytes, start: int, end: int, line: int, text: str, rank: int | None,
                 line_rank: int | None, fields: dict, file: Any, rank_of: Callable[[str], int | None],
                 time: Stamp | None = None, node: str | None = None, final: bool = False):
        self.buf, self.start, self.end, self.line, self.text = buf, start, end, line, text
        self.rank, self.line_rank, self.fields, self.file, self.rank_of = rank, line_rank, fields, file, rank_of
        self.time, self.node = time, node
        self.final = final  # `buf` ends where the file ends (not at a chunk's cut): what follows it is nothing


@dataclass(frozen=True)
class Hook:
    """A source's code run on a hit, declared beside its patterns. `run`: the function (it gets a HitContext and
    returns nothing), or a "package.module:function" string when it needs more than the format floor may import
    (resolved when a scan starts). `every`: run on every hit of the pattern, repeats that are only counted included
    (what counts them all: the retry escalation); otherwise only on the hits kept in full (the first and last few
    per pattern and rank), which have their time and node. On a repeat the context's time and node are None."""

    run: Callable[[HitContext], None] | str
    every: bool = False


class WorldSize(NamedTuple):
    """A pattern whose `field` states the world size. `trust` 0: the job's world size as the log states it; 1: a
    communicator's size, which is the world size only when it is the largest (a tensor or pipeline group is
    smaller). `says`: how coverage names where its expected rank count came from."""

    field: str
    trust: int
    says: str
