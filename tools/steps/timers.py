"""Megatron timer blocks (megatron/core/timers.py): where a block's lines are, the per-rank values in it, the line of
one rank's value, and what the timers say about the step: compute-, communication- or data-bound.

Why blocks need care: a block is many lines printed by one rank; in per-node files other ranks' lines can land
inside it, and a 32 MiB buffer can end in the middle of it. Block lines are matched as a run (BLOCK), other ranks'
lines are stepped over (block_regions), and a cut block moves whole to the next buffer (keep_block_whole).

Bound: compute (forward-compute + backward-compute, or forward-backward minus pipeline send/recv, + optimizer minus
params-all-gather) vs communication (send/recv, *-all-reduce, *-all-gather, reduce-scatter, *-grads-sync, *-comm)
vs data (batch-generator); "unknown" when the logs do not split the step.
"""

from __future__ import annotations

import re
import statistics

from trainlog_debugger.tools.steps.formats import ALL_NAME, ALL_RANK, BLOCK, KIND_TITLE, KINDS, LINE_PREFIX, RANK_LABEL, SRUN_LABEL
from trainlog_debugger.tools.steps.report import Bound, fmt_num

# Timer names → role in the step (Megatron training.py timers_to_log).
COMM_TIMER = re.compile(r"send|recv|all-?reduce|all-?gather|reduce-?scatter|grads?-sync|comm|broadcast|all-?to-?all")
P2P_TIMER = re.compile(r"send|recv")


def timer_kind(buf: bytes, h: int) -> str | None:
    """'all', 'minmax' or 'max': which block the ` across ranks (ms):` header at `h` opens (None: not a timer block)."""
    for suffix, kind in KINDS:
        if buf.endswith(suffix, 0, h):
            return kind
    return None


def block_regions(buf: bytes, pos: int, kind: str, header_head: bytes) -> list[tuple[int, int]]:
    """The byte ranges of a timer block's lines. Up to 16 interleaved lines of OTHER ranks (per-node files) are
    stepped over when the header line carries a rank label; any other line ends the block."""
    rx = BLOCK[kind]
    own = RANK_LABEL.search(header_head) or SRUN_LABEL.match(header_head)
    regions: list[tuple[int, int]] = []
    while True:
        m = rx.match(buf, pos)
        if not m or m.end() == pos:
            break
        regions.append((pos, m.end()))
        pos = m.end()
        if own is None:
            break
        p = pos
        for _ in range(16):
            eol = buf.find(b"\n", p)
            if eol < 0:
                return regions
            line = buf[p:eol]
            lab = RANK_LABEL.search(line) or SRUN_LABEL.match(line)
            if lab is None or lab.group(1) == own.group(1) or b"across ranks" in line or b"iteration" in line:
                return regions
            p = eol + 1
            if rx.match(buf, p):
                break
        else:
            return regions
        pos = p
    return regions


def keep_block_whole(buf: bytes, cut: int) -> int:
    """A timer block cut by the buffer end moves whole into the next buffer."""
    h = buf.rfind(b" across ranks (ms):", 0, cut)
    if h < 0:
        return cut
    ls = buf.rfind(b"\n", 0, h) + 1
    eol = buf.find(b"\n", h, cut)
    if eol < 0:
        return ls or cut
    kind = timer_kind(buf, h)
    m = BLOCK[kind].match(buf, eol + 1, cut) if kind else None
    end = m.end() if m else eol + 1
    return ls if end >= cut and ls > 0 else cut


