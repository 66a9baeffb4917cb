"""The size of the next request, and the history folded down when it nears the budget.

Why: every round sends the whole conversation again. A chat of five questions about a hang carried the first four
investigations' tool results (grep output, rank tables, 3,000 tokens each) into every request of the fifth, whose
rounds then cost ~50,000 tokens each, and the fifth follow-up stopped on its token budget after three rounds with
no answer. Nothing had measured a request before it was sent; the budget was only seen once it was spent.

`request_tokens` counts what the next request holds (system prompt, the tools offered, every message and every
tool call's arguments) with the bundled cl100k tokenizer, before it is sent. When it passes `Limits.compact_at`, or
would pass what is left of the question's budget, `compact` rewrites the history, the oldest first:

1. Earlier questions become one message, the digest: the deterministic analysis the conversation started from,
   then each accepted answer as its verdict, its narrative as the verifier left it, and its verified claims, each
   with the `file:line` and the text of the lines that verified it (the ledger, kept in the state by the verify
   node), and the tools already seen. What
   goes is the path to those answers: tool results, rejected drafts, nudges. The digest says that it is one.
2. Then, inside the current question, tool results from the oldest on are replaced by a stub naming the tool, until
   the request is down to `Limits.compact_to`. The last exchange (the model's last reply and the results of its
   calls) is never touched, nor the question, nor any tool_use / tool_result pairing (a stub keeps its
   tool_call_id: the Messages API rejects a tool_use without its tool_result). A call whose result was stubbed may
   be made again without counting as a loop (agent/graph/protocol.py).

The verifier's record of what the model was shown (`shown`) is kept: a line verified earlier can still be cited,
and its text stays in the digest for the model to quote.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from trainlog_debugger.agent.graph.protocol import signature
from trainlog_debugger.agent.llm.tokens import count

DIGEST_HEAD = "[Earlier in this conversation, compacted to stay within the token budget]"
STUB_HEAD = "[compacted]"
PER_MESSAGE = 4      # tokens of framing per message (role, block boundaries)
LEDGER_CLAIMS = 8    # verified claims kept per accepted answer
LEDGER_LINE_CHARS = 200
LEDGER_NARRATIVE_CHARS = 600  # of an accepted answer's narrative, as the verifier left it


def request_tokens(system: str, tools: list[dict], messages: list) -> int:
    """What the next request holds, counted as the model would be sent it (close to Claude's count)."""
    n = count(system) + (count(json.dumps(tools, ensure_ascii=False)) if tools else 0)
    return n + sum(message_tokens(m) for m in messages)


def message_tokens(m) -> int:
    c = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False, default=str)
    n = count(c) + PER_MESSAGE
    for tc in getattr(m, "tool_calls", None) or []:
        n += count(tc["name"]) + count(json.dumps(tc.get("args") or {}, ensure_ascii=False, default=str))
    return n


@dataclass
class Compaction:
    messages: list                     # the history after compaction
    note: str = ""                     # one line for the state: what was folded, tokens before → after
    stubbed: set[str] = field(default_factory=set)  # signatures of the calls whose results were stubbed
    changed: bool = False

    def update(self) -> list:
        """What the messages reducer is returned: drop everything, then the new history (ids kept)."""
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]


def compact(messages: list, turn_start: str | None, digest: str, size, target: int) -> Compaction:
    """The history folded as the module docstring says. `digest`: the text that stands for the earlier questions
    (made by `digest_text`); `size(messages) → tokens` counts a whole request; `target`: tokens to come down to."""
    before = size(messages)
    start = next((i for i, m in enumerate(messages) if turn_start and getattr(m, "id", None) == turn_start), 0)
    out, folded = list(messages), 0
    if start > 0:
        folded = sum(1 for m in messages[:start] if isinstance(m, HumanMessage) and not _is_digest(m))
        out = [HumanMessage(digest, id=f"digest-{uuid.uuid4().hex[:12]}"), *messages[start:]]
    last_ai = max((i for i, m in enumerate(out) if isinstance(m, AIMessage)), default=len(out))
    sigs = {tc.get("id"): signature(tc["name"], tc.get("args") or {})
            for m in out if isinstance(m, AIMessage) for tc in (m.tool_calls or [])}
    stubbed: set[str] = set()
    n = 0
    for i, m in enumerate(out):
        if size(out) <= target or i >= last_ai:
            break
        if isinstance(m, ToolMessage) and not str(m.content).startswith(STUB_HEAD):
            out[i] = ToolMessage(f"{STUB_HEAD} the {m.name} result you saw earlier in this question "
                                 f"({message_tokens(m)} tokens). Call {m.name} again if you need it.",
                                 id=m.id, tool_call_id=m.tool_call_id, name=m.name, status=m.status)
            stubbed.add(sigs.get(m.tool_call_id, ""))
            n += 1
    after = size(out)
    parts = ([f"{folded} earlier question(s) folded into their verified claims"] if start > 0 else []) + (
        [f"{n} older tool result(s) of this question stubbed"] if n else [])
    if not parts:
        return Compaction(list(messages))
    return Compaction(out, f"history compacted: {'; '.join(parts)} ({before:,} → {after:,} tokens)",
                      stubbed - {""}, True)


def digest_text(analysis: str, ledger: list[dict], seen_tools: list[str]) -> str:
    """The message that stands for the questions before this one: the analysis, every accepted answer's verdict
    and verified claims with their lines, the tools already seen."""
    lines = [DIGEST_HEAD, "", analysis.rstrip(), ""]
    if ledger:
        lines.append("Answers already accepted in this conversation (only their verified claims are kept):")
    for e in ledger:
        v = e.get("verdict") or {}
        lines.append(f"- Q: {e.get('question') or '(the first investigation)'} → status {v.get('status')}; "
                     f"category {v.get('category')}; culprit ranks {v.get('culprit_ranks') or 'none'}; "
                     f"{v.get('summary') or ''}".rstrip("; "))
        if e.get("narrative"):
            lines.append(f"  narrative (checked): {e['narrative']}")
        for c in e.get("claims", [])[:LEDGER_CLAIMS]:
            lines.append(f"  - {c['statement']}")
            lines += [f'      "{x["at"]}": {x["text"][:LEDGER_LINE_CHARS]}' for x in c.get("lines", [])]
    if seen_tools:
        lines.append("Tools whose results you have already seen: " + ", ".join(seen_tools)
                     + ". Their results were compacted away; call one again if you need its lines.")
    lines.append("Cite only lines whose text you can see: the ones above, or new tool results.")
    return "\n".join(lines)


def ledger_entry(question: str | None, answer: dict, redact) -> dict:
    """What one accepted answer leaves in the ledger: its verdict, and its verified claims with their lines."""
    claims = [{"statement": redact(c["statement"]),
               "lines": [{"at": redact(f"{e['file']}:{e['line']}"), "text": redact(str(e.get("text", "")).strip())}
                         for e in c.get("evidence", [])]}
              for c in answer.get("claims", []) if c.get("verified")]
    v = answer.get("verdict") or {}
    keep = {k: v.get(k) for k in ("status", "category", "culprit_ranks", "summary")}
    if keep.get("summary"):
        keep["summary"] = redact(str(keep["summary"]))
    narrative = answer.get("narrative")
    return {"question": question, "verdict": keep, "claims": claims,
            "narrative": redact(str(narrative))[:LEDGER_NARRATIVE_CHARS] if narrative else None}


def _is_digest(m) -> bool:
    return isinstance(m.content, str) and m.content.startswith(DIGEST_HEAD)
