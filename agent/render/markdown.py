"""A Diagnosis as a Markdown post-mortem: `debugger ask --format markdown` (or `--markdown FILE`), and the file the
Slack bot attaches to its thread. Same content and order as the terminal report (headline, job, chain trigger
first, timeline with file:line, recommendations, missing evidence, key files, alternatives, notes, the agent's
part), in the terminal's words (agent/render/plain.py), every claim with every file:line it cites.

Pure: it imports no rich (the Slack bot loads this module, and rich is a terminal library; tests/test_layers.py
rule `i_slack_no_rich`). Nested list items are indented 4 spaces: CommonMark nests under `1. ` with 3, Python-
Markdown needs 4, and 4 works in both. Log lines go in code spans, cut at 300 characters; a `|` in a timeline
event is written `/` so it cannot split the table's cell.
"""

from __future__ import annotations

from trainlog_debugger.agent.render.plain import cite, clock_time, culprit, job, ranks_line, when, why_inconclusive
from trainlog_debugger.tools.model import Diagnosis


def to_markdown(d: Diagnosis) -> str:
    """A post-mortem document: the same content as the terminal report, every claim with its file:line."""
    out = [f"# Post-mortem: {d.status.value} — {d.category}", "",
           f"**{d.headline}**", "", f"- culprit: {culprit(d)}", f"- confidence: {d.confidence}"
           + ("" if d.verified else " (citations not all verified)"), f"- job: {job(d)}"]
    if when(d):
        out.append(f"- when: {when(d)}")
    if ranks_line(d):
        out.append(f"- {ranks_line(d)}")
    if why_inconclusive(d):
        out.append(f"- why inconclusive: {why_inconclusive(d)}")
    if d.restart:
        out.append(f"- restart: {d.restart}")
    out += ["", "## Root-cause chain", ""]
    for i, f in enumerate(d.chain, 1):
        out.append(f"{i}. **{f.role.value}** — {f.summary}")
        for ev in f.evidence:  # every citation of the step (the terminal's --full shows the first three)
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
        if a.outcome in ("offline", "api_error", "error", "interrupted"):
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
