"""The shapes in which a source declares what it brings besides its patterns: how to recognise its files (`DETECT`,
`KINDS`), what their paths state (`PATH_HINTS`) and the structured reader that `debugger catalog` lists (`READER`).

Why declared data and not calls: detection is a race between sources (a py-spy dump that a SLURM job wrote into
`slurm-42.out` must be called a dump, not a SLURM log), so no source can decide alone. Each source says which tier
its test belongs to and where in that tier it stands; tools/sources/detect.py walks every source's `DETECT`
through the registry (`declared("DETECT")`) in tier order, and tools/sources/paths.py walks every `PATH_HINTS`
the same way. A new source adds its tests to its own format module and nothing else changes.

The four tiers, strongest first (tools/sources/detect.py):

    content   the whole file identifies itself (a flight-recorder pickle, `Thread 4127 (idle): "MainThread"`,
              `Started up at 2025/08/21 19:17:52, host ais-target-3`, a dmesg dump, `CA 'mlx5_0'`)
    layout    the launcher's file layout says who wrote it (`<run>/attempt_0/3/stderr.log`, `slurm-4242.out`)
    framing   the framework's own line shape inside (`[NeMo I 2024-08-21 ...`, `[rank3]:`, `srun: error: ...`)
    name      weak hints from the file name alone (`rank_3.log`, `aistarget.*`, `dmesg.txt`, `ibstat.txt`)

Kept cheap (the format floor): the standard library and nothing else, as every format module must be.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

TIERS = ("content", "layout", "framing", "name")
#: what a kind's files hold: `worker` (the training processes' own output, where rank-level failures are
#: expected), `snapshot` (hardware and fabric state, read as records), `daemon` (a storage daemon's log),
#: `dump` (stack or flight-recorder dumps), `system` (the kernel's ring buffer, syslog)
ROLES = ("worker", "snapshot", "daemon", "dump", "system")


@dataclass(frozen=True, slots=True)
class Head:
    """What detection sees of one file: its path three ways and its first bytes three ways, computed once."""

    rel: str                # display path, archive members as `a.tgz!x/y.log`
    path: str               # `/` for `\\` and `!`, compression suffix dropped: `a.tgz/x/y.log`
    name: str               # the last part of `path`
    head: bytes             # the (decompressed) first bytes
    text: str               # decoded, ANSI colours removed
    lines: list[str]        # physical lines, tqdm `\r` redraws split out, blanks dropped


@dataclass(frozen=True, slots=True)
class Detector:
    """One test of a source's: the kind it names (or None: not this source's). `place` orders the tests of one
    tier across sources (lower first); the sources leave gaps of 10 so a new test fits between two. `example`
    (display path, first bytes) is a file the test recognises and the whole tier loop calls the test's kind
    (tests/sources/test_detect.py walks every source's examples)."""

    tier: str
    place: int
    test: Callable[[Head], str | None]
    example: tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class PathRule:
    """A path hint: what a file's path states about who wrote it. `scope` "part": `test` sees each part of the
    path (archive members split at `!`); "path": the whole path once, after every part. `test` returns the hint's
    style and its fields (rank, local_rank, node, node_index, attempt, job_id) or None. `example`: a path whose
    hint carries the rule's style (tests/sources/test_paths.py walks them)."""

    scope: str
    place: int
    test: Callable[[str], tuple[str, dict[str, object]] | None]
    example: str


@dataclass(frozen=True, slots=True)
class Reader:
    """A structured reader (records, not lines), listed by `debugger catalog` beside the patterns."""

    id: str
    category: str | None  # the category its findings usually carry (None: several)
    summary: str
    formats: tuple[str, ...]
    example: str
    rules: tuple[str, ...]


def share(pattern: re.Pattern[str], lines: list[str], text: str = "", token: str = "") -> float:
    """Fraction of lines that start with `pattern`; 0 at once when `token` is absent from `text`."""
    if not lines or (token and token not in text):
        return 0.0
    return sum(1 for ln in lines if pattern.match(ln)) / len(lines)


def has(pattern: re.Pattern[str], text: str, *tokens: str) -> bool:
    """pattern.search, skipped when no token is in text: `in` is ~100x cheaper than a regex scan,
    and big folders mean thousands of heads."""
    return any(t in text for t in tokens) and pattern.search(text) is not None


_JSON_START = re.compile("[\ufeff \t\r\n]*[\\[{]")


def json_head(text: str) -> bool:
    """Does the head start as a JSON document does (after a BOM and blanks)? A match at the start, not lstrip (which
    copies the whole 8 KiB head: two detectors ask it of every file)."""
    return _JSON_START.match(text) is not None
