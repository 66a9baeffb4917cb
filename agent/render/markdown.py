"""A Diagnosis as a Markdown post-mortem: `debugger ask --format markdown` (or `--markdown FILE`), and the file the
Slack bot attaches to its thread. Same content and order as the terminal report (headline, job, chain trigger
first, timeline with file:line, recommendations, missing evidence, key files, alternatives, notes, the agent's
part), in the terminal's words (agent/render/plain.py), every claim with every file:line it cites.

Pure: it imports no rich (the Slack bot loads this module, and rich is a terminal library; tests/test_layers.py
rule `i_slack_no_rich`). Nested list items are indented 4 spaces: CommonMark nests under `1. ` with 3, Python-
Markdown needs 4, and 4 works in both. Log lines go in code spans that nothing in them can end (`code`), cut at
300 characters; our words and the agent's are escaped (`md`): no log text or narrative renders as HTML, an image
or a live link where the post-mortem is viewed, and no control character reaches the file (issue 30).
"""

from __future__ import annotations

import re

from trainlog_debugger.agent.render.plain import (cite, clock_time, culprit, job, ranks_line, visible, when,
                                                  why_inconclusive)
from trainlog_debugger.tools.model import Diagnosis

_SPECIAL = re.compile(r"[\\`*_\[\]<>|#!~]")
_URL = re.compile(r"\b(?:https?|ftp|file|javascript|data):[^\s`]*", re.I)


def code(text: str, cut: int = 300) -> str:
    """`text` as ONE code span whatever it holds (issue 30: a backtick in a cited line ended the span, and the
    `<img src=…>` after it rendered live): fenced with more backticks than its longest run, padded where it starts
    or ends with one, its controls made visible, cut at `cut` characters."""
    text = visible(text.strip()[:cut]).replace("\n", " ")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md(text: str) -> str:
    """Our words or the agent's as Markdown text that renders as written: Markdown and HTML characters escaped, a
    URL shown as code (never a live link or image), controls made visible."""
    text = visible(str(text)).replace("\n", " ")
    out, last = [], 0
    for m in _URL.finditer(text):
        out.append(_SPECIAL.sub(lambda c: "\\" + c.group(0), text[last:m.start()]) + code(m.group(0)))
        last = m.end()
    out.append(_SPECIAL.sub(lambda c: "\\" + c.group(0), text[last:]))
    return "".join(out)


def to_markdown(d: Diagnosis) -> str:
    """A post-mortem document: the same content as the terminal report, every claim with its file:line."""
    out = [f"# Post-mortem: {d.status.value} — {d.category}", "",
           f"**{md(d.headline)}**", "", f"- culprit: {md(culprit(d))}", f"- confidence: {d.confidence}"
           + ("" if d.verified else " (citations not all verified)"), f"- job: {md(job(d))}"]
    if when(d):
        out.append(f"- when: {md(when(d))}")
    if ranks_line(d):
        out.append(f"- {md(ranks_line(d))}")
    if why_inconclusive(d):
        out.append(f"- why inconclusive: {md(why_inconclusive(d))}")
    if d.restart:
        out.append(f"- restart: {d.restart}")
    out += ["", "## Root-cause chain", ""]
    for i, f in enumerate(d.chain, 1):
        out.append(f"{i}. **{f.role.value}** — {md(f.summary)}")
        for ev in f.evidence:  # every citation of the step (the terminal's --full shows the first three)
            out.append(f"    - {code(cite(ev))}: {code(ev.text)}")  # 4 spaces: Python-Markdown nests
    if d.timeline:
        out += ["", "## Timeline", "", "| time | rank | file:line | event |", "|---|---|---|---|"]
        for e in d.timeline:
            out.append(f"| {clock_time(e.time, e.evidence.kind, d)} | {'-' if e.evidence.rank is None else e.evidence.rank} | "
                       f"{code(cite(e.evidence))} | {md(e.what)} |")
    for title, items in (("Recommendations", d.recommendations), ("Missing evidence", d.missing),
                         ("Key files", d.key_files)):
        if items:
            out += ["", f"## {title}", ""] + [f"- {code(x) if title == 'Key files' else md(x)}" for x in items]
    if d.alternatives:
        out += ["", "## Alternatives considered", ""]
        out += [f"- {a.category}: {md(a.summary)} — rejected: {md(a.rejected_because)}" for a in d.alternatives]
    if d.notes:
        out += ["", "## Notes", ""] + [f"- {md(n)}" for n in d.notes]
    a = d.agent
    if a is not None:
        out += ["", f"## Agent ({md(a.model)})", ""]
        if a.outcome in ("offline", "api_error", "error", "interrupted"):
            out.append(f"Did not run: {md(a.notice)}")
        else:
            if a.narrative:
                out += [md(a.narrative), ""]
            for c in a.claims:
                out.append(f"- {md(c.statement)} ({'verified' if c.verified else 'removed: ' + md(str(c.dropped_because))})")
                out += [f"    - {code(cite(ev))}: {code(ev.text)}" for ev in c.evidence[:2]]
            out += [f"- changed: {md(ch)}" for ch in a.changes]
            out.append(f"- {a.rounds} round(s); tokens in {a.tokens_in}, out {a.tokens_out}; cost ${a.cost_usd:.4f}")
    return "\n".join(out) + "\n"
