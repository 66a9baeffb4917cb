"""The straggler's last activity: what the rank that never entered the stuck collective printed last BEFORE the hang's
own lines, into Investigation.activity (tools/rules/collective.py: `collective.straggler`).

Why: TAXONOMY decides a straggler by what kept it busy (reading data, evaluation or preprocessing on one rank, a
long phase under a short timeout), and the scan keeps each rank's very last line: for a hung rank that is the
watchdog's or the flight recorder's own report (`Observed flight recorder dump signal from another rank`), printed
after the hang. The lines just before that report say what the rank was doing: a tokenizer's progress bar on rank
0, `Loading checkpoint shards`, an evaluation loop.

Read only when the collective analysis found a straggler: a window of _BEFORE lines above each culprit's first line
of the hang's own reports (at most _CULPRITS culprits), read through the re-reader, from disk, numbered as the file
is.
A line counts as the rank's when it names that rank (`[rank3]:`, srun's `3: `), or names no rank in a file that
holds only that rank's lines, or (rank 0 only) names no rank in a console where the main process prints unlabelled
progress. C++ frames, NCCL's own lines and blank lines are skipped.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.bundle.reread import read_window
from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.lines.attribution import attribute_line, strip_prefixes
from trainlog_debugger.tools.lines.timestamps import parse_stamp
from trainlog_debugger.tools.model import Evidence

_BEFORE = 60
_CULPRITS = 4
_KEEP = 6  # activity lines kept per culprit, the latest first
# what the hang itself prints, the teardown that follows it on other ranks (C++ abort text that names no rank) and
# the machinery around it: never the rank's own activity
_NOT_ACTIVITY = re.compile(r"ProcessGroupNCCL|NCCL (?:INFO|WARN)|^frame #\d+|Exception raised from|flight recorder|"
                           r"watchdog|c10d|c10::|TCPStore|terminate called|what\(\):|Fatal Python error|Aborted|"
                           r"^Traceback|^\s+File \"|\bSIG[A-Z]{2,}\b|^\s*$|^[-=*#]{4,}")


def straggler_culprits(ctx: Context) -> list[int]:
    """The ranks the collective analysis found outside the stuck collective (the straggler rule's culprits)."""
    rep = ctx.inv.nccl
    if rep is None or rep.verdict not in ("straggler", "gloo_straggler"):
        return []
    return [r for r in rep.culprits if rep.ranks[r].role in ("never_entered", "behind")][:_CULPRITS]


def last_activity(ctx: Context) -> tuple[dict[int, list[Evidence]], list[str]]:
    rep = ctx.inv.nccl
    if rep is None:
        return {}, []
    sources = {s.rel: s for s in ctx.bundle.sources}
    files = {f.rel: f for f in ctx.inv.scan.files}
    out: dict[int, list[Evidence]] = {}
    for r in straggler_culprits(ctx):
        rs = rep.ranks[r]
        # its first collective line, else (a rank that printed none: it never entered) its last line
        own = sorted((e for e in rs.evidence or ([rs.last_line] if rs.last_line else []) if e.file in sources),
                     key=lambda e: (e.file, e.line))
        if not own:
            continue
        first = own[0]
        fs = files.get(first.file)
        alone = fs is not None and set(fs.ranks) <= {r}
        try:
            w = read_window(sources[first.file], first.line, before=_BEFORE, after=0)
        except READ_ERRORS:
            continue
        got = []
        for n, text in reversed([(n, t) for n, t in w.lines if n < first.line]):
            who = attribute_line(text).rank
            if who is not None and who != r:
                continue
            if who is None and not alone and r != 0:
                continue
            if _NOT_ACTIVITY.search(strip_prefixes(text)):
                continue
            # with the line's own time where it states one (never one borrowed from another line)
            got.append(Evidence(file=first.file, line=n, text=text, rank=r, node=first.node, kind=first.kind,
                                time=parse_stamp(text)))
            if len(got) >= _KEEP:
                break
        if got:
            out[r] = got
    return out, []


# before the first answer (it reads only the collective analysis): the answer is drawn once, with it; drawing it
# again after (a redraw) cost a whole diagnosis, 1.4 s at 10,000 ranks
STAGE = Stage("activity", when=lambda ctx: bool(straggler_culprits(ctx)), run=last_activity)
