"""A Diagnosis for people: the rich terminal report and the Markdown post-mortem. Same order in both: headline,
job, chain (trigger → cascade), timeline with file:line, culprits, key files, recommendations, alternatives,
missing evidence. Long lists say what they cut."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.text import cite, row, short
from trainlog_debugger.tools.model import AgentSection, Diagnosis
from trainlog_debugger.tools.ranks import ranks_str

TIMELINE_CAP = 20
STATUS_STYLE = {"crashed": "bold red", "hung": "bold red", "slow": "bold yellow", "cancelled": "bold yellow",
                "completed": "bold green", "inconclusive": "bold magenta"}


def _culprit(d: Diagnosis) -> str:
    parts = []
    if d.culprit_ranks:
        parts.append(f"rank{'s' if len(d.culprit_ranks) > 1 else ''} {ranks_str(d.culprit_ranks)}")
    if d.culprit_nodes:
        parts.append(f"node{'s' if len(d.culprit_nodes) > 1 else ''} {', '.join(d.culprit_nodes[:6])}")
    return "; ".join(parts) or "no single culprit"


def _job(d: Diagnosis) -> str:
    j = d.job
    bits = [f"framework {j.framework}" if j.framework else None, f"launcher {j.launcher}" if j.launcher else None,
            f"{j.ranks} ranks" if j.ranks else None, f"{j.nodes} nodes" if j.nodes else None,
            f"{j.ranks_per_node} per node" if j.ranks_per_node else None,
            "resumed from a checkpoint" if j.resumed_from_checkpoint else None,
            f"from {j.start}" if j.start else None, f"to {j.end}" if j.end else None]
    return ", ".join(b for b in bits if b) or "unknown"


def render_report(d: Diagnosis, console: Console) -> None:
    console.print(Text.assemble((d.status.value.upper(), STATUS_STYLE.get(d.status.value, "bold")), "  ",
                                (d.category, "bold"), f"  culprit: {_culprit(d)}  confidence: {d.confidence}"
                                + ("" if d.verified else "  (citations NOT all verified)")))
    console.print(d.headline, markup=False)
    console.print(f"job: {_job(d)}", markup=False)
    cov = d.coverage
    if cov.expected_ranks or cov.seen_ranks:
        console.print(f"ranks checked: {len(cov.seen_ranks)} of {cov.expected_ranks or '?'} expected"
                      + (f"; no log for {ranks_str(cov.missing_ranks)}" if cov.missing_ranks else ""), markup=False)
    if d.chain:
        console.print("\n[bold]root-cause chain[/bold] (trigger first)")
        for i, f in enumerate(d.chain):
            arrow = "  " if i == 0 else "→ "
            role = {"root_candidate": "TRIGGER", "context": "supports", "cascade": "cascade"}.get(f.role.value, f.role.value)
            console.print(f"{arrow}[{role}] {f.summary}", markup=False)
            for ev in f.evidence[:2]:
                console.print(f"      {cite(ev)}  {short(ev.text, 150)}", style="dim", markup=False)
    if d.timeline:
        t = Table(title="timeline", title_justify="left")
        for c in ("time", "rank", "file:line", "event"):
            t.add_column(c)
        for e in d.timeline[:TIMELINE_CAP]:
            row(t, e.time or "-", "-" if e.evidence.rank is None else e.evidence.rank, cite(e.evidence), short(e.what, 90))
        console.print(t)
        if len(d.timeline) > TIMELINE_CAP:
            console.print(f"  showing {TIMELINE_CAP} of {len(d.timeline)} events", style="dim")
    if d.key_files:
        console.print("[bold]key files[/bold]: " + ", ".join(d.key_files), markup=True, highlight=False)
    if d.recommendations or d.restart:
        console.print("[bold]recommendations[/bold]")
        if d.restart:
            console.print(f"  restart: {d.restart}", markup=False)
        for r in d.recommendations:
            console.print(f"  - {r}", markup=False)
    if d.alternatives:
        console.print("[bold]alternatives considered[/bold]")
        for a in d.alternatives[:8]:
            where = f" ({cite(a.evidence[0])})" if a.evidence else ""
            console.print(f"  - {a.category}: {a.summary}{where} — rejected: {a.rejected_because}", markup=False)
    if d.missing:
        console.print("[bold]missing evidence[/bold]")
        for m in d.missing:
            console.print(f"  - {m}", markup=False)
    for n in d.notes:
        console.print(f"note: {n}", style="yellow", markup=False)
    if d.agent is not None:
        render_agent(d.agent, console)


def render_agent(a: AgentSection, console: Console) -> None:
    """The agent's part, apart from the deterministic report and labelled as such: its verdict as verified by
    code, the narrative, each claim with verified/removed, what it changed and why, rounds, tokens and cost."""
    console.print()
    if a.outcome in ("offline", "api_error"):
        console.print(f"[bold]agent[/bold]: did not run: {a.notice}", markup=True, highlight=False)
        return
    v = a.verdict
    head = (f"[bold]agent[/bold] ({a.model}): " + (f"{v.get('status', '?')} {v.get('category', '?')}, culprit "
            f"{ranks_str(v.get('culprit_ranks') or []) or 'none'}, confidence {v.get('confidence', '?')}"
            if v else f"no verified answer ({a.outcome})"))
    console.print(head, markup=True, highlight=False)
    if a.question:
        console.print(f"  question: {a.question}", markup=False)
    if a.narrative:
        console.print(f"  {a.narrative}", markup=False)
    for c in a.claims:
        mark = "verified" if c.verified else f"REMOVED ({c.dropped_because})"
        console.print(f"  - {c.statement}  [{mark}]", markup=False, style=None if c.verified else "dim")
        for ev in c.evidence[:2]:
            console.print(f"      {cite(ev)}  {short(ev.text, 140)}", style="dim", markup=False)
    for ch in a.changes:
        console.print(f"  changed: {ch}", markup=False)
    console.print(f"  {a.rounds} round(s), tools: {', '.join(a.tool_calls) or 'none'}; tokens in {a.tokens_in:,} / out "
                  f"{a.tokens_out:,}; cost ${a.cost_usd:.4f}{'' if a.cost_exact else ' (estimate)'}", style="dim",
                  markup=False)


def to_markdown(d: Diagnosis) -> str:
    """A post-mortem document: the same content as the terminal report, every claim with its file:line."""
    out = [f"# Post-mortem: {d.status.value} — {d.category}", "",
           f"**{d.headline}**", "", f"- culprit: {_culprit(d)}", f"- confidence: {d.confidence}"
           + ("" if d.verified else " (citations not all verified)"), f"- job: {_job(d)}"]
    if d.restart:
        out.append(f"- restart: {d.restart}")
    out += ["", "## Root-cause chain", ""]
    for i, f in enumerate(d.chain, 1):
        out.append(f"{i}. **{f.role.value}** — {f.summary}")
        for ev in f.evidence[:2]:
            out.append(f"   - `{cite(ev)}`: `{ev.text.strip()[:300]}`")
    if d.timeline:
        out += ["", "## Timeline", "", "| time | rank | file:line | event |", "|---|---|---|---|"]
        for e in d.timeline:
            out.append(f"| {e.time or '-'} | {'-' if e.evidence.rank is None else e.evidence.rank} | "
                       f"`{cite(e.evidence)}` | {e.what.replace('|', '/')} |")
    for title, items in (("Recommendations", d.recommendations), ("Missing evidence", d.missing),
                         ("Key files", [f"`{k}`" for k in d.key_files])):
        if items:
            out += ["", f"## {title}", ""] + [f"- {x}" for x in items]
    if d.alternatives:
        out += ["", "## Alternatives considered", ""]
        out += [f"- {a.category}: {a.summary} — rejected: {a.rejected_because}" for a in d.alternatives]
    if d.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in d.notes]
    a = d.agent
    if a is not None:
        out += ["", f"## Agent ({a.model})", ""]
        if a.outcome in ("offline", "api_error"):
            out.append(f"Did not run: {a.notice}")
        else:
            if a.narrative:
                out += [a.narrative, ""]
            for c in a.claims:
                out.append(f"- {c.statement} ({'verified' if c.verified else 'removed: ' + str(c.dropped_because)})")
                out += [f"  - `{cite(ev)}`: `{ev.text.strip()[:300]}`" for ev in c.evidence[:2]]
            out += [f"- changed: {ch}" for ch in a.changes]
            out.append(f"- {a.rounds} round(s); tokens in {a.tokens_in}, out {a.tokens_out}; cost ${a.cost_usd:.4f}")
    return "\n".join(out) + "\n"
