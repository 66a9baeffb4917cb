"""A Diagnosis for people: the rich terminal report and the Markdown post-mortem. Same order in both: headline,
job, chain (trigger → cascade), timeline with file:line, culprits, key files, recommendations, alternatives,
missing evidence. Long lists say what they cut."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from trainlog_debugger.agent.render.text import cite, short
from trainlog_debugger.tools.lines.timestamps import duration, human_time, shift_iso
from trainlog_debugger.tools.model import AgentSection, Diagnosis
from trainlog_debugger.tools.ranks import ranks_str

STATUS_STYLE = {"crashed": "bold red", "hung": "bold red", "slow": "bold yellow", "cancelled": "bold yellow",
                "completed": "bold green", "inconclusive": "bold magenta"}


def _culprit(d: Diagnosis) -> str:
    parts = []
    if d.culprit_ranks:
        parts.append(f"rank{'s' if len(d.culprit_ranks) > 1 else ''} {ranks_str(d.culprit_ranks)}")
    if d.culprit_nodes:
        parts.append(f"node{'s' if len(d.culprit_nodes) > 1 else ''} {', '.join(d.culprit_nodes[:6])}")
    return "; ".join(parts) or "no single culprit"


def verdict_line(d: Diagnosis) -> str:
    """The one-line verdict, printed first and again last: status, category, culprit, confidence."""
    line = f"{d.status.value.upper()}  {d.category}  culprit: {_culprit(d)}  confidence: {d.confidence}"
    if d.agent is not None and d.agent.outcome == "answered" and d.agent.verdict:
        v = d.agent.verdict
        if v.get("category") != d.category or sorted(v.get("culprit_ranks") or []) != sorted(d.culprit_ranks):
            line += (f"  (agent: {v.get('category')}, culprit {ranks_str(v.get('culprit_ranks') or []) or 'none'})")
    return line


def why_inconclusive(d: Diagnosis) -> str | None:
    """One sentence for an inconclusive answer: what the strongest lead is and what would decide it."""
    if d.status.value != "inconclusive":
        return None
    lead = d.chain[0].summary if d.chain else "no line in the bundle points at a cause"
    out = f"the strongest lead is not decisive ({short(lead, 100)})"
    if d.missing:
        out += f"; what would decide it: {d.missing[0]}"
    return out


def _ranks_line(d: Diagnosis) -> str | None:
    cov = d.coverage
    if not (cov.expected_ranks or cov.seen_ranks):
        return None
    if not cov.seen_ranks:
        return f"ranks: no line names a rank ({cov.expected_ranks} expected)"
    return (f"ranks: {len(cov.seen_ranks)} of {cov.expected_ranks or '?'} checked"
            + (f"; no log for {ranks_str(cov.missing_ranks)}" if cov.missing_ranks else ""))


def _when(d: Diagnosis) -> str | None:
    """Start → end on one clock: when either stamp lacks the year, neither shows it."""
    j = d.job
    if not (j.start or j.end):
        return None
    a, b = j.start, j.end
    if a and b and (a.startswith("--") or b.startswith("--")):
        a, b = ("-" + x[4:] if x[:4].isdigit() else x for x in (a, b))
    if not (a and b) or human_time(a) == human_time(b):
        return human_time(a or b)
    span = duration(a, b)
    return f"{human_time(a)} → {human_time(b)}" + (f" ({span})" if span else "")


def _job(d: Diagnosis) -> str:
    j = d.job
    placed = f"{j.ranks} ranks" if j.ranks else None
    if placed and j.nodes:
        placed += f" on {j.nodes} node{'s' if j.nodes > 1 else ''}" + (f" ({j.ranks_per_node} per node)"
                                                                      if j.ranks_per_node else "")
    bits = [j.framework, j.launcher, placed, "resumed from a checkpoint" if j.resumed_from_checkpoint else None]
    return ", ".join(b for b in bits if b) or "unknown"


_DAEMON_KINDS = ("ais_target", "ais_proxy")


def clock_time(iso: str | None, kind: str | None, d: Diagnosis) -> str:
    """One clock per report: a storage daemon's time is shown on the workers' clock, shifted by the offset the
    clock anchoring found, and marked † (see clock_note); every other time as it was logged."""
    if not iso:
        return "-"
    off = d.job.daemon_clock_offset_s
    if kind in _DAEMON_KINDS and off is not None:
        shifted = shift_iso(iso, -off)
        if shifted:
            return human_time(shifted) + " †"
    return human_time(iso)


def clock_note(d: Diagnosis) -> str | None:
    off = d.job.daemon_clock_offset_s
    if off is None:
        return None
    sign = "−" if off >= 0 else "+"
    a = abs(int(round(off)))
    return (f"† AIStore daemon time shown on the workers' clock (daemon {sign} {a // 3600} h {a % 3600 // 60:02d} min, "
            f"from clock anchoring: {d.job.daemon_clock_basis})")


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
    p(f"job: {_job(d)}" + (f"; {_when(d)}" if _when(d) else ""))
    if (r := _ranks_line(d)):
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
                                              and d.chain[0].evidence[0].kind in _DAEMON_KINDS)):
        p(note, "dim")
    if not full:
        p("(details, timeline and alternatives: --full; machine-readable: --json)", "dim")
    console.print(Text(verdict_line(d), style=STATUS_STYLE.get(d.status.value, "bold")))


def render_agent(a: AgentSection, console: Console) -> None:
    """The agent's part, apart from the deterministic report and labelled as such: its verdict as verified by
    code, the narrative, each claim with verified/removed, what it changed and why, rounds, tokens and cost."""
    console.print()
    if a.outcome in ("offline", "api_error"):
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


def to_markdown(d: Diagnosis) -> str:
    """A post-mortem document: the same content as the terminal report, every claim with its file:line."""
    out = [f"# Post-mortem: {d.status.value} — {d.category}", "",
           f"**{d.headline}**", "", f"- culprit: {_culprit(d)}", f"- confidence: {d.confidence}"
           + ("" if d.verified else " (citations not all verified)"), f"- job: {_job(d)}"]
    if _when(d):
        out.append(f"- when: {_when(d)}")
    if why_inconclusive(d):
        out.append(f"- why inconclusive: {why_inconclusive(d)}")
    if d.restart:
        out.append(f"- restart: {d.restart}")
    out += ["", "## Root-cause chain", ""]
    for i, f in enumerate(d.chain, 1):
        out.append(f"{i}. **{f.role.value}** — {f.summary}")
        for ev in f.evidence[:2]:
            out.append(f"    - `{cite(ev)}`: `{ev.text.strip()[:300]}`")  # 4 spaces: Python-Markdown nests
    if d.timeline:
        out += ["", "## Timeline", "", "| time | rank | file:line | event |", "|---|---|---|---|"]
        for e in d.timeline:
            out.append(f"| {clock_time(e.time, e.evidence.kind, d)} | {'-' if e.evidence.rank is None else e.evidence.rank} | "
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
                out += [f"    - `{cite(ev)}`: `{ev.text.strip()[:300]}`" for ev in c.evidence[:2]]
            out += [f"- changed: {ch}" for ch in a.changes]
            out.append(f"- {a.rounds} round(s); tokens in {a.tokens_in}, out {a.tokens_out}; cost ${a.cost_usd:.4f}")
    return "\n".join(out) + "\n"
