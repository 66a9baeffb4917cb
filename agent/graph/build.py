"""The investigation as a LangGraph: evidence → investigate ⇄ tools → verify → report.

`build_graph(model, tools, checkpointer)` is a factory: `model` is any LangChain chat model that can bind tools
(ChatAnthropic for users, a scripted fake in tests), `tools` a Toolbox over one bundle (agent/graph/toolbox.py),
`checkpointer` a LangGraph checkpointer (SQLite on disk for `--resume`, memory in tests, None for one shot).

- evidence: the deterministic diagnosis, already made and verified, is the starting point; its cited lines count
  as shown. A follow-up question in the same thread starts here too, with the history kept.
- investigate: one model call with the read-only tools and `submit_answer`. Rounds and tokens are bounded
  (Limits); past either bound the graph stops and says so.
- tools: runs the model's tool calls (Toolbox.call), records the lines each result showed.
- verify: code checks the submitted answer (agent/graph/verify.py). Problems go back to the model as the
  `submit_answer` tool result while verify rounds remain; after the last, unsupported claims are removed.
- report: the AgentSection (tools.model) beside the deterministic Diagnosis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from trainlog_debugger.agent.graph import verify as V
from trainlog_debugger.tools.model import AgentSection

TOOL_SPECS = [
    {"name": "overview", "description": "Ranks seen/expected/missing, nodes, files by kind, and the deterministic "
     "answer.", "input_schema": {"type": "object", "properties": {}}},
    {"name": "where_ranks_stop", "description": "Every rank's last log line, earliest first.",
     "input_schema": {"type": "object", "properties": {"limit": {"type": "integer", "description": "max ranks (64)"}}}},
    {"name": "grep", "description": "A Python regex over every line of every rank; matches grouped by rank, and the "
     "ranks with no match.", "input_schema": {"type": "object", "required": ["pattern"], "properties": {
         "pattern": {"type": "string"}, "ignore_case": {"type": "boolean"}}}},
    {"name": "read_lines", "description": "The raw lines around file:line (at most 60).",
     "input_schema": {"type": "object", "required": ["file", "line"], "properties": {
         "file": {"type": "string"}, "line": {"type": "integer"}, "before": {"type": "integer"},
         "after": {"type": "integer"}}}},
    {"name": "nccl_state", "description": "The collective state of every rank per process group: the stuck "
     "collective, who never entered it, who was notified.", "input_schema": {"type": "object", "properties": {}}},
    {"name": "step_times", "description": "Step-time outlier ranks and regressions.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "storage", "description": "The AIStore side: stats deltas, pressured targets, errors.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "timeline", "description": "The deterministic timeline with its lines.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "rank_diff", "description": "Line templates that only a few ranks printed, or only a few lack.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "explain_line", "description": "What a log line means according to the upstream that prints it (NCCL, "
     "PyTorch, CUDA, Xid, the kernel, Slurm, Ray, ...): the matching message templates with category, role "
     "(trigger/cascade/noise/context), meaning, action and the upstream file:line; and the lexicon's reading. Give "
     "`text` (a line) or `file` and `line` (a line of the bundle).",
     "input_schema": {"type": "object", "properties": {"text": {"type": "string"}, "file": {"type": "string"},
                                                       "line": {"type": "integer"}}}},
]


@dataclass(frozen=True)
class Limits:
    max_rounds: int = 12          # model calls per question
    max_verify_rounds: int = 2    # answers sent back with problems before the rest is removed
    budget_tokens: int = 200_000  # input + output tokens per question


def _merge(a: dict, b: dict) -> dict:
    return {**(a or {}), **(b or {})}


class AgentState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    shown: Annotated[dict, _merge]          # "file:line" → text, every line a tool showed the model
    question: str | None
    rounds: int
    verify_rounds: int
    tokens_in: int
    tokens_out: int
    tool_calls: list   # this question's
    problems: list     # this question's
    outcome: str | None
    answer: dict | None
    section: dict | None


def evidence_text(diag, question: str | None, redact=lambda s: s) -> str:
    """The first message: the deterministic answer with its cited lines, then the question. Each quoted line is
    redacted whole before it is shortened (a token cut in half is no longer recognisable as one)."""
    lines = ["Deterministic analysis of the bundle (every line of every rank was read):",
             f"status: {diag.status.value}; category: {diag.category}; culprit ranks: {diag.culprit_ranks or 'none'}; "
             f"culprit nodes: {diag.culprit_nodes or 'none'}; confidence: {diag.confidence}",
             f"headline: {diag.headline}",
             f"ranks seen: {len(diag.coverage.seen_ranks)} of {diag.coverage.expected_ranks or '?'} expected"
             + (f"; no log for {len(diag.coverage.missing_ranks)} rank(s)" if diag.coverage.missing_ranks else ""),
             "chain (trigger first):"]
    for f in diag.chain[:8]:
        lines.append(f"- [{f.role.value}] {f.summary}")
        lines += [f'    "{e.cite()}": {redact(e.text)[:300]}' for e in f.evidence[:3]]
    if diag.alternatives:
        lines.append("alternatives considered: " + "; ".join(f"{a.category}: {redact(a.summary)[:120]}"
                                                             for a in diag.alternatives[:4]))
    if diag.missing:
        lines.append("missing evidence: " + "; ".join(diag.missing[:4]))
    lines.append("")
    lines.append(f"Question: {question}" if question else
                 "Investigate: confirm or correct this answer with the tools, then call submit_answer.")
    return "\n".join(lines)


def build_graph(model, tools, checkpointer=None, *, limits: Limits = Limits(), system_prompt: str | None = None):
    """The compiled graph. `tools`: a Toolbox (its `.inv` is the Investigation whose diagnosis is the facts)."""
    if system_prompt is None:
        from trainlog_debugger.prompts import load
        system_prompt = load("investigator")
    bound = model.bind_tools(TOOL_SPECS + [V.ANSWER_TOOL])
    facts = tools.inv.diagnosis
    redact = tools.redact

    def evidence(state: AgentState) -> dict:
        q = state.get("question")
        shown: dict[str, str] = {}
        repair = []
        if not state.get("messages"):
            text = redact(evidence_text(facts, q, redact))
            for f in facts.chain[:8]:
                for e in f.evidence[:3]:
                    if redact(f'"{e.cite()}"') in text and redact(e.text)[:40] in text:
                        shown[e.cite()] = e.text
            msg = HumanMessage(text)
        else:
            repair = _unanswered(state["messages"])
            msg = HumanMessage(redact(q or "Go on."))
        return {"messages": repair + [msg], "shown": shown, "rounds": 0, "verify_rounds": 0, "tokens_in": 0, "tokens_out": 0,
                "outcome": None, "answer": None, "section": None, "tool_calls": [], "problems": []}

    def investigate(state: AgentState) -> dict:
        msgs = [SystemMessage(system_prompt)] + list(state["messages"])
        ai = bound.invoke(msgs)
        usage = getattr(ai, "usage_metadata", None) or {}
        return {"messages": [ai], "rounds": state.get("rounds", 0) + 1,
                "tokens_in": state.get("tokens_in", 0) + int(usage.get("input_tokens", 0) or 0),
                "tokens_out": state.get("tokens_out", 0) + int(usage.get("output_tokens", 0) or 0)}

    def route(state: AgentState) -> str:
        ai = state["messages"][-1]
        calls = getattr(ai, "tool_calls", None) or []
        if any(c["name"] == "submit_answer" for c in calls):
            return "verify"
        over = state.get("tokens_in", 0) + state.get("tokens_out", 0) >= limits.budget_tokens
        if over or state.get("rounds", 0) >= limits.max_rounds:
            return "stop"
        return "tools" if calls else "nudge"

    def run_tools(state: AgentState) -> dict:
        ai = state["messages"][-1]
        out, shown, names = [], {}, []
        for c in ai.tool_calls:
            res = tools.call(c["name"], dict(c.get("args") or {}))
            text, evs = tools.render(res)
            shown.update({e.cite(): e.text for e in evs})
            names.append(c["name"])
            out.append(ToolMessage(text, tool_call_id=c.get("id") or "", name=c["name"], status="success"
                                   if res.status != "error" else "error"))
        return {"messages": out, "shown": shown, "tool_calls": list(state.get("tool_calls") or []) + names}

    def nudge(state: AgentState) -> dict:
        return {"messages": [HumanMessage("Call submit_answer with your answer (cited lines only).")]}

    def stop(state: AgentState) -> dict:
        over = state.get("tokens_in", 0) + state.get("tokens_out", 0) >= limits.budget_tokens
        return {"messages": _unanswered(state["messages"], "not run: the investigation's limit was reached"),
                "outcome": "budget" if over else "no_answer",
                "problems": list(state.get("problems") or []) + [f"stopped after {state.get('rounds', 0)} round(s): "
                             + (f"token budget {limits.budget_tokens} reached" if over else
                                f"round limit {limits.max_rounds} reached") + " before an answer"]}

    def verify_node(state: AgentState) -> dict:
        ai = state["messages"][-1]
        calls = ai.tool_calls
        sub = next(c for c in calls if c["name"] == "submit_answer")
        replies = [ToolMessage("not run: an answer was submitted in the same turn", tool_call_id=c["id"],
                               name=c["name"]) for c in calls if c is not sub]
        answer, parse_problems = V.parse(dict(sub.get("args") or {}))
        ch = V.check(answer, state.get("shown", {}), facts, tools.sources, redact, tools.unmask) if answer else None
        problems = parse_problems or (ch.problems if ch else [])
        vr = state.get("verify_rounds", 0) + 1
        last = vr > limits.max_verify_rounds or state.get("rounds", 0) >= limits.max_rounds or \
            state.get("tokens_in", 0) + state.get("tokens_out", 0) >= limits.budget_tokens
        if problems and not last:
            text = redact("Rejected by the verifier. Fix these and call submit_answer again:\n- " + "\n- ".join(problems))
            return {"messages": replies + [ToolMessage(text, tool_call_id=sub["id"], name="submit_answer",
                                                       status="error")],
                    "verify_rounds": vr, "problems": list(state.get("problems") or []) + problems}
        if ch is None:  # the schema was never met
            return {"messages": replies + [ToolMessage("Not accepted.", tool_call_id=sub["id"], name="submit_answer")],
                    "verify_rounds": vr, "problems": list(state.get("problems") or []) + problems,
                    "outcome": "no_answer"}
        verdict, claims, changes = V.finalize(ch, facts)
        ack = redact("Accepted." + (" Removed: " + "; ".join(c.dropped_because for c in claims if c.dropped_because)
                                    if any(not c.verified for c in claims) else ""))
        return {"messages": replies + [ToolMessage(ack, tool_call_id=sub["id"], name="submit_answer")],
                "verify_rounds": vr, "problems": list(state.get("problems") or []) + problems, "outcome": "answered",
                "answer": {"verdict": verdict, "claims": [c.model_dump(mode="json") for c in claims],
                           "changes": changes, "narrative": verdict.pop("narrative", None) or None}}

    def after_verify(state: AgentState) -> str:
        return "report" if state.get("outcome") else "investigate"

    def report(state: AgentState) -> dict:
        ans = state.get("answer") or {}
        sec = AgentSection(model=getattr(model, "model", None) or getattr(model, "model_name", None)
                           or type(model).__name__, outcome=state.get("outcome") or "no_answer",
                           question=state.get("question"), narrative=ans.get("narrative"),
                           verdict=ans.get("verdict") or {}, claims=ans.get("claims") or [],
                           changes=ans.get("changes") or [], problems=list(state.get("problems") or []),
                           rounds=state.get("rounds", 0), tool_calls=list(state.get("tool_calls") or []),
                           tokens_in=state.get("tokens_in", 0), tokens_out=state.get("tokens_out", 0))
        return {"section": sec.model_dump(mode="json")}

    g = StateGraph(AgentState)
    for name, fn in (("evidence", evidence), ("investigate", investigate), ("tools", run_tools), ("nudge", nudge),
                     ("stop", stop), ("verify", verify_node), ("report", report)):
        g.add_node(name, fn)
    g.add_edge(START, "evidence")
    g.add_edge("evidence", "investigate")
    g.add_conditional_edges("investigate", route, {"verify": "verify", "tools": "tools", "nudge": "nudge",
                                                   "stop": "stop"})
    g.add_edge("tools", "investigate")
    g.add_edge("nudge", "investigate")
    g.add_edge("stop", "report")
    g.add_conditional_edges("verify", after_verify, {"report": "report", "investigate": "investigate"})
    g.add_edge("report", END)
    return g.compile(checkpointer=checkpointer)


def _unanswered(messages: list, text: str = "not run: the investigation was interrupted") -> list:
    """A tool_result for every tool call of the last assistant turn that has none yet (the Messages API rejects a
    tool_use without its tool_result): after a stop at the limit, or an interrupted turn resumed from history."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last is None:
        return []
    answered = {m.tool_call_id for m in messages[last + 1:] if isinstance(m, ToolMessage)}
    return [ToolMessage(text, tool_call_id=c["id"], name=c["name"], status="error")
            for c in (getattr(messages[last], "tool_calls", None) or []) if c.get("id") and c["id"] not in answered]


def ask(graph, question: str | None, thread_id: str, *, on_event=None) -> dict:
    """One question through the graph in `thread_id` (the history of that thread is kept by the checkpointer). The
    counters restart per question; `on_event(node, update)` sees each step (progress on the terminal)."""
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
    state: dict[str, Any] = {}
    for chunk in graph.stream({"question": question}, cfg, stream_mode="updates"):
        for node, update in chunk.items():
            if on_event:
                on_event(node, update)
            if isinstance(update, dict):
                state.update(update)
    final = graph.get_state(cfg).values if getattr(graph, "checkpointer", None) else state
    return final.get("section") or state.get("section") or {}


def sent_messages(graph, thread_id: str) -> list[dict]:
    """What the model was sent in this thread (for /evidence): role and text of each message, tool calls named."""
    vals = graph.get_state({"configurable": {"thread_id": thread_id}}).values
    out = []
    for m in vals.get("messages", []):
        role = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool"}.get(type(m), type(m).__name__)
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, default=str)
        out.append({"role": role, "text": text, "tool_calls": [c["name"] for c in getattr(m, "tool_calls", [])]})
    return out
