"""Guess what produced a log file, from its name AND its first ~8 KiB: the tier loop over every source's `DETECT`.

Why both: users rename files (`combined.log`, `node3.txt`), paste several tools into one file, and
archive tools flatten directories, so an extension says little. Content that identifies a whole
file (a flight-recorder dump, a Cloud Logging export, a py-spy dump, an AIStore log, a dmesg dump)
beats any name. For training-process output the *launcher's file layout* (torchrun `attempt_N/`,
SLURM `slurm-<job>.out`, NeMo `nemo_log_globalrank-*`) is the most reliable framing (it tells the
parsers which rank/node wrote the file), then framework content, then weak name hints, then
'generic' (still scanned). Formats: ../shared/FORMATS.md. Never unpickles or evaluates anything.

The tests themselves are each source's (its format module's `DETECT` and `KINDS`, tools/sources/declare.py): this
module only orders them (tier, then place) and runs them until one names a kind.
"""
from __future__ import annotations

import re
from functools import lru_cache

from trainlog_debugger.tools.sources import declared
from trainlog_debugger.tools.sources.declare import TIERS, Detector, Head
from trainlog_debugger.tools.lines.ansi import strip_ansi

GENERIC = "generic"  # nothing recognised the file: still scanned, as worker output
HEAD_BYTES = 8192
_COMPRESSED_SUFFIX = re.compile(r"\.(?:gz|bz2|xz|zst)$", re.I)


def _kinds() -> dict[str, str]:
    """Every kind a source declares, with its role (declare.ROLES), in registry order."""
    out: dict[str, str] = {}
    for src, kinds in declared("KINDS"):
        assert isinstance(kinds, dict), src
        out.update(kinds)
    return out


_ROLES = _kinds()
ALL_KINDS = frozenset(_ROLES) | {GENERIC}
#: Kinds whose text is (or wraps) the training processes' own stdout/stderr, i.e. where rank-level
#: failures are expected. 'generic' is included because real pastes (`combined.log`) mostly are that.
WORKER_KINDS = frozenset(k for k, role in _ROLES.items() if role == "worker") | {GENERIC}
#: hardware and fabric snapshots (tools/sources/hw): read as records, compared across nodes
HW_KINDS = frozenset(k for k, role in _ROLES.items() if role == "snapshot")


@lru_cache(maxsize=1)
def detectors() -> tuple[Detector, ...]:
    """Every source's detection tests, strongest tier first, then by place within the tier."""
    out: list[Detector] = []
    for src, dets in declared("DETECT"):
        assert isinstance(dets, tuple | list), src
        out.extend(dets)
    return tuple(sorted(out, key=lambda d: (TIERS.index(d.tier), d.place)))


def _lines(text: str) -> list[str]:
    """Physical lines, with tqdm `\\r` redraws split out and blanks dropped."""
    # str methods, not re.split(r"\r\n|\r|\n"): the same pieces at a tenth of the cost (100 µs a head, 0.4 s of
    # opening a 4,096-file bundle)
    if "\r" in text:  # most heads have none: two replaces that find nothing still copy 8 KiB each (8 µs a head)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [ln for ln in text.split("\n") if ln.strip()]


def head_of(rel: str, head: bytes) -> Head:
    """What the detectors see of the file at display path `rel` whose (decompressed) content starts with `head`."""
    head = head[:HEAD_BYTES]
    path = _COMPRESSED_SUFFIX.sub("", rel.replace("\\", "/").replace("!", "/"))
    text = head.decode("utf-8", "replace")
    text = strip_ansi(text)
    return Head(rel, path, path.rsplit("/", 1)[-1], head, text, _lines(text))


def sniff(rel: str, head: bytes) -> str:
    """Return the source kind for display path `rel` (archive members as `a.tgz!x/y.log`) whose
    (decompressed) content starts with `head`. Cheap: regexes over at most HEAD_BYTES bytes."""
    h = head_of(rel, head)
    for det in detectors():
        kind = det.test(h)
        if kind:
            return kind
    return GENERIC
