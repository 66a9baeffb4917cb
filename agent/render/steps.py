"""`debugger steps` → rich terminal: what was read, stragglers, regressions, the loss curve, the
compute/communication split; every claim with its `file:line`, every cut said."""

from __future__ import annotations

import math

from rich.console import Console
from rich.text import Text

from trainlog_debugger.agent.render.fit import proof
from trainlog_debugger.agent.render.plain import cite
from trainlog_debugger.agent.render.ranksets import rank_text
from trainlog_debugger.tools.groups import parse_rank_set
from trainlog_debugger.tools.steps.analyze import METRICS, StepReport
from trainlog_debugger.tools.steps.report import MAX_FINDINGS, series_groups

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
    _divergence(rep, console)
    b = rep.bound
    line = Text.assemble(("bound: ", "bold"), f"{b.kind}-bound" if b.kind != "unknown" else "unknown", f" ({b.reason})")
    console.print(line)
    for ev in b.evidence[:3]:
        proof(console, f"  {cite(ev)}  ", ev.text)
    for note in rep.notes:
        console.print(f"note: {note}", style="yellow", markup=False, highlight=False)


def _series(rep: StepReport, console: Console) -> None:
    """The series grouped by step-time behaviour (tools.steps.report.series_groups): per metric the band of ranks
    with its spread, then each straggler or shifted set on a line of its own. Why not a row per rank: at 4,096
    ranks the band is one line and the one slow rank stands out."""
    if not rep.series:
        return
    groups = series_groups(rep)
    console.print(Text.assemble(("step-time series", "bold"), f" ({len(rep.series):,} series; ranks grouped by "
                                                              "step-time behaviour)"))
    metric = None
    for g in groups:
        if g["metric"] != metric:
            metric = g["metric"]
            label, unit, _ = METRICS[metric]
            console.print(f"  {metric} ({label}), {unit}", markup=False, highlight=False)
        its = (f"iterations {g['first_iteration']}-{g['last_iteration']}" if g["first_iteration"] is not None
               else "no iterations")
        who = f"ranks {rank_text(parse_rank_set(g['ranks']), 40)}" if g["rank_count"] else "no rank label"
        if g["kind"] == "straggler":
            z = g["z"] if g["z"] == "inf" else f"{g['z']:.1f}"
            slow = "" if g["slow_intervals"] is None else f", slow in {g['slow_intervals']:.0%} of intervals"
            ex = ", ".join(e["file"] + ":" + str(e["line"]) for e in g["exemplars"][:1])
            console.print(f"    straggler rank {g['ranks']}{' on ' + g['node'] if g['node'] else ''}: median "
                          f"{_n(g['median'])} vs {_n(g['group_median'])} ({g['gap']:+.0%}, z {z}){slow}; "
                          f"{g['points']:,} points, {its}" + (f"; {ex}" if ex else ""), markup=False, highlight=False)
        elif g["kind"] == "shifted":
            console.print(f"    shifted at iteration {g['iteration']}: {who} ({g['rank_count']:,}): "
                          f"{_n(g['before'])} → {_n(g['after'])} ({g['shift']:+.0%})", markup=False, highlight=False)
        else:
            name = {"band": "band", "stragglers": "more stragglers", "unranked": "unlabelled"}[g["kind"]]
            spread = (f"median {_n(g['median'])}, p10 {_n(g['p10'])}, p90 {_n(g['p90'])}" if g["rank_count"] > 1
                      else f"median {_n(g['median'])}")
            console.print(f"    {name}: {who}" + (f" ({g['rank_count']:,})" if g["rank_count"] else "")
                          + f": {spread}; {g['points']:,} points in {g['series']:,} series, {its}",
                          markup=False, highlight=False)


def _outliers(rep: StepReport, console: Console) -> None:
    if not rep.outliers and rep.series:
        console.print("stragglers: none (no rank's median is > 3.5 robust z and ≥ 10 % slower than its group)")
    elif len(rep.outliers) > MAX_FINDINGS:
        console.print(f"  showing {MAX_FINDINGS} of {len(rep.outliers)} stragglers on lines of their own", style="dim")


def _divergence(rep: StepReport, console: Console) -> None:
    """The loss curve (tools/steps/divergence.py): said when it diverged, and that it was read when it did not."""
    dv = rep.divergence
    if dv is None:
        if any(s.metric == "loss" for s in rep.training):
            console.print("loss: no divergence (no lasting rise, collapse to 0 or non-finite value)")
        return
    console.print(Text.assemble(("loss diverged ", "bold red"), dv.summary()))
    for label, ev in zip(("onset", "before", "last"), dv.evidence):
        proof(console, f"  {label}: {cite(ev)}  ", ev.text)


def _regressions(rep: StepReport, console: Console) -> None:
    if not rep.regressions:
        if rep.series:
            console.print("regressions: none (no sustained ≥ 20 % step-time shift)")
        return
    for r in rep.regressions:
        unit = METRICS[r.metric][1]
        who = ("all ranks" if r.all_ranks else f"ranks {rank_text(r.ranks)}" if r.ranks
               else "ranks not attributable from these lines")
        head = Text.assemble(("regression ", "bold red"), f"{r.metric}: {_n(r.before)} → {_n(r.after)} {unit} "
                             f"({r.shift:+.0%}) from iteration {r.iteration}" + (f" at {r.time}" if r.time else "")
                             + f"; {who}" + (f"; nodes {', '.join(r.nodes)}" if r.nodes else "")
                             + (f"; back to normal at iteration {r.recovered_at}" if r.recovered_at is not None else "")
                             + (f"; also in {', '.join(r.also)}" if r.also else ""))
        console.print(head)
        for label, ev in zip(("last fast", "first slow"), r.evidence):
            proof(console, f"  {label}: {cite(ev)}  ", ev.text)
