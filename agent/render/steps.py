"""`debugger steps` → rich terminal: what was read, stragglers, regressions, the compute/communication split; every
claim with its `file:line`, every cut said."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.plain import cite, short
from trainlog_debugger.agent.render.text import row
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.steps.analyze import METRICS, StepReport
from trainlog_debugger.tools.steps.report import MAX_FINDINGS

MAX_SERIES_ROWS = 12


def _n(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def render_steps(rep: StepReport, console: Console) -> None:
    mbs = rep.bytes / max(rep.seconds, 1e-9) / 1e6
    console.print(Text.assemble(("steps ", "bold"), f"{rep.root}: {rep.files} files, {rep.bytes / 1e6:,.1f} MB in "
                                f"{rep.seconds:.2f}s ({mbs:,.0f} MB/s)"))
    _series(rep, console)
    if rep.series:
        console.print(f"groups: {rep.groups}", highlight=False)
    _outliers(rep, console)
    _regressions(rep, console)
    b = rep.bound
    line = Text.assemble(("bound: ", "bold"), f"{b.kind}-bound" if b.kind != "unknown" else "unknown", f" ({b.reason})")
    console.print(line)
    for ev in b.evidence[:3]:
        console.print(f"  {cite(ev)}  {short(ev.text, 120)}", markup=False, highlight=False, style="dim")
    for note in rep.notes:
        console.print(f"note: {note}", style="yellow", markup=False, highlight=False)


def _series(rep: StepReport, console: Console) -> None:
    if not rep.series:
        return
    by: dict[str, list] = {}
    for s in rep.series:
        by.setdefault(s.metric, []).append(s)
    t = Table(title="step-time series read", title_justify="left", expand=False)
    for col, just in (("metric", "left"), ("ranks", "left"), ("files", "right"), ("points", "right"),
                      ("median", "right"), ("iterations", "left")):
        t.add_column(col, justify=just)
    for metric, ss in list(by.items())[:MAX_SERIES_ROWS]:
        label, unit, _ = METRICS[metric]
        ranks = sorted({s.rank for s in ss if s.rank is not None})
        rk = ranks_str(ranks) + (" + unlabelled" if any(s.rank is None for s in ss) else "")
        vals = sorted(v for s in ss for v in s.ms)
        med = vals[len(vals) // 2] if vals else float("nan")
        lo = min((s.iterations[0] for s in ss if s.iterations), default=None)
        hi = max((s.iterations[-1] for s in ss if s.iterations), default=None)
        row(t, f"{metric} ({label})", rk, len({s.source for s in ss}), f"{len(vals):,}", f"{_n(med)} {unit}",
            f"{lo}-{hi}" if lo is not None else "-")
    console.print(t)


def _outliers(rep: StepReport, console: Console) -> None:
    if not rep.outliers:
        if rep.series:
            console.print("stragglers: none (no rank's median is > 3.5 robust z and ≥ 10 % slower than its group)")
        return
    t = Table(title="stragglers (robust z within the group)", title_justify="left", expand=False)
    for col, just in (("rank", "right"), ("node", "left"), ("metric", "left"), ("median", "right"),
                      ("group median", "right"), ("slower", "right"), ("z", "right"), ("slow intervals", "right"),
                      ("group", "left"), ("evidence (file:line)", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for o in rep.outliers[:MAX_FINDINGS]:
        unit = METRICS[o.metric][1]
        row(t, o.rank, o.node or "-", o.metric, f"{_n(o.value)} {unit}", f"{_n(o.group_median)} {unit}",
            f"{o.gap:+.0%}", "inf" if math.isinf(o.z) else f"{o.z:.1f}",
            "-" if o.slow_intervals is None else f"{o.slow_intervals:.0%}", o.group,
            ", ".join(cite(e) for e in [e for e in o.evidence if e.rank == o.rank][:2]) or "-")
    console.print(t)
    if len(rep.outliers) > MAX_FINDINGS:
        console.print(f"  showing {MAX_FINDINGS} of {len(rep.outliers)} stragglers", style="dim")


def _regressions(rep: StepReport, console: Console) -> None:
    if not rep.regressions:
        if rep.series:
            console.print("regressions: none (no sustained ≥ 20 % step-time shift)")
        return
    for r in rep.regressions:
        unit = METRICS[r.metric][1]
        who = ("all ranks" if r.all_ranks else f"ranks {ranks_str(r.ranks)}" if r.ranks
               else "ranks not attributable from these lines")
        head = Text.assemble(("regression ", "bold red"), f"{r.metric}: {_n(r.before)} → {_n(r.after)} {unit} "
                             f"({r.shift:+.0%}) from iteration {r.iteration}" + (f" at {r.time}" if r.time else "")
                             + f"; {who}" + (f"; nodes {', '.join(r.nodes)}" if r.nodes else "")
                             + (f"; back to normal at iteration {r.recovered_at}" if r.recovered_at is not None else "")
                             + (f"; also in {', '.join(r.also)}" if r.also else ""))
        console.print(head)
        for label, ev in zip(("last fast", "first slow"), r.evidence):
            console.print(f"  {label}: {cite(ev)}  {short(ev.text, 140)}", markup=False, highlight=False, style="dim")
