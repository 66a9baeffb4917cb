"""The investigation's nodes and routers: each a method of (state) → a partial update, or → the next node's name.

Why a class and not closures inside the graph factory: the nodes share four things (the model with its tools
bound, the toolbox, the limits, the system prompt), and a class holds them where a reader and a test can see
them; graph.py then only wires names to methods.

- evidence: the deterministic diagnosis, already made and verified, is the first message; its cited lines count
  as shown. A follow-up question in the same thread starts here too, with the history kept.
- investigate: one model call with the read-only tools and `submit_answer`; rounds and tokens are counted.
- route: submit_answer → verify; past a limit → stop; tool calls → tools; neither → nudge.
- tools: runs the model's tool calls (Toolbox.call) and records the lines each result showed.
- verify: code checks the submitted answer (agent/graph/verify.py). Problems go back to the model as the
  `submit_answer` tool result while verify rounds remain; after the last, unsupported claims are removed.
- report: the AgentSection (tools.model) beside the deterministic Diagnosis.
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph import verify as V
from trainlog_debugger.agent.graph.result import ToolStatus
from trainlog_debugger.agent.graph.state import AgentState, Limits
from trainlog_debugger.agent.graph.toolbox import SHOWN_HEAD, Toolbox
from trainlog_debugger.tools.model import AgentSection

NUDGE = "Call submit_answer with your answer (cited lines only)."


class Nodes:
    def __init__(self, bound, box: Toolbox, limits: Limits, system_prompt: str, model_name: str):
        self.bound = bound  # the chat model with the tools and submit_answer bound
        self.box = box
        self.limits = limits
        self.system_prompt = system_prompt
        self.model_name = model_name

    def evidence(self, state: AgentState) -> dict:
        q, redact, facts = state.get("question"), self.box.redact, self.box.inv.diagnosis
        shown: dict[str, str] = {}
        repair: list = []
        if not state.get("messages"):
            text = redact(evidence_text(facts, q, redact))
            for f in facts.chain[:caps.BRIEF_CHAIN]:
                for e in f.evidence[:caps.BRIEF_LINES]:
                    if redact(f'"{e.cite()}"') in text and redact(e.text)[:SHOWN_HEAD] in text:
                        shown[e.cite()] = e.text
            msg = HumanMessage(text)
        else:
            repair = unanswered(state["messages"])
            msg = HumanMessage(redact(q or "Go on."))
        return {"messages": repair + [msg], "shown": shown, "rounds": 0, "verify_rounds": 0, "tokens_in": 0,
                "tokens_out": 0, "outcome": None, "answer": None, "section": None, "tool_calls": [], "problems": []}

    def investigate(self, state: AgentState) -> dict:
        ai = self.bound.invoke([SystemMessage(self.system_prompt)] + list(state["messages"]))
        usage = getattr(ai, "usage_metadata", None) or {}
        return {"messages": [ai], "rounds": state.get("rounds", 0) + 1,
                "tokens_in": state.get("tokens_in", 0) + int(usage.get("input_tokens", 0) or 0),
                "tokens_out": state.get("tokens_out", 0) + int(usage.get("output_tokens", 0) or 0)}

    def route(self, state: AgentState) -> Literal["verify", "tools", "nudge", "stop"]:
        calls = getattr(state["messages"][-1], "tool_calls", None) or []
        if any(c["name"] == "submit_answer" for c in calls):
            return "verify"
        if self.limits.over_budget(state) or self.limits.last_round(state):
            return "stop"
        return "tools" if calls else "nudge"

    def tools(self, state: AgentState) -> dict:
        out, shown, names = [], {}, []
        for c in state["messages"][-1].tool_calls:
            res = self.box.call(c["name"], dict(c.get("args") or {}))
            text, lines = self.box.render(res)
            shown.update(lines)
            names.append(c["name"])
            out.append(ToolMessage(text, tool_call_id=c.get("id") or "", name=c["name"],
                                   status="error" if res.status is ToolStatus.error else "success"))
        return {"messages": out, "shown": shown, "tool_calls": list(state.get("tool_calls") or []) + names}

    def nudge(self, state: AgentState) -> dict:
        return {"messages": [HumanMessage(NUDGE)]}

    def stop(self, state: AgentState) -> dict:
        over = self.limits.over_budget(state)
        why = (f"token budget {self.limits.budget_tokens} reached" if over else
               f"round limit {self.limits.max_rounds} reached")
        return {"messages": unanswered(state["messages"], "not run: the investigation's limit was reached"),
                "outcome": "budget" if over else "no_answer",
                "problems": list(state.get("problems") or []) + [
                    f"stopped after {state.get('rounds', 0)} round(s): {why} before an answer"]}

    def verify(self, state: AgentState) -> dict:
        calls = state["messages"][-1].tool_calls
        sub = next(c for c in calls if c["name"] == "submit_answer")
        replies = [ToolMessage("not run: an answer was submitted in the same turn", tool_call_id=c["id"],
                               name=c["name"]) for c in calls if c is not sub]
        facts, box = self.box.inv.diagnosis, self.box
        answer, parse_problems = V.parse(dict(sub.get("args") or {}))
        ch = V.check(answer, state.get("shown", {}), facts, box.sources, box.redact, box.unmask) if answer else None
        problems = parse_problems or (ch.problems if ch else [])
        vr = state.get("verify_rounds", 0) + 1
        seen = {"verify_rounds": vr, "problems": list(state.get("problems") or []) + problems}
        last = vr > self.limits.max_verify_rounds or self.limits.last_round(state) or self.limits.over_budget(state)
        if problems and not last:
            text = box.redact("Rejected by the verifier. Fix these and call submit_answer again:\n- "
                              + "\n- ".join(problems))
            return {"messages": replies + [ToolMessage(text, tool_call_id=sub["id"], name="submit_answer",
                                                       status="error")], **seen}
        if ch is None:  # the schema was never met
            return {"messages": replies + [ToolMessage("Not accepted.", tool_call_id=sub["id"],
                                                       name="submit_answer")], **seen, "outcome": "no_answer"}
        verdict, claims, changes = V.finalize(ch, facts)
        removed = "; ".join(c.dropped_because for c in claims if c.dropped_because)
        ack = box.redact("Accepted." + (" Removed: " + removed if any(not c.verified for c in claims) else ""))
        return {"messages": replies + [ToolMessage(ack, tool_call_id=sub["id"], name="submit_answer")], **seen,
                "outcome": "answered",
                "answer": {"verdict": verdict, "claims": [c.model_dump(mode="json") for c in claims],
                           "changes": changes, "narrative": verdict.pop("narrative", None) or None}}

    def after_verify(self, state: AgentState) -> Literal["report", "investigate"]:
        return "report" if state.get("outcome") else "investigate"

    def report(self, state: AgentState) -> dict:
        ans = state.get("answer") or {}
        sec = AgentSection(model=self.model_name, outcome=state.get("outcome") or "no_answer",
                           question=state.get("question"), narrative=ans.get("narrative"),
                           verdict=ans.get("verdict") or {}, claims=ans.get("claims") or [],
                           changes=ans.get("changes") or [], problems=list(state.get("problems") or []),
                           rounds=state.get("rounds", 0), tool_calls=list(state.get("tool_calls") or []),
                           tokens_in=state.get("tokens_in", 0), tokens_out=state.get("tokens_out", 0))
        return {"section": sec.model_dump(mode="json")}


def evidence_text(diag, question: str | None, redact=lambda s: s) -> str:
    """The first message: the deterministic answer with its cited lines, then the question. Each quoted line is
    redacted whole before it is shortened (a token cut in half is no longer recognisable as one)."""
    cov = diag.coverage
    lines = ["Deterministic analysis of the bundle (every line of every rank was read):",
             f"status: {diag.status.value}; category: {diag.category}; culprit ranks: {diag.culprit_ranks or 'none'}; "
             f"culprit nodes: {diag.culprit_nodes or 'none'}; confidence: {diag.confidence}",
             f"headline: {diag.headline}",
             f"ranks seen: {len(cov.seen_ranks)} of {cov.expected_ranks or '?'} expected"
             + (f"; no log for {len(cov.missing_ranks)} rank(s)" if cov.missing_ranks else ""),
             "chain (trigger first):"]
    for f in diag.chain[:caps.BRIEF_CHAIN]:
        lines.append(f"- [{f.role.value}] {f.summary}")
        lines += [f'    "{e.cite()}": {redact(e.text)[:caps.BRIEF_LINE_CHARS]}' for e in f.evidence[:caps.BRIEF_LINES]]
    if diag.alternatives:
        lines.append("alternatives considered: " + "; ".join(
            f"{a.category}: {redact(a.summary)[:caps.BRIEF_ALTERNATIVE_CHARS]}"
            for a in diag.alternatives[:caps.BRIEF_ALTERNATIVES]))
    if diag.missing:
        lines.append("missing evidence: " + "; ".join(diag.missing[:caps.BRIEF_MISSING]))
    lines.append("")
    lines.append(f"Question: {question}" if question else
                 "Investigate: confirm or correct this answer with the tools, then call submit_answer.")
    return "\n".join(lines)


def unanswered(messages: list, text: str = "not run: the investigation was interrupted") -> list:
    """A tool_result for every tool call of the last assistant turn that has none yet (the Messages API rejects a
    tool_use without its tool_result): after a stop at the limit, or an interrupted turn resumed from history."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last is None:
        return []
    answered = {m.tool_call_id for m in messages[last + 1:] if isinstance(m, ToolMessage)}
    return [ToolMessage(text, tool_call_id=c["id"], name=c["name"], status="error")
            for c in (getattr(messages[last], "tool_calls", None) or []) if c.get("id") and c["id"] not in answered]
