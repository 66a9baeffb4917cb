"""Evidence for the claims of a StepReport: the few points cited are located again, by offset, in the raw file.

Why refs first and lines later: the reader keeps only each point's byte offset (millions of points, no line
numbers, no text); once the analysis has picked what to cite, each source is read once more up to its last cited
offset to count lines and copy the verbatim text. A ref is a tuple:

    ('line', file_idx, offset, rank, node)    the line containing `offset`
    ('timer', file_idx, header, name, rank)   `rank`'s line under `name:` in the timer block whose header is at `header`
    ('tname', file_idx, header, name, None)   the `name:` line itself in that block
"""

from __future__ import annotations

from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.steps.parse import CHUNK
from trainlog_debugger.tools.steps.report import MAX_FINDINGS, StepReport, StepSeries
from trainlog_debugger.tools.steps.timers import timer_rank_line
from trainlog_debugger.tools.lines.timestamps import parse_stamp


def point_refs(s: StepSeries, i: int, rank: int | None, names: bool = False) -> list:
    """References to the line(s) of point i: the line itself, or for per-rank timers each timer's rank line
    (preceded by the timer's name line when `names`)."""
    if s.fmt == "megatron_timers":
        out: list[tuple] = []
        for n in (["forward-compute", "backward-compute"] if s.metric == "compute_ms" else ["forward-backward"]):
            out += ([("tname", s.file_idx, s.offsets[i], n, None)] if names else [])
            out.append(("timer", s.file_idx, s.offsets[i], n, rank))
        return out
    return [("line", s.file_idx, s.offsets[i], rank, s.node)]


def resolve_evidence(bundle, rep: StepReport) -> None:
    """Fill `evidence` of the cited stragglers, every regression and the bound from their refs (one Evidence per
    distinct line and rank); a regression's time is the one its first slow line states."""
    objs = list(rep.outliers[:MAX_FINDINGS]) + rep.regressions + [rep.bound] + (
        [rep.divergence] if rep.divergence is not None else [])
    want: dict[int, set] = {}
    for o in objs:
        for ref in o.refs:
            want.setdefault(ref[1], set()).add(ref)
    found: dict[tuple, Evidence] = {}
    srcs = bundle.sources
    for idx, refs in want.items():
        try:
            found.update(_locate(srcs[idx], idx, refs))
        except READ_ERRORS as exc:
            rep.notes.append(f"{srcs[idx].rel}: evidence not re-read ({read_error_reason(exc)})")
    for o in objs:
        seen: dict[tuple, Evidence] = {}
        for r in o.refs:
            if r in found:
                seen.setdefault((found[r].file, found[r].line, found[r].rank), found[r])
        o.evidence = list(seen.values())
    for r in rep.regressions:
        if len(r.evidence) > 1 and r.evidence[-1].time:
            r.time = r.evidence[-1].time.iso()


def _locate(src, idx: int, refs: set) -> dict[tuple, Evidence]:
    """Line number and verbatim text of each reference: ('line', idx, offset, rank, node) is the line that starts
    at `offset`; ('timer', idx, header, name, rank) is `rank`'s line under `name:` in the timer block at `header`."""
    starts: dict[int, list[tuple]] = {}
    for ref in refs:
        if ref[0] == "line":
            starts.setdefault(ref[2], []).append(ref)
    timer_refs = [r for r in refs if r[0] in ("timer", "tname")]
    if timer_refs:
        with src.open() as f:
            for header in sorted({r[2] for r in timer_refs}):
                f.seek(header)
                window = f.read(16 << 20)
                for r in (r for r in timer_refs if r[2] == header):
                    off = timer_rank_line(window, r[3], r[4] if r[0] == "timer" else None)
                    if off is not None:
                        starts.setdefault(header + off, []).append(r)
    out: dict[tuple, Evidence] = {}
    if not starts:
        return out
    targets = sorted(starts)
    ti, line, base, carry = 0, 1, 0, b""
    with src.open() as f:
        while ti < len(targets):
            block = f.read(CHUNK)
            buf = carry + block
            if not buf:
                break
            cut = len(buf) if not block else buf.rfind(b"\n") + 1 or len(buf)
            carry, buf = buf[cut:], buf[:cut]
            pos = 0
            while ti < len(targets) and targets[ti] < base + len(buf):
                o = buf.rfind(b"\n", 0, targets[ti] - base) + 1     # offsets may point inside their line
                line += buf.count(b"\n", pos, o)
                pos = o
                end = buf.find(b"\n", o)
                text = buf[o:len(buf) if end < 0 else end].decode("utf-8", "replace").rstrip("\r")
                st = parse_stamp(text)
                for ref in starts[targets[ti]]:
                    rank = ref[4] if ref[0] in ("timer", "tname") else ref[3]
                    node = ref[4] if ref[0] == "line" else None
                    out[ref] = Evidence(file=src.rel, line=line, text=text, offset=base + o,
                                        time=st, rank=rank, node=node, kind=src.kind)
                ti += 1
            line += buf.count(b"\n", pos)
            base += len(buf)
    return out
