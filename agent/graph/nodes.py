"""The investigation's nodes and routers: each a method of (state) → a partial update, or → the next node's name.

Why a class and not closures inside the graph factory: the nodes share what one conversation runs with (the model,
the tools it may be offered, the toolbox, the limits, the system prompt, the protocol's requirements for this
bundle), and a class holds them where a reader and a test can see them; graph.py then only wires names to methods.

- evidence: the deterministic diagnosis, already made and verified, is the first message; its cited lines count
  as shown. A follow-up question in the same thread starts here too, with the history kept; the per-question
  counters restart.
- compact: counts the next request before it is sent; near the budget the history is compacted
  (agent/graph/compact.py); a request that would still pass the budget is not sent (→ stop).
- investigate: one model call with the tools still offered and `submit_answer`; rounds and tokens are counted.
  The system prompt and the tool list carry `cache_control` for Claude (prompt caching: they are the same every
  round, and every follow-up).
- route: submit_answer → verify once the protocol is met (agent/graph/protocol.py), else it is sent back by tools;
  past a limit → stop; tool calls → tools; neither → nudge.
- tools: runs the model's tool calls (Toolbox.call) and records the lines each result showed; a repeated call is
  nudged, then its tool withdrawn; past the cap on calls, calls are not run; an early answer gets what it missed.
- verify: code checks the submitted answer (agent/graph/verify.py). Problems go back to the model as the
  `submit_answer` tool result while verify rounds remain; after the last, unsupported claims are removed. An
  accepted answer's verified claims go into the ledger, which outlives compaction.
- report: the AgentSection (tools.model) beside the deterministic Diagnosis.
"""

from __future__ import annotations

import uuid
from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph import compact as C
from trainlog_debugger.agent.graph import protocol as P
from trainlog_debugger.agent.graph import verify as V
from trainlog_debugger.agent.graph.result import ToolStatus
from trainlog_debugger.agent.graph.state import AgentState, Limits, spent
from trainlog_debugger.agent.graph.toolbox import SHOWN_HEAD, Toolbox
from trainlog_debugger.tools.model import AgentSection

NUDGE = "Call submit_answer with your answer (cited lines only)."
CACHE = {"type": "ephemeral"}  # Anthropic prompt caching: a breakpoint after the tools and after the system prompt


