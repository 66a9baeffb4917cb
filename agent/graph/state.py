"""What the investigation graph carries from node to node (AgentState), and the bounds it runs under (Limits).

Why a module of its own: the state is the contract between the nodes (agent/graph/nodes.py), the checkpointer that
keeps a conversation on disk, and session.py, which reads the finished `section`; reading it in one place tells a
newcomer what each node may rely on. Nodes return partial updates; `messages` are appended (LangGraph's
add_messages: a message with a known id replaces it, RemoveMessage drops), `shown` merged, `met` united, `ledger`
appended, every other key replaced.

Two lifetimes. Per question (reset by the evidence node when a question starts): rounds, tokens, calls, strikes,
withdrawn, early_answers, problems, outcome, answer, section. Per conversation (kept across follow-ups, and on disk
with --resume): messages, shown, met (what the protocol asked for and the model has seen), ledger (the verified
claims of every accepted answer: what history compaction keeps), compacted (what compaction did, and when).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, TypedDict

from langgraph.graph.message import add_messages


@dataclass(frozen=True)
class Limits:
    """The bounds of one question: past any of them the graph stops and says so in the report's problems.

    The token figures are cl100k counts (agent/llm/tokens.py), close to Claude's own within ~15 %. Why compact
    at 32,000 when a request may hold far more: every round sends the whole history again, so a request of N tokens
    costs N of the budget per round; at 32k a question still has ~6 rounds inside 200k, and the history of earlier
    questions (where follow-ups used to run out) is the first thing compaction folds into their verified claims.
    """

    max_rounds: int = 12          # model calls per question
    max_verify_rounds: int = 2    # answers sent back with problems before the rest is removed
    budget_tokens: int = 200_000  # input + output tokens per question, the next request included before it is sent
    max_tool_calls: int = 30      # tool calls run per question; past it only submit_answer (and what the protocol
    #                               still asks for) is offered, and further calls come back "not run"
    max_early_answers: int = 2    # answers sent back for what the protocol misses; the next one ends the question
    max_repeats: int = 1          # nudges per tool for a repeated call; the next repeat withdraws the tool
    compact_at: int = 32_000      # a request larger than this is compacted before it is sent ...
    compact_to: int = 16_000      # ... down to about this (older tool results first; the last exchange stays)

    def over_budget(self, state: AgentState) -> bool:
        return spent(state) >= self.budget_tokens

    def next_over_budget(self, state: AgentState) -> bool:
        """Whether sending the next request (its counted size, `request_tokens`) would pass the budget."""
        return spent(state) + state.get("request_tokens", 0) > self.budget_tokens

    def last_round(self, state: AgentState) -> bool:
        return state.get("rounds", 0) >= self.max_rounds


def _merge(a: dict, b: dict) -> dict:
    return {**(a or {}), **(b or {})}


def _union(a: list, b: list) -> list:
    return list(dict.fromkeys([*(a or []), *(b or [])]))


class AgentState(TypedDict, total=False):
    """Written by (node):
    - messages (every node; the conversation the model is sent, history included; compact rewrites it),
    - shown (evidence, tools: every "file:line" a tool result or the first message showed the model, with its text:
      what the verifier accepts as a citation), question (the caller), turn_start (evidence: the id of this
      question's message, where compaction starts keeping everything),
    - rounds / tokens_in / tokens_out (investigate: model calls and tokens of this question), request_tokens
      (compact: the counted size of the next request, checked against the budget before it is sent),
    - tool_calls (tools: the names run for this question), calls (tools: the signature `name{args}` of each call
      whose result is still in the history: what a repeat is judged against), strikes (tools: repeats per tool),
      withdrawn (tools: tools no longer offered this question), early_answers (tools: answers sent back by the
      protocol), met (tools: the protocol's tools the model has seen a result of, agent/graph/protocol.py),
    - verify_rounds (verify), problems (stop, verify, tools: what the verifier, the protocol or a limit said),
      outcome (stop, verify: answered / budget / no_answer), answer (verify: the checked verdict, claims and
      changes), ledger (verify: the verified claims of each accepted answer), compacted (compact: one line per
      compaction), section (report: the AgentSection as JSON, what session.py returns)."""

    messages: Annotated[list, add_messages]
    shown: Annotated[dict, _merge]
    met: Annotated[list, _union]
    ledger: Annotated[list, operator.add]
    compacted: Annotated[list, operator.add]
    question: str | None
    turn_start: str | None
    rounds: int
    verify_rounds: int
    tokens_in: int
    tokens_out: int
    request_tokens: int
    tool_calls: list
    calls: list
    strikes: dict
    withdrawn: list
    early_answers: int
    problems: list
    outcome: str | None
    answer: dict | None
    section: dict | None


def spent(state: AgentState) -> int:
    """Input + output tokens of the question so far."""
    return state.get("tokens_in", 0) + state.get("tokens_out", 0)