def parse_all_block(buf: bytes, base: int, regions, lines: dict[str, int],
                    sums: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    """`times across ranks` block → timer → rank → ms; adds each value to `sums` (timer → rank →
    [sum, n], the per-rank sums the bound is computed from); `lines` gets each timer name's line offset."""
    per: dict[str, dict[int, float]] = {}
    name: str | None = None
    for a, z in regions:
        cuts = [(m.start(), m.end()) for m in ALL_NAME.finditer(buf, a, z)]
        sections: list[tuple[str | None, int, int]] = []
        prev = a
        for c0, c1 in cuts:
            ls = buf.rfind(b"\n", a - 1, c0) + 1
            sections.append((name, prev, ls))
            raw = buf[ls:c0].split()
            name = raw[-1].decode("ascii", "replace") if raw else None
            if name is not None:
                lines[name] = base + ls
            prev = c1
        sections.append((name, prev, z))
        for nm, s0, s1 in sections:
            if nm is None or s1 <= s0:
                continue
            pairs = ALL_RANK.findall(buf, s0, s1)
            if not pairs:
                continue
            d = per.setdefault(nm, {})
            acc = sums.setdefault(nm, {})
            for rb, vb in pairs:
                r, v = int(rb), float(vb)
                d[r] = v
                e = acc.get(r)
                if e is None:
                    acc[r] = [v, 1]
                else:
                    e[0] += v
                    e[1] += 1
    return per


def timer_rank_line(window: bytes, name: str, rank: int | None) -> int | None:
    """Offset in `window` (which starts at a `times across ranks` header) of `rank`'s line under `name:` (of the
    `name:` line itself when rank is None)."""
    eol = window.find(b"\n")
    if eol < 0:
        return None
    regions = block_regions(window, eol + 1, "all", window[:eol])
    if not regions:
        return None
    want = re.compile(rb"(?m)^(?:" + LINE_PREFIX + rb") *" + re.escape(name.encode()) + rb":\r?$")
    a, z = regions[0][0], regions[-1][1]
    m = want.search(window, a, z)
    if not m:
        return None
    if rank is None:
        return m.start()
    nxt = ALL_NAME.search(window, m.end() + 1, z)
    stop = window.rfind(b"\n", 0, nxt.start()) + 1 if nxt else z
    r = re.compile(rb"rank +%d: [0-9.]+" % rank).search(window, m.end(), stop)
    return None if r is None else window.rfind(b"\n", 0, r.start()) + 1


def timer_bound(outs) -> Bound | None:
    """Compute vs communication vs data from the timers of all files (one FileOut per file, tools/steps/parse.py),
    with refs to the last block's header and the lines of the timers that decide it; None without timer blocks."""
    timers: dict[str, float] = {}
    kind = None
    all_t: dict[str, dict[int, list[float]]] = {}
    mm: dict[str, list[float]] = {}
    mx: dict[str, list[float]] = {}
    for f in outs:
        for name, per in f.timers.items():
            d = all_t.setdefault(name, {})
            for r, (sm, n) in per.items():
                e = d.setdefault(r, [0.0, 0])
                e[0] += sm
                e[1] += n
        for src, dst in ((f.minmax, mm), (f.maxonly, mx)):
            for name, e in src.items():
                cur = dst.setdefault(name, [0.0] * len(e))
                for i, v in enumerate(e):
                    cur[i] += v
    if all_t:
        kind, timers = "all", {n: statistics.median([s / c for s, c in per.values()]) for n, per in all_t.items()}
    elif mm:
        kind, timers = "minmax", {n: e[1] / e[2] for n, e in mm.items()}
    elif mx:
        kind, timers = "max", {n: e[0] / e[1] for n, e in mx.items()}
    if kind is None:
        return None
    source = KIND_TITLE[kind]
    comm_names = [n for n in timers if COMM_TIMER.search(n)]
    comm = sum(timers[n] for n in comm_names)
    p2p = sum(timers[n] for n in comm_names if P2P_TIMER.search(n))
    if "forward-compute" in timers or "backward-compute" in timers:
        compute = timers.get("forward-compute", 0.0) + timers.get("backward-compute", 0.0)
    elif "forward-backward" in timers:
        compute = max(0.0, timers["forward-backward"] - p2p)
    else:
        compute = 0.0
    if "optimizer" in timers:
        compute += max(0.0, timers["optimizer"] - timers.get("params-all-gather", 0.0))
    elif "optimizer-inner-step" in timers:
        compute += timers["optimizer-inner-step"]
    data = timers.get("batch-generator", 0.0)
    b = Bound("unknown", "", source, compute or None, comm if comm_names else None, data or None,
              {n: round(v, 3) for n, v in sorted(timers.items(), key=lambda kv: -kv[1])}, comm_names)
    if not comm_names or not compute:
        b.reason = ("the timers do not split the step: " +
                    ("no communication timer" if not comm_names else "no compute timer") + f" in {source}")
    else:
        tot = compute + comm + data
        parts = {"compute": compute, "communication": comm, "data": data}
        b.kind = max(parts, key=lambda k: parts[k])
        top_comm = max(comm_names, key=lambda n: timers[n])
        b.reason = (f"of {fmt_num(tot)} ms per iteration in the timers ({source}), compute {compute / tot:.0%}, "
                    f"communication {comm / tot:.0%} (largest: {top_comm} {fmt_num(timers[top_comm])} ms)"
                    + (f", data loading {data / tot:.0%}" if data else ""))
    f = next(f for f in reversed(outs) if kind in f.last_block)
    header, lines = f.last_block[kind]
    b.refs = [("line", f.idx, header, None, None)]
    computes: list[str] = [n for n in ("forward-compute", "backward-compute", "forward-backward", "optimizer") if n in timers]
    cite = [max(computes, key=lambda n: timers[n])] if computes else []
    cite += [max(comm_names, key=lambda n: timers[n])] if comm_names else []
    cite += ["batch-generator"] if b.kind == "data" else []
    for n in cite:
        if n in lines:
            b.refs.append(("line", f.idx, lines[n], None, None))
        if kind == "all" and all_t.get(n):
            b.refs.append(("timer", f.idx, header, n, min(all_t[n])))
    return b
