"""Which ranks a file's lines name, and whether its lines carry srun `--label` task ids: the two label tests
every reader of a file shares (the scan, the rank diff, the step reader), so they agree on what a file is.

`[rankN]` labels come from c10's logging (`[rank3]:[E1105 ...`) and the excepthook; srun `--label` prefixes each
line with the task id (` 3: ...`), which tools.lines.attribution reads.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.attribution import attribute_line
from trainlog_debugger.tools.scan.engine import HyperscanEngine, _cached_db, _hs

SRUN_LABEL = re.compile(rb"(?m)^ *(\d+): ")


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


def srun_labelled(head_lines: list[bytes]) -> bool:
    """Whether a file's lines carry srun `--label` task ids (' 3: '): at least 3, and at least half, of the first 50
    non-blank lines start with a label that tools.lines.attribution reads as srun's. One test for every reader of a file
    (tools.scan.summary, tools.rankdiff.analyze), so they agree on which files are srun-labelled. `head_lines`: the file's first
    lines, split on b'\\n'."""
    sample = head_lines[:50]
    candidates = [raw for raw in sample if SRUN_LABEL.match(raw)]  # cheap bytes test first
    if len(candidates) < 3:
        return False
    labelled = sum(1 for raw in candidates if "srun_label" in attribute_line(_decode(raw)).styles)
    return labelled >= max(3, len([x for x in sample if x.strip()]) // 2)


_RANK_LABEL = re.compile(rb"\[rank(\d+)\]")
LABEL_RANKS = 10000  # one literal per rank below this; bigger or zero-padded labels fall back to findall
_label_db = None


def rank_labels(buf: bytes, known: set[int] | None = None) -> set[int]:
    """The ranks of every `[rankN]` label in `buf`, exactly, in ONE pass whatever the number of ranks.

    Why not count each known label: that is one pass per rank (a per-node file of 8 ranks = 9 passes, a 240-rank
    srun output = 241). With Hyperscan: one literal per rank, each reported at most once (SINGLEMATCH), so a
    per-rank file costs one callback. Without it: count `[rank` and the known labels (exact for per-rank files)
    and `findall` only when they do not add up."""
    global _label_db
    if _hs is None:
        total = buf.count(b"[rank")
        if not total:
            return set()
        known = known or {int(x) for x in set(_RANK_LABEL.findall(buf[: 64 << 10]))}
        if sum(buf.count(b"[rank%d]" % r) for r in known) == total:
            return set(known)
        return {int(x) for x in set(_RANK_LABEL.findall(buf))}
    if _label_db is None:
        exprs = [b"\\[rank%d\\]" % r for r in range(LABEL_RANKS)]
        exprs.append(rb"\[rank(?:0[0-9]+|[1-9][0-9]{4,})\]")
        _label_db = _cached_db(exprs, [_hs.HS_FLAG_SINGLEMATCH] * len(exprs))
    seen: set[int] = set()
    for base in range(0, len(buf), HyperscanEngine.MAX_BLOCK):
        _label_db.scan(buf[base: base + HyperscanEngine.MAX_BLOCK], match_event_handler=lambda i, *_: seen.add(i))
    if LABEL_RANKS in seen:
        seen.discard(LABEL_RANKS)
        seen |= {int(x) for x in set(_RANK_LABEL.findall(buf))}
    return seen
