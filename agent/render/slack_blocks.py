"""A Diagnosis as Slack Block Kit: the headline message, the full report, and one part of it re-shown on request.
Pure functions (no I/O): agent/slack/post.py sends what these return.

Slack's limits, from its Block Kit reference (docs.slack.dev/reference/block-kit/blocks): at most 50 blocks in a
message, 3,000 characters in a section's text, 150 in a header's plain_text, and a message's top-level `text` (the
notification fallback) should stay short (40,000 is the hard cap). `fit()` keeps every message inside them: a long
part is split at line ends into several sections, a single over-long line is cut with "…", and past the block cap
the rest is replaced by one context block pointing at the attached Markdown post-mortem, which holds everything.
Our own bound is on the whole message: the fallback and every block's text together stay within MAX_MESSAGE
characters (a long agent answer once made one message of 41,615), so a thread stays readable and no message
nears Slack's cap; the cut is whole blocks, marked by the `rest` block (`was_cut`), and what it left out is in
the uploaded post-mortem.

mrkdwn: `&`, `<` and `>` are escaped in every text that comes from a log or a user (Slack reads `<!channel>` and
`<@U…>` as mentions, `<http://…|x>` as links), and backticks inside quoted log lines are replaced so a line cannot
close its code span. Redaction happens before the text is cut (a `[REDACTED]` mark can be longer than the secret).
"""

from __future__ import annotations

from collections.abc import Callable

from trainlog_debugger.agent.render.plain import clock_time, verdict_line, why_inconclusive
from trainlog_debugger.tools.model import AgentSection, Diagnosis, Evidence

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_FALLBACK = 2900
MAX_MESSAGE = 12_000  # the fallback and all block texts of one message, together (about four screens of a thread)
REST = "rest"         # block_id of the block that says where the rest is
ROWS_TIMELINE = 40  # rows in the message; all of them are in the post-mortem
QUOTE = 300         # characters of a cited log line

PARTS = ("culprit", "chain", "timeline", "recommendations", "alternatives", "missing", "files", "notes")
_WORDS = {  # a follow-up's words → the report part that answers it without the agent
    "timeline": ("timeline", "when", "order", "sequence", "first"),
    "recommendations": ("recommend", "fix", "what should", "what to do", "next step", "restart"),
    "alternatives": ("alternative", "why not", "rule out", "ruled out", "other cause"),
    "missing": ("missing", "what else", "need", "undecided", "inconclusive"),
    "files": ("file", "which log", "where to look"),
    "culprit": ("culprit", "who", "which rank", "which node", "which host", "blame"),
    "chain": ("chain", "cause", "why", "trigger", "proof", "evidence"),
    "notes": ("note", "coverage", "skipped"),
}


def esc(text: str) -> str:
    """Text from a log or a user, safe in mrkdwn."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """A log line inside an inline code span: escaped, backticks replaced, one line."""
    return esc(" ".join(str(text).split())[:QUOTE]).replace("`", "'")


def _cited(ev: Evidence) -> str:
    return f"`{_code(ev.cite())}` `{_code(ev.text)}`"


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def header(text: str) -> dict:
    t = " ".join(text.split())
    return {"type": "header", "text": {"type": "plain_text", "text": t if len(t) <= MAX_HEADER
                                       else t[:MAX_HEADER - 1] + "…"}}


def _split(text: str, n: int = MAX_SECTION) -> list[str]:
    """Pieces of at most n characters, cut at line ends; a single longer line is cut and marked."""
    out, cur = [], ""
    for line in text.split("\n"):
        if len(line) > n:
            line = line[:n - 1] + "…"
        if cur and len(cur) + 1 + len(line) > n:
            out.append(cur)
            cur = line
        else:
            cur = f"{cur}\n{line}" if cur else line
    return out + ([cur] if cur else [])


def fit(parts: list[tuple[str, str]], redact: Callable[[str], str] = lambda s: s,
        more: str = "the rest is in the attached post-mortem", budget: int = MAX_MESSAGE - MAX_FALLBACK) -> list[dict]:
    """(kind, text) parts → blocks within Slack's limits, and within `budget` characters of text in all (the
    message's fallback text has the rest of MAX_MESSAGE). kind: header | section | context | divider."""
    blocks: list[dict] = []
    for kind, text in parts:
        text = redact(text)
        if kind == "header":
            blocks.append(header(text))
        elif kind == "divider":
            blocks.append({"type": "divider"})
        elif kind == "context":
            blocks.append(context(_split(text)[0] if text else " "))
        else:
            blocks += [section(t) for t in _split(text)]
    note = f"… {len(blocks)} more block(s) not shown: {more}"  # the longest the note can be
    keep, used = 0, len(note)
    for b in blocks[:MAX_BLOCKS]:
        if used + text_length(b) > budget:
            break
        keep, used = keep + 1, used + text_length(b)
    if keep < len(blocks):
        keep = min(keep, MAX_BLOCKS - 1)
        rest = context(f"… {len(blocks) - keep} more block(s) not shown: {more}")
        blocks = blocks[:keep] + [{**rest, "block_id": REST}]
    return blocks


