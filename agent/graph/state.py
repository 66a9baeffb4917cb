"""What the investigation graph carries from node to node (AgentState), and the bounds it runs under (Limits).

Why a module of its own: the state is the contract between the nodes (agent/graph/nodes.py), the checkpointer that
keeps a conversation on disk, and session.py, which reads the finished `section`; reading it in one place tells a
newcomer what each node may rely on. Nodes return partial updates; `messages` are appended (LangGraph's
add_messages) and `shown` merged, every other key replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, TypedDict

from langgraph.graph.message import add_messages


@dataclass(frozen=True)
class Limits:
    """The bounds of one question: past any of them the graph stops and says so in the report's problems."""

    max_rounds: int = 12          # model calls per question
    max_verify_rounds: int = 2    # answers sent back with problems before the rest is removed
    budget_tokens: int = 200_000  # input + output tokens per question

    def over_budget(self, state: AgentState) -> bool:
        return spent(state) >= self.budget_tokens

    def last_round(self, state: AgentState) -> bool:
        return state.get("rounds", 0) >= self.max_rounds


def _merge(a: dict, b: dict) -> dict:
    return {**(a or {}), **(b or {})}


class AgentState(TypedDict, total=False):
    """Written by (node): messages (every node; the conversation the model is sent, history included), shown
    (evidence, tools: every "file:line" a tool result or the first message showed the model, with its text: what
    the verifier accepts as a citation), question (the caller), rounds / tokens_in / tokens_out (investigate:
    model calls and tokens of this question), verify_rounds (verify), tool_calls (tools: the names called for
    this question), problems (stop, verify: what the verifier or a limit said), outcome (stop, verify:
    answered / budget / no_answer), answer (verify: the checked verdict, claims and changes), section (report: the
    AgentSection as JSON, what session.py returns). evidence resets the per-question keys."""

    messages: Annotated[list, add_messages]
    shown: Annotated[dict, _merge]
    question: str | None
    rounds: int
    verify_rounds: int
    tokens_in: int
    tokens_out: int
    tool_calls: list
    problems: list
    outcome: str | None
    answer: dict | None
    section: dict | None


def spent(state: AgentState) -> int:
    """Input + output tokens of the question so far."""
    return state.get("tokens_in", 0) + state.get("tokens_out", 0)
