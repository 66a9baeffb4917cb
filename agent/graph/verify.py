"""The code that checks the model's answer (the issue's step 3): claims are verified by code, never by the prompt.

An answer is submitted through the `submit_answer` tool (schema ANSWER_TOOL). Each check is a rule a reviewer would
apply to a colleague's post-mortem:
- every citation resolves to a real `file:line` of the bundle whose text holds the quote, and is a line a tool
  showed the model (an invented or unseen line is not proof, however plausible);
- the category is one of the closed list (../shared/TAXONOMY.md, tools.model.CATEGORIES);
- a category or culprit that differs from the deterministic facts carries an explanation backed by verified lines;
- a culprit rank appears in a verified cited line or in the deterministic facts;
- "all ranks"/"every rank" is said only when every expected rank has a log;
- `completed` only when the deterministic analysis proved a normal end.
`check` lists the problems (sent back to the model while rounds remain); `finalize` removes what is still
unsupported after the last round and lowers the confidence, so nothing unverified is passed through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from trainlog_debugger.tools.bundle.source import READ_ERRORS
from trainlog_debugger.tools.bundle.reread import read_lines
from trainlog_debugger.tools.model import CATEGORIES, AgentClaim, Diagnosis, Evidence
from trainlog_debugger.tools.ranks import ranks_str


class Citation(BaseModel):
    file: str
    line: int
    quote: str = Field(description="words copied from that line, as the tool showed them")


class Claim(BaseModel):
    statement: str
    citations: list[Citation] = Field(default_factory=list)


class Answer(BaseModel):
    status: Literal["crashed", "hung", "slow", "completed", "inconclusive"]
    category: str
    culprit_ranks: list[int] = Field(default_factory=list)
    culprit_nodes: list[str] = Field(default_factory=list)
    confidence: Literal["high", "medium", "low"] = "low"
    summary: str = ""
    narrative: str = ""
    claims: list[Claim] = Field(default_factory=list)
    disagreement: str | None = None


ANSWER_TOOL = {
    "name": "submit_answer",
    "description": ("Submit the investigation's answer once you are done. Every claim cites file:line lines that a "
                    "tool showed you, with a quote copied from the line. Code checks every citation."),
    "input_schema": {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["crashed", "hung", "slow", "completed", "inconclusive"]},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "culprit_ranks": {"type": "array", "items": {"type": "integer"}},
            "culprit_nodes": {"type": "array", "items": {"type": "string"}},
            "confidence": {"type": "string", "enum": ["high", "medium", "low"]},
            "summary": {"type": "string", "description": "one line: what was at fault"},
            "narrative": {"type": "string", "description": "what happened, in order, in a few sentences"},
            "claims": {"type": "array", "items": {
                "type": "object", "required": ["statement", "citations"],
                "properties": {"statement": {"type": "string"}, "citations": {"type": "array", "items": {
                    "type": "object", "required": ["file", "line", "quote"],
                    "properties": {"file": {"type": "string"}, "line": {"type": "integer"},
                                   "quote": {"type": "string"}}}}}}},
            "disagreement": {"type": "string",
                             "description": "required when category or culprit differs from the deterministic answer"},
        },
        "required": ["status", "category", "culprit_ranks", "confidence", "summary", "claims"],
    },
}

_ALL_RANKS = re.compile(r"(?i)\b(?:all|every|each)(?: (?:the|of the))?(?: \d+)? (?:ranks?|gpus?|workers?|processes)\b")
MIN_QUOTE = 12  # characters a quote must have (or the whole line, when shorter): one letter proves nothing
_CONF = ("low", "medium", "high")


@dataclass
class Checked:
    """The answer after the check: problems in words, and per claim the re-read lines and why it fails (if)."""

    answer: Answer | None
    problems: list[str] = field(default_factory=list)
    claims: list[AgentClaim] = field(default_factory=list)
    verified_ranks: set[int] = field(default_factory=set)
    unsupported_nodes: list[str] = field(default_factory=list)
    all_ranks_unproven: bool = False


def parse(args: dict) -> tuple[Answer | None, list[str]]:
    try:
        return Answer.model_validate(args), []
    except ValidationError as e:
        return None, [f"submit_answer arguments do not fit the schema: {err['loc']}: {err['msg']}"
                      for err in e.errors()[:5]]


def check(answer: Answer, shown: dict[str, str], facts: Diagnosis, sources: dict, redact=lambda s: s,
          unmask=lambda s: s) -> Checked:
    """All the rules above. `shown`: "file:line" → text of every line a tool result showed the model; `sources`:
    bundle rel → Source (re-read from disk here); `redact`/`unmask`: the model's view of the text and back (a file
    name that holds a host name is cited as the model saw it)."""
    out = Checked(answer)
    for c in answer.claims:
        for ci in c.citations:
            ci.file = unmask(ci.file)
    wanted: dict[str, set[int]] = {}
    for c in answer.claims:
        for ci in c.citations:
            wanted.setdefault(ci.file, set()).add(int(ci.line))
    actual: dict[tuple[str, int], str] = {}
    for rel, lines in wanted.items():
        src = sources.get(rel)
        if src is not None and getattr(src, "kind", None) != "fr_dump":
            try:
                actual.update({(rel, n): t for n, t in read_lines(src, lines).items()})
            except READ_ERRORS:
                pass
    for c in answer.claims:
        why, evs = None, []
        if not c.citations:
            why = "cites no line"
        for ci in c.citations:
            at = f"{ci.file}:{ci.line}"
            real = actual.get((ci.file, int(ci.line)))
            if ci.file not in sources:
                why = why or f"{at}: no such file in the bundle"
            elif real is None:
                why = why or f"{at}: no such line"
            elif len(ci.quote.strip()) < min(MIN_QUOTE, len(real.strip())):
                why = why or f"{at}: the quote is too short to prove anything (at least {MIN_QUOTE} characters)"
            elif ci.quote.strip() not in redact(real) and ci.quote.strip() not in real:
                why = why or f"{at}: the quote is not in that line"
            elif at not in shown:
                why = why or f"{at}: no tool showed you this line"
            else:
                evs.append(Evidence(file=ci.file, line=int(ci.line), text=redact(real), rank=_rank_of(real)))
        out.claims.append(AgentClaim(statement=c.statement, evidence=evs, verified=why is None, dropped_because=why))
        if why:
            out.problems.append(f"claim {c.statement[:80]!r}: {why}")
        else:
            out.verified_ranks |= {e.rank for e in evs if e.rank is not None}
            out.verified_ranks |= {int(m) for m in re.findall(r"\brank ?(\d{1,6})\b", c.statement.lower())
                                   if any(f"rank{m}" in e.text.replace(" ", "").lower() for e in evs)}
    if answer.category not in CATEGORIES:
        out.problems.append(f"category {answer.category!r} is not one of {', '.join(CATEGORIES)}")
    verified_any = any(c.verified for c in out.claims)
    if not verified_any:
        out.problems.append("no claim is backed by a verified citation: an answer needs at least one")
    cited_text = " ".join(unmask(e.text) for c in out.claims if c.verified for e in c.evidence)
    out.unsupported_nodes = [n for n in answer.culprit_nodes
                             if unmask(n) not in facts.culprit_nodes and unmask(n) not in cited_text]
    for n in out.unsupported_nodes:
        out.problems.append(f"culprit node {n} appears in no verified cited line and not in the deterministic facts")
    for r in answer.culprit_ranks:
        if r not in facts.culprit_ranks and r not in out.verified_ranks:
            out.problems.append(f"culprit rank {r} appears in no verified cited line and not in the deterministic "
                                f"facts")
    if _differs(answer, facts) and (not (answer.disagreement or "").strip() or not verified_any):
        out.problems.append(f"your answer ({answer.category}, culprit {answer.culprit_ranks or 'none'}) differs from "
                            f"the deterministic facts ({facts.category}, culprit {facts.culprit_ranks or 'none'}) "
                            f"without a disagreement backed by verified citations")
    cov = facts.coverage
    said = " ".join([answer.summary, answer.narrative] + [c.statement for c in answer.claims])
    if cov.missing_ranks and _ALL_RANKS.search(said):
        out.all_ranks_unproven = True
        out.problems.append(f"you say all/every rank, but rank(s) {ranks_str(cov.missing_ranks)} have no log in the "
                            f"bundle")
    if answer.status == "completed" and facts.status.value != "completed":
        out.problems.append("status 'completed' needs a line proving a normal end, and the deterministic analysis "
                            "found none")
    return out


def finalize(ch: Checked, facts: Diagnosis) -> tuple[dict, list[AgentClaim], list[str]]:
    """After the last round: (verdict, claims, changes). Unsupported claims are dropped (kept in the list, marked),
    an unsupported culprit or category reverts to the deterministic one, and confidence drops a level per removal."""
    a = ch.answer
    changes: list[str] = []
    drops = sum(1 for c in ch.claims if not c.verified)
    category, ranks = a.category, list(a.culprit_ranks)
    status = a.status
    if category not in CATEGORIES:
        category = facts.category
        drops += 1
    unsupported = [r for r in ranks if r not in facts.culprit_ranks and r not in ch.verified_ranks]
    if unsupported:
        ranks = [r for r in ranks if r not in unsupported]
        changes.append(f"culprit rank(s) {ranks_str(unsupported)} removed: no verified line supports them")
        drops += 1
    nodes = [n for n in a.culprit_nodes if n not in ch.unsupported_nodes]
    if ch.unsupported_nodes:
        changes.append(f"culprit node(s) {', '.join(ch.unsupported_nodes)} removed: no verified line names them")
        drops += 1
    narrative, summary = a.narrative, a.summary
    if ch.all_ranks_unproven:
        for c in ch.claims:
            if c.verified and _ALL_RANKS.search(c.statement):
                c.verified, c.dropped_because = False, "says all/every rank, but some ranks have no log"
        narrative = " ".join(x for x in re.split(r"(?<=[.!?])\s+", narrative or "") if not _ALL_RANKS.search(x))
        summary = "" if _ALL_RANKS.search(summary or "") else summary
        changes.append("'all ranks' statements removed: some ranks have no log in the bundle")
        drops += 1
    if not any(c.verified for c in ch.claims):
        if (category, sorted(ranks)) != (facts.category, sorted(facts.culprit_ranks)) or status != facts.status.value:
            changes.append("no verified claim: the deterministic verdict stands")
        category, ranks, nodes, status = facts.category, list(facts.culprit_ranks), list(facts.culprit_nodes), \
            facts.status.value
        drops += 1
    if _differs(a.model_copy(update={"category": category, "culprit_ranks": ranks}), facts) and not (
            (a.disagreement or "").strip() and any(c.verified for c in ch.claims)):
        changes.append(f"reverted to the deterministic {facts.category} / culprit {facts.culprit_ranks or 'none'}: "
                       f"the difference was not backed by verified lines (the narrative, written for it, is dropped)")
        category, ranks, nodes, status = facts.category, list(facts.culprit_ranks), list(facts.culprit_nodes), \
            facts.status.value
        narrative, summary = "", ""
        drops += 1
    if status == "completed" and facts.status.value != "completed":
        status = facts.status.value
        drops += 1
    conf = _CONF[max(0, _CONF.index(a.confidence) - min(drops, 2))] if drops else a.confidence
    verdict = {"status": status, "category": category, "culprit_ranks": ranks, "culprit_nodes": nodes,
               "confidence": conf, "summary": summary, "narrative": narrative}
    if category != facts.category:
        changes.append(f"category {facts.category} → {category}: {a.disagreement}")
    elif sorted(ranks) != sorted(facts.culprit_ranks):
        changes.append(f"culprit {facts.culprit_ranks or 'none'} → {ranks or 'none'}: {a.disagreement}")
    if drops and conf != a.confidence:
        changes.append(f"confidence {a.confidence} → {conf}: {drops} unsupported item(s) removed")
    return verdict, ch.claims, changes


def _differs(a: Answer, facts: Diagnosis) -> bool:
    """Differs from deterministic facts that were decisive (an inconclusive deterministic answer binds nothing):
    category, culprit ranks, or how the job ended (an answer may become `inconclusive` without a reason)."""
    if facts.status.value == "inconclusive":
        return False
    return (a.category != facts.category or sorted(a.culprit_ranks) != sorted(facts.culprit_ranks)
            or a.status not in (facts.status.value, "inconclusive"))


def _rank_of(text: str) -> int | None:
    from trainlog_debugger.tools.lines.attribution import attribute_line
    return attribute_line(text).rank