def text_length(block: dict) -> int:
    """The characters of text a block holds (what Slack counts against a message)."""
    if block["type"] == "context":
        return sum(len(e.get("text", "")) for e in block["elements"])
    return len((block.get("text") or {}).get("text", ""))


def was_cut(blocks: list[dict]) -> bool:
    """Whether fit() left blocks out (the message then points at the attached post-mortem)."""
    return any(b.get("block_id") == REST for b in blocks)


def fallback(text: str) -> str:
    """The top-level `text` (notifications, screen readers): one short line."""
    t = " ".join(text.split())
    return t if len(t) <= MAX_FALLBACK else t[:MAX_FALLBACK - 1] + "…"


def trigger(d: Diagnosis) -> Evidence | None:
    return d.chain[0].evidence[0] if d.chain and d.chain[0].evidence else None


def headline_parts(d: Diagnosis, label: str, agent_line: str) -> list[tuple[str, str]]:
    """The first answer, within seconds: status, category, culprit, confidence, the trigger line with file:line."""
    out = [("section", f"*{esc(verdict_line(d))}*\n{esc(d.headline)}")]
    t = trigger(d)
    if t is not None:
        out.append(("section", f"trigger: {_cited(t)}"))
    if (why := why_inconclusive(d)):
        out.append(("section", f"why inconclusive: {esc(why)}"))
    out.append(("context", f"bundle: `{_code(label)}` · {esc(agent_line)}"))
    return out


def _chain(d: Diagnosis) -> list[tuple[str, str]]:
    out = []
    for i, f in enumerate(d.chain, 1):
        lines = [f"{i}. *{f.role.value}* — {esc(f.summary)}"] + [f"    {_cited(ev)}" for ev in f.evidence[:2]]
        out.append(("section", "\n".join(lines)))
    return out or [("section", "_no finding in the chain_")]


def _timeline(d: Diagnosis) -> list[tuple[str, str]]:
    rows = [f"`{clock_time(e.time, e.evidence.kind, d)}` "
            f"{'-' if e.evidence.rank is None else 'r' + str(e.evidence.rank)} `{_code(e.evidence.cite())}` "
            f"{esc(e.what)}" for e in d.timeline[:ROWS_TIMELINE]]
    if len(d.timeline) > ROWS_TIMELINE:
        rows.append(f"_… {len(d.timeline) - ROWS_TIMELINE} more event(s) in the attached post-mortem_")
    return [("section", "*Timeline*\n" + "\n".join(rows))] if rows else []


def _listed(title: str, items: list[str]) -> list[tuple[str, str]]:
    return [("section", f"*{title}*\n" + "\n".join(f"• {esc(x)}" for x in items))] if items else []


def _culprit(d: Diagnosis) -> list[tuple[str, str]]:
    t = trigger(d)
    text = f"*{esc(verdict_line(d))}*"
    if d.restart:
        text += f"\nrestart: {esc(d.restart)}"
    if t is not None:
        text += f"\ntrigger: {_cited(t)}"
    return [("section", text)]


