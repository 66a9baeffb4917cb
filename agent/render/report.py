"""A Diagnosis on the terminal (rich): the report an on-call engineer reads and the agent's part of it. What it says
is in plain.py (shared with the Markdown post-mortem, the HTML page and Slack); this module only lays it out and
styles it. Long lists say what they cut."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from trainlog_debugger.agent.render.plain import (DAEMON_KINDS, cite, clock_note, clock_time, job, ranks_line, short,
                                                  verdict_line, when, why_inconclusive)
from trainlog_debugger.tools.model import AgentSection, Diagnosis
from trainlog_debugger.tools.ranks import ranks_str

STATUS_STYLE = {"crashed": "bold red", "hung": "bold red", "slow": "bold yellow", "cancelled": "bold yellow",
                "completed": "bold green", "inconclusive": "bold magenta"}


def _fit(console: Console, prefix: str, text: str) -> str:
    """`prefix` (which carries the file:line and the time: never cut) and as much of `text` as the terminal shows
    on the same line; piped output keeps the whole line (someone will grep it)."""
    if not console.is_terminal:
        return prefix + text
    room = console.width - len(prefix)
    return prefix + (short(text, room) if room > 20 else short(text, 60))


def render_report(d: Diagnosis, console: Console, *, full: bool = False) -> None:
    """The report an on-call engineer reads: verdict first, the trigger line with its file:line, the chain in a
    few lines, the first thing to do, what is missing, and the verdict again last. `full`: everything (timeline,
    all recommendations, alternatives, every missing item, notes)."""
    p = lambda text="", style=None: console.print(text, markup=False, style=style, highlight=False)  # noqa: E731
    console.print(Text(verdict_line(d), style=STATUS_STYLE.get(d.status.value, "bold")))
    p("why: " + d.headline.split(": ", 1)[-1])
    if (w := why_inconclusive(d)):
        p(f"why inconclusive: {w}", "magenta")
    p(f"job: {job(d)}" + (f"; {when(d)}" if when(d) else ""))
    if (r := ranks_line(d)):
        p(r)
    chain = d.chain if full else d.chain[:4]
    if chain and chain[0].evidence:
        t = chain[0].evidence[0]
        p()
        head = f"trigger  {cite(t)}" + (f"  {clock_time(t.time.iso(), t.kind, d)}" if t.time else "") + \
            (f"  rank {t.rank}" if t.rank is not None else "")
        p(head, "bold")
        p(_fit(console, "  ", t.text.strip()), "dim")
    if chain:
        p("chain (trigger first)", "bold")
        for i, f in enumerate(chain):
            role = {"root_candidate": "trigger", "context": "supports", "cascade": "cascade"}.get(f.role.value,
                                                                                                 f.role.value)
            where = f"  [{cite(f.evidence[0])}]" if f.evidence else ""
            p(_fit(console, f"  {'→ ' if i else ''}{role}: ", f.summary) + where)
            if full:
                for ev in f.evidence[:3]:
                    p(_fit(console, f"      {cite(ev)}  ", ev.text.strip()), "dim")
        if len(d.chain) > len(chain):
            p(f"  (+{len(d.chain) - len(chain)} more steps: --full)", "dim")
    if full and d.timeline:
        p("timeline", "bold")
        for e in d.timeline:
            rank = f"r{e.evidence.rank}" if e.evidence.rank is not None else "-"
            p(_fit(console, f"  {clock_time(e.time, e.evidence.kind, d):<22} {rank:>5}  {cite(e.evidence)}  ", e.what))
    p()
    first = [r for r in d.recommendations if not r.startswith("collect the missing evidence")]
    recs = d.recommendations if full else first[:1]
    if d.restart:
        p(f"restart: {d.restart}", "bold")
    for r in recs:
        p(f"next: {r}" if not full else f"  - {r}")
    if not full and len(first) > 1:
        p(f"  (+{len(first) - 1} more recommendations: --full)", "dim")
    if full and d.key_files:
        p("key files: " + ", ".join(d.key_files))
    if full and d.alternatives:
        p("alternatives considered", "bold")
        for a in d.alternatives[:8]:
            where = f" ({cite(a.evidence[0])})" if a.evidence else ""
            p(f"  - {a.category}: {a.summary}{where} — rejected: {a.rejected_because}")
    if d.missing:
        shown = d.missing if full else d.missing[:1]
        for m in shown:
            p(f"missing: {m}", "yellow")
        if len(d.missing) > len(shown):
            p(f"  (+{len(d.missing) - len(shown)} more missing items: --full)", "dim")
    if full:
        for n in d.notes:
            p(f"note: {n}", "yellow")
    if d.agent is not None:
        render_agent(d.agent, console)
    if (note := clock_note(d)) and (full or (d.chain and d.chain[0].evidence
                                              and d.chain[0].evidence[0].kind in DAEMON_KINDS)):
        p(note, "dim")
    if not full:
        p("(details, timeline and alternatives: --full; machine-readable: --json)", "dim")
    console.print(Text(verdict_line(d), style=STATUS_STYLE.get(d.status.value, "bold")))


def render_agent_after(d: Diagnosis, console: Console) -> None:
    """The agent's section of `d` when the deterministic report was printed before the agent ran (`ask` with a
    key, in text format: agent/cli/chat.py), then the deterministic verdict again, so the output still ends with
    it."""
    if d.agent is None:
        return
    render_agent(d.agent, console)
    console.print(Text(verdict_line(d), style=STATUS_STYLE.get(d.status.value, "bold")))


def render_agent(a: AgentSection, console: Console) -> None:
    """The agent's part, apart from the deterministic report and labelled as such: its verdict as verified by
    code, the narrative, each claim with verified/removed, what it changed and why, rounds, tokens and cost."""
    console.print()
    if a.outcome in ("offline", "api_error", "error", "interrupted"):  # did not run, or did not finish
        console.print(Text.assemble(("agent", "bold"), f": {a.notice}"))
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
