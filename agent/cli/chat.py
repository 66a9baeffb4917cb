"""The agent's part of `debugger ask` in a terminal session: run after the deterministic report is out, its progress
on stderr, Ctrl-C, and the follow-up questions.

Order. The deterministic report is ready in about a second; the agent takes far longer (each model call is seconds,
an investigation is several calls and tool runs). So `ask` in text format prints the report first, flushed, before
the agent's session is even built, and the agent's section follows when it is ready; meanwhile stderr says what
runs, on a terminal (`  · grep(pattern=…)`, `  · verifying the answer`). A one-document format (`--json`,
`--format markdown|html`) is written once, at the end, with the agent's section in it.

Ctrl-C. Python raises KeyboardInterrupt in the main thread, and that is where the agent runs: LangGraph runs a step
that has one task inline, and the Anthropic SDK's HTTP read is a blocking recv that the signal interrupts, so the
interrupt lands in the middle of a model call at once, with no reply awaited. During the first question it ends
the agent: the report stays (already printed, or written with an `interrupted` agent section in a one-document
format), exit 130 (128 + SIGINT, as a shell reports it). During a follow-up it cancels that question only and the
prompt comes back: the next question starts a new run of the graph from the thread's last checkpoint, and the
evidence node answers any tool call the cancelled run left open (agent/graph/nodes.py `unanswered`), so the
history stays a valid conversation for the API.
"""

from __future__ import annotations

import sys

from trainlog_debugger.agent.cli.options import err, out

INTERRUPTED = "interrupted (Ctrl-C) before it answered"


def notice(text: str) -> None:
    """Exactly one line on stderr, however wide the terminal (rich would wrap it)."""
    sys.stderr.write(" ".join(text.split()) + "\n")
    sys.stderr.flush()


def started(model_id: str) -> None:
    """One line on stderr, on a terminal only, when the agent starts: the report above is complete, and the wait
    that follows is the model's."""
    if err.is_terminal:
        err.print(f"agent: investigating with {model_id} (Ctrl-C stops it; the report above stays)", style="dim",
                  markup=False)


def progress_line(node: str, update) -> None:
    """Which step is running, on stderr, only on a terminal: a long investigation never looks frozen."""
    if not err.is_terminal or not isinstance(update, dict):
        return
    if node == "investigate":
        msgs = update.get("messages") or []
        calls = getattr(msgs[-1], "tool_calls", None) if msgs else None
        for c in calls or []:
            arg = ", ".join(f"{k}={str(v)[:40]}" for k, v in (c.get("args") or {}).items()
                            if c["name"] != "submit_answer")
            err.print(f"  · {c['name']}({arg})" if c["name"] != "submit_answer" else "  · verifying the answer",
                      style="dim", markup=False)
        if not calls:
            err.print("  · thinking", style="dim", markup=False)
    elif node == "evidence":
        err.print("  · asking the model", style="dim", markup=False)


def first_answer(make_session, question: str | None, model: str | None):
    """(session, AgentSection, interrupted): the session made by `make_session()` and its answer to the first
    question; Ctrl-C while either runs gives an `interrupted` section (and the session, None when it was not made
    yet) instead of unwinding the command."""
    session = None
    try:
        session = make_session()
        started(session.model_id)
        return session, session.chat(question, on_event=progress_line), False
    except KeyboardInterrupt:
        return session, interrupted_section(session, model, question), True


def interrupted_section(session, model: str | None, question: str | None):
    """The agent section of a question cut short by Ctrl-C, with the tokens it had already spent (from the
    thread's last checkpoint; 0 when the session keeps no history)."""
    from trainlog_debugger.agent.graph.session import offline_section
    from trainlog_debugger.agent.llm import model as M
    sec = offline_section(INTERRUPTED, "interrupted", model=getattr(session, "model_id", None) or model,
                          question=question)
    tin, tout = _spent(session)
    sec.tokens_in, sec.tokens_out, sec.cost_usd = tin, tout, M.cost_usd(sec.model, tin, tout)
    return sec


def _spent(session) -> tuple[int, int]:
    try:
        return session._spent() if session is not None else (0, 0)
    except Exception:  # noqa: BLE001 - a count we cannot read is 0, never a second error after Ctrl-C
        return 0, 0


def chat_loop(session, render_agent) -> None:
    """Follow-up questions until /quit or end of input (Ctrl-C at the prompt ends it too). Ctrl-C while a
    question runs cancels that question and comes back to the prompt; its tokens still count in /cost.
    /evidence: what was sent to the model; /cost: tokens and cost so far."""
    out.print("\nask a follow-up question (/evidence, /cost, /quit; Ctrl-C cancels a question)", style="dim")
    while True:
        try:
            q = input("ask> ").strip()
        except (EOFError, KeyboardInterrupt):
            out.print()
            return
        if not q:
            continue
        if q in ("/quit", "/exit", "/q"):
            return
        if q == "/cost":
            tin, tout, usd = session.cost()
            out.print(f"tokens in {tin:,}, out {tout:,}; cost ${usd:.4f} ({session.model_id})", markup=False)
            continue
        if q == "/evidence":
            for m in session.sent():
                calls = f" → tools: {', '.join(m['tool_calls'])}" if m["tool_calls"] else ""
                out.print(f"[{m['role']}]{calls} {m['text'][:2000]}", markup=False)
            continue
        if q.startswith("/"):
            out.print("commands: /evidence, /cost, /quit", style="dim")
            continue
        try:
            sec = session.chat(q, on_event=progress_line)
        except KeyboardInterrupt:
            tin, tout = _spent(session)
            session.tokens_in += tin
            session.tokens_out += tout
            notice("question cancelled (Ctrl-C); ask another, or /quit")
            continue
        if sec.notice:
            notice(f"agent: {sec.notice}")
        render_agent(sec, out)