def part(d: Diagnosis, name: str) -> list[tuple[str, str]]:
    """One part of the report (PARTS), for a follow-up answered without the agent."""
    return {
        "culprit": lambda: _culprit(d),
        "chain": lambda: [("section", "*Root-cause chain*")] + _chain(d),
        "timeline": lambda: _timeline(d) or [("section", "_no timed event in the bundle_")],
        "recommendations": lambda: _listed("Recommendations", d.recommendations) or [("section", "_none_")],
        "alternatives": lambda: _listed("Alternatives considered", [f"{a.category}: {a.summary} — rejected: "
                                                                    f"{a.rejected_because}" for a in d.alternatives])
        or [("section", "_no alternative was considered_")],
        "missing": lambda: _listed("Missing evidence", d.missing) or [("section", "_nothing missing was noted_")],
        "files": lambda: _listed("Key files", d.key_files) or [("section", "_no key file_")],
        "notes": lambda: _listed("Notes", d.notes + d.coverage.notes) or [("section", "_no notes_")],
    }[name]()


def which_part(question: str) -> str | None:
    """The report part a follow-up asks for, by its words; None when none fits."""
    q = question.lower()
    return next((p for p, words in _WORDS.items() if any(w in q for w in words)), None)


def agent_parts(a: AgentSection | None) -> list[tuple[str, str]]:
    """The agent's part, labelled as such: its verdict as checked by code, the narrative, each claim verified or
    removed, what it changed; or why it did not run."""
    if a is None:
        return []
    if a.outcome in ("offline", "api_error", "error"):
        return [("context", esc(not_run(a)))]
    v = a.verdict
    head = (f"*agent* ({esc(a.model)}): " + (f"{esc(v.get('status', '?'))} {esc(v.get('category', '?'))}, culprit "
            f"{esc(', '.join(map(str, v.get('culprit_ranks') or [])) or 'none')}, confidence "
            f"{esc(v.get('confidence', '?'))}" if v else f"no verified answer ({esc(a.outcome)})"))
    lines = [head] + ([f"> {esc(a.question)}"] if a.question else []) + ([esc(a.narrative)] if a.narrative else [])
    if v.get("summary"):
        lines.append(esc(v["summary"]))
    for c in a.claims:
        mark = "verified" if c.verified else f"REMOVED ({esc(c.dropped_because)})"
        lines.append(f"• {esc(c.statement)} [{mark}]")
        lines += [f"    {_cited(ev)}" for ev in c.evidence[:2]]
    lines += [f"changed: {esc(ch)}" for ch in a.changes]
    return [("section", "\n".join(lines)),
            ("context", f"{a.rounds} round(s), tools: {esc(', '.join(a.tool_calls) or 'none')}; tokens in "
                        f"{a.tokens_in:,} / out {a.tokens_out:,}; cost ${a.cost_usd:.4f}")]


def not_run(a: AgentSection) -> str:
    """Why the agent did not run, said once (offline notices already say "the agent did not run")."""
    why = a.notice or a.outcome
    return why if "did not run" in why else f"agent did not run: {why}"


def report_parts(d: Diagnosis) -> list[tuple[str, str]]:
    """The full report, in the terminal report's order: verdict, chain, timeline, recommendations, alternatives,
    missing evidence, key files, the agent."""
    out = [("header", f"Post-mortem: {d.status.value} — {d.category}"), *part(d, "culprit"),
           ("section", "*Root-cause chain*"), *_chain(d), *_timeline(d),
           *_listed("Recommendations", d.recommendations)]
    if d.alternatives:
        out += part(d, "alternatives")
    out += _listed("Missing evidence", d.missing) + _listed("Key files", d.key_files)
    out += agent_parts(d.agent)
    return out


def as_text(blocks: list[dict]) -> str:
    """The blocks as a reader sees them, roughly (the README's example thread, test messages)."""
    out = []
    for b in blocks:
        if b["type"] == "divider":
            out.append("―" * 20)
        elif b["type"] == "context":
            out += [e.get("text", "") for e in b["elements"]]
        else:
            out.append(b["text"]["text"])
    return "\n".join(out).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