class Nodes:
    def __init__(self, model, box: Toolbox, limits: Limits, system_prompt: str, model_name: str):
        self.model = model  # a LangChain chat model; the tools still offered are bound for each call
        self.box = box
        self.limits = limits
        self.system_prompt = system_prompt
        self.model_name = model_name
        self.specs = box.schemas() + [V.ANSWER_TOOL]
        self.cache = getattr(model, "_llm_type", None) == "anthropic-chat"  # cache_control is Anthropic's alone
        self._reqs: list[P.Requirement] | None = None

    @property
    def reqs(self) -> list[P.Requirement]:
        """What this bundle asks the model to have seen before an answer (made on first use: the bundle's reports
        are read then)."""
        if self._reqs is None:
            self._reqs = P.requirements(self.box)
        return self._reqs

    # -- what a request holds ----------------------------------------------------------------------------------------
    def offered(self, state: AgentState) -> list[dict]:
        """The tools this request offers: all but the withdrawn; past the cap on calls, only submit_answer and the
        tools the protocol still asks for."""
        if len(state.get("tool_calls") or []) >= self.limits.max_tool_calls:
            keep = P.unmet_tools(self.reqs, state.get("met") or []) | {P.ANSWER}
            return [s for s in self.specs if s["name"] in keep]
        gone = set(state.get("withdrawn") or [])
        return [s for s in self.specs if s["name"] not in gone]

    def _request(self, state: AgentState) -> tuple[list, list[dict]]:
        tools = self.offered(state)
        if not self.cache:
            return [SystemMessage(self.system_prompt)], tools
        tools = tools[:-1] + [{**tools[-1], "cache_control": CACHE}]
        return [SystemMessage([{"type": "text", "text": self.system_prompt, "cache_control": CACHE}])], tools

    # -- the nodes ---------------------------------------------------------------------------------------------------
    def evidence(self, state: AgentState) -> dict:
        q, redact, facts = state.get("question"), self.box.redact, self.box.inv.diagnosis
        shown: dict[str, str] = {}
        repair: list = []
        mid = f"question-{uuid.uuid4().hex[:12]}"
        if not state.get("messages"):
            text = redact(evidence_text(facts, q, redact))
            for f in facts.chain[:caps.BRIEF_CHAIN]:
                for e in f.evidence[:caps.BRIEF_LINES]:
                    if redact(f'"{e.cite()}"') in text and redact(e.text)[:SHOWN_HEAD] in text:
                        shown[e.cite()] = redact(e.text)  # as the model saw it: the history keeps it
            msg = HumanMessage(text, id=mid)
        else:
            repair = unanswered(state["messages"])
            msg = HumanMessage(redact(q or "Go on."), id=mid)
        return {"messages": repair + [msg], "shown": shown, "turn_start": mid, "rounds": 0, "verify_rounds": 0,
                "tokens_in": 0, "tokens_out": 0, "request_tokens": 0, "outcome": None, "answer": None,
                "section": None, "tool_calls": [], "calls": [], "strikes": {}, "withdrawn": [], "early_answers": 0,
                "problems": []}

    def compact(self, state: AgentState) -> dict:
        """The next request counted before it is sent; compacted when it passes `compact_at` or what is left of
        the budget."""
        system, tools = self._request(state)
        prompt = self.system_prompt

        def size(msgs: list) -> int:
            return C.request_tokens(prompt, tools, msgs)
        msgs = list(state["messages"])
        n, left = size(msgs), self.limits.budget_tokens - spent(state)
        if n <= self.limits.compact_at and n <= left:
            return {"request_tokens": n}
        digest = C.digest_text(analysis_text(self.box.inv.diagnosis, self.box.redact), state.get("ledger") or [],
                               list(state.get("met") or []))
        res = C.compact(msgs, state.get("turn_start"), digest, size, min(self.limits.compact_to, left))
        if not res.changed:
            return {"request_tokens": n}
        return {"messages": res.update(), "request_tokens": size(res.messages),
                "compacted": [f"before round {state.get('rounds', 0) + 1}: {res.note}"],
                "calls": [c for c in state.get("calls") or [] if c not in res.stubbed]}

    def after_compact(self, state: AgentState) -> Literal["investigate", "stop"]:
        return "stop" if self.limits.over_budget(state) or self.limits.next_over_budget(state) else "investigate"

    def investigate(self, state: AgentState) -> dict:
        system, tools = self._request(state)
        ai = self.model.bind_tools(tools).invoke(system + list(state["messages"]))
        usage = getattr(ai, "usage_metadata", None) or {}
        return {"messages": [ai], "rounds": state.get("rounds", 0) + 1,
                "tokens_in": state.get("tokens_in", 0) + int(usage.get("input_tokens", 0) or 0),
                "tokens_out": state.get("tokens_out", 0) + int(usage.get("output_tokens", 0) or 0)}

    def route(self, state: AgentState) -> Literal["verify", "tools", "nudge", "stop"]:
        calls = getattr(state["messages"][-1], "tool_calls", None) or []
        if any(c["name"] == P.ANSWER for c in calls):
            if not P.missing(self.reqs, state.get("met") or []):
                return "verify"
            if state.get("early_answers", 0) >= self.limits.max_early_answers:
                return "stop"
        if self.limits.over_budget(state) or self.limits.last_round(state):
            return "stop"
        return "tools" if calls else "nudge"

    def tools(self, state: AgentState) -> dict:
        """Each call of the last reply, in order: run, nudged (a repeat), refused (withdrawn, past the cap), or,
        for an answer that came before the protocol was met, sent back with what is missing."""
        calls = state["messages"][-1].tool_calls
        sigs, names = list(state.get("calls") or []), list(state.get("tool_calls") or [])
        strikes, gone = dict(state.get("strikes") or {}), list(state.get("withdrawn") or [])
        met_before = list(state.get("met") or [])
        met, problems, shown = list(met_before), list(state.get("problems") or []), {}
        keep = P.unmet_tools(self.reqs, met_before)
        out: dict[int, ToolMessage] = {}

        def reply(i: int, text: str, name: str, error: bool = True) -> None:
            out[i] = ToolMessage(text, tool_call_id=calls[i].get("id") or "", name=name,
                                 status="error" if error else "success")
        for i, c in enumerate(calls):
            name, args = c["name"], c.get("args") if c.get("args") is not None else {}
            if name == P.ANSWER:
                continue
            if len(names) >= self.limits.max_tool_calls and name not in keep:
                reply(i, f"Not run: this question has used its {self.limits.max_tool_calls} tool calls. Answer with "
                         "what you have: call submit_answer.", name)
                continue
            if name in gone:
                reply(i, f"Not run: {name} was withdrawn for the rest of this question after repeated calls.", name)
                continue
            sig = P.signature(name, args)
            kind, note = P.judge(sig, name, sigs, strikes, self.limits.max_repeats, keep)
            if kind != "run":
                strikes[name] = strikes.get(name, 0) + 1
            if kind == "withdraw":
                gone.append(name)
                problems.append(f"{name} withdrawn: the same call was repeated")
                reply(i, note, name)
                continue
            res = self.box.call(name, args)
            text, lines = self.box.render(res)
            shown.update(lines)
            names.append(name)
            sigs.append(sig)
            if res.status is not ToolStatus.error:
                met.append(name)
            reply(i, (note + "\n" if note else "") + text, name, res.status is ToolStatus.error)
        early = state.get("early_answers", 0)
        for i, c in enumerate(calls):
            if c["name"] == P.ANSWER:
                miss = P.missing(self.reqs, met_before)
                early += 1
                reply(i, P.refusal(miss, same_turn=not P.missing(self.reqs, met),
                                   left=self.limits.max_early_answers - early), P.ANSWER)
                problems.append("answer sent back: not yet seen " + "; ".join(r.what for r in miss))
        return {"messages": [out[i] for i in sorted(out)], "shown": shown, "tool_calls": names, "calls": sigs,
                "strikes": strikes, "withdrawn": gone, "met": met, "early_answers": early, "problems": problems}

    def nudge(self, state: AgentState) -> dict:
        """A reply with neither a tool call nor an answer: asked for the answer, or first for what the protocol
        still misses (an answer now would only be sent back)."""
        miss = P.missing(self.reqs, state.get("met") or [])
        return {"messages": [HumanMessage(NUDGE if not miss else "Before you answer, look at "
                                          + "; and ".join(r.ask() for r in miss) + ". Then " + NUDGE[0].lower()
                                          + NUDGE[1:])]}

    def stop(self, state: AgentState) -> dict:
        calls = getattr(state["messages"][-1], "tool_calls", None) or []
        miss = P.missing(self.reqs, state.get("met") or []) if any(c["name"] == P.ANSWER for c in calls) else []
        over = self.limits.over_budget(state) or self.limits.next_over_budget(state)
        if miss and state.get("early_answers", 0) >= self.limits.max_early_answers:
            outcome, why = "no_answer", (f"answered {state.get('early_answers', 0) + 1} times without having seen "
                                         + "; ".join(r.ask() for r in miss) + ", so no answer was accepted")
        elif over:
            nxt = state.get("request_tokens", 0)
            outcome, why = "budget", (f"token budget {self.limits.budget_tokens:,} reached "
                                      f"({spent(state):,} spent" + (f", next request {nxt:,}" if nxt else "") + ")")
        else:
            outcome, why = "no_answer", f"round limit {self.limits.max_rounds} reached"
        return {"messages": unanswered(state["messages"], "not run: the investigation's limit was reached"),
                "outcome": outcome,
                "problems": list(state.get("problems") or []) + [
                    f"stopped after {state.get('rounds', 0)} round(s): {why} before an answer"]}

    def verify(self, state: AgentState) -> dict:
        calls = state["messages"][-1].tool_calls
        sub = next(c for c in calls if c["name"] == "submit_answer")
        replies = [ToolMessage("not run: an answer was submitted in the same turn", tool_call_id=c["id"],
                               name=c["name"]) for c in calls if c is not sub]
        facts, box = self.box.inv.diagnosis, self.box
        args = sub.get("args")
        answer, parse_problems = V.parse(args if isinstance(args, dict) else {})
        ch = V.check(answer, state.get("shown", {}), facts, box.sources, box.redact, box.unmask,
                     box=box) if answer else None
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
        accepted = {"verdict": verdict, "claims": [c.model_dump(mode="json") for c in claims], "changes": changes,
                    "narrative": verdict.pop("narrative", None) or None,
                    "dropped_sentences": verdict.pop("dropped_sentences", None),
                    "unconfirmed": verdict.pop("unconfirmed", None)}
        return {"messages": replies + [ToolMessage(ack, tool_call_id=sub["id"], name="submit_answer")], **seen,
                "outcome": "answered", "answer": accepted,
                "ledger": [C.ledger_entry(state.get("question"), accepted, box.redact)]}

    def after_verify(self, state: AgentState) -> Literal["report", "compact"]:
        return "report" if state.get("outcome") else "compact"

    def report(self, state: AgentState) -> dict:
        ans = state.get("answer") or {}
        sec = AgentSection(model=self.model_name, outcome=state.get("outcome") or "no_answer",
                           question=state.get("question"), narrative=ans.get("narrative"),
                           verdict=ans.get("verdict") or {}, claims=ans.get("claims") or [],
                           changes=ans.get("changes") or [], problems=list(state.get("problems") or []),
                           dropped_sentences=ans.get("dropped_sentences"), unconfirmed=ans.get("unconfirmed"),
                           rounds=state.get("rounds", 0), tool_calls=list(state.get("tool_calls") or []),
                           tokens_in=state.get("tokens_in", 0), tokens_out=state.get("tokens_out", 0))
        return {"section": sec.model_dump(mode="json")}


def analysis_text(diag, redact=lambda s: s) -> str:
    """The deterministic answer with its cited lines: the first message without its question, and the head of the
    digest that stands for earlier questions after compaction. Each quoted line is redacted whole before it is
    shortened (a token cut in half is no longer recognisable as one)."""
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
    return "\n".join(lines)


def evidence_text(diag, question: str | None, redact=lambda s: s) -> str:
    """The first message: the deterministic answer with its cited lines, then the question."""
    return analysis_text(diag, redact) + "\n\n" + (
        f"Question: {question}" if question else
        "Investigate: confirm or correct this answer with the tools, then call submit_answer.")


def unanswered(messages: list, text: str = "not run: the investigation was interrupted") -> list:
    """A tool_result for every tool call of the last assistant turn that has none yet (the Messages API rejects a
    tool_use without its tool_result): after a stop at the limit, or an interrupted turn resumed from history."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last is None:
        return []
    answered = {m.tool_call_id for m in messages[last + 1:] if isinstance(m, ToolMessage)}
    return [ToolMessage(text, tool_call_id=c["id"], name=c["name"], status="error")
            for c in (getattr(messages[last], "tool_calls", None) or []) if c.get("id") and c["id"] not in answered]
