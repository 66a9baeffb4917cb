"""A Diagnosis on the terminal (rich): the report an on-call engineer reads and the agent's part of it. What it says
is in plain.py (shared with the Markdown post-mortem, the HTML page and Slack); this module only lays it out and
styles it. Long lists say what they cut."""

from __future__ import annotations

from rich.console import Console

from trainlog_debugger.agent.render.fit import fitted, proof, sentence
from trainlog_debugger.agent.render.plain import (DAEMON_KINDS, cite, clock_note, clock_time, job, ranks_line,
                                                  verdict_line, when, why_inconclusive)
from trainlog_debugger.tools.model import AgentSection, Diagnosis
from trainlog_debugger.tools.ranks import ranks_str

STATUS_STYLE = {"crashed": "bold red", "hung": "bold red", "slow": "bold yellow", "cancelled": "bold yellow",
                "completed": "bold green", "inconclusive": "bold magenta"}


def render_report(d: Diagnosis, console: Console, *, full: bool = False) -> None:
    """The report an on-call engineer reads: verdict first, the trigger line with its file:line, the chain in a
    few lines, the first thing to do, what is missing, and the verdict again last. `full`: everything (timeline,
    all recommendations, alternatives, every missing item, notes)."""
    p = lambda text="", style=None: sentence(console, text, style)  # noqa: E731  (wrapped on a terminal: fit.py)
    verdict(console, d)
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
        # a time the line borrowed from an earlier line of its rank (a traceback has none of its own) is when that
        # line was printed, a bound, not the line's own: said so, never shown as if the line had stated it
        borrowed = t.time.meta("inferred_from_line") if t.time else None
        head = f"trigger  {cite(t)}" + (f"  {'after ' if borrowed else ''}{clock_time(t.time.iso(), t.kind, d)}"
                                        f"{f' (line {borrowed})' if borrowed else ''}" if t.time else "") + \
            (f"  rank {t.rank}" if t.rank is not None else "")
        p(head, "bold")
        proof(console, "  ", t.text)  # the decisive words always on screen: wrapped, never cut
    if chain:
        p("chain (trigger first)", "bold")
        for i, f in enumerate(chain):
            role = {"root_candidate": "trigger", "context": "supports", "cascade": "cascade"}.get(f.role.value,
                                                                                                 f.role.value)
            where = f"  [{cite(f.evidence[0])}]" if f.evidence else ""
            if full:
                p(f"  {'→ ' if i else ''}{role}: {f.summary}{where}")
                for ev in f.evidence[:3]:
                    proof(console, f"      {cite(ev)}  ", ev.text)
            else:
                fitted(console, f"  {'→ ' if i else ''}{role}: ", f.summary, where)
        if len(d.chain) > len(chain):
            p(f"  (+{len(d.chain) - len(chain)} more steps: --full)", "dim")
    if full and d.timeline:
        p("timeline", "bold")
        for e in d.timeline:
            rank = f"r{e.evidence.rank}" if e.evidence.rank is not None else "-"
            p(f"  {clock_time(e.time, e.evidence.kind, d):<22} {rank:>5}  {cite(e.evidence)}  {e.what}")
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
    verdict(console, d)


def verdict(console: Console, d: Diagnosis) -> None:
    """The verdict line in its status's colour, wrapped like every sentence on a terminal."""
    sentence(console, verdict_line(d), STATUS_STYLE.get(d.status.value, "bold"), hang=2)


def render_agent_after(d: Diagnosis, console: Console) -> None:
    """The agent's section of `d` when the deterministic report was printed before the agent ran (`ask` with a
    key, in text format: agent/cli/chat.py), then the deterministic verdict again, so the output still ends with
    it."""
    if d.agent is None:
        return
    render_agent(d.agent, console)
    verdict(console, d)


def render_agent(a: AgentSection, console: Console) -> None:
    """The agent's part, apart from the deterministic report and labelled as such: its verdict as verified by
    code, the narrative, each claim with verified/removed, what it changed and why, rounds, tokens and cost."""
    p = lambda text="", style=None: sentence(console, text, style)  # noqa: E731
    p()
    if a.outcome in ("offline", "api_error", "error", "interrupted"):  # did not run, or did not finish
        p(f"agent: {a.notice}")
        return
    v = a.verdict
    p(f"agent ({a.model}): " + (f"{v.get('status', '?')} {v.get('category', '?')}, culprit "
      f"{ranks_str(v.get('culprit_ranks') or []) or 'none'}, confidence {v.get('confidence', '?')}"
      if v else f"no verified answer ({a.outcome})"), "bold")
    if a.question:
        p(f"  question: {a.question}")
    if a.narrative:
        p(f"  {a.narrative}")
    for c in a.claims:
        mark = "verified" if c.verified else f"REMOVED ({c.dropped_because})"
        p(f"  - {c.statement}  [{mark}]", None if c.verified else "dim")
        for ev in c.evidence[:2]:
            proof(console, f"      {cite(ev)}  ", ev.text)
    for ch in a.changes:
        p(f"  changed: {ch}")
    p(f"  {a.rounds} round(s), tools: {', '.join(a.tool_calls) or 'none'}; tokens in {a.tokens_in:,} / out "
      f"{a.tokens_out:,}; cost ${a.cost_usd:.4f}{'' if a.cost_exact else ' (estimate)'}", "dim")
