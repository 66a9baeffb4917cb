"""The investigation protocol, in code: what the model must have seen before its answer is taken, and when a tool
call is a loop.

Why code and not the prompt: the prompt said "look at ALL ranks, use nccl_state", and scripted models showed what
that is worth. A lazy model called `submit_answer` in round 1 with no tool call at all and was accepted; a looping
one ran the same `grep "Watchdog caught"` 11 times in one investigation, each time paying for the whole history.

What must be seen (`requirements`), decided once per bundle from what the deterministic pipeline found:
- where every rank stops (`where_ranks_stop`) when any line names a rank: the first question of the playbook
  ("did all ranks stop at the same place?") and the one a straggler hides behind;
- the collective state of every rank when there is one: `nccl_state` when a rank logged a collective timeout or
  watchdog state, `flight_recorder` when the bundle holds dumps (either will do: both show who never entered the
  stuck collective); on a hang with neither, the grouped stack dumps (`stacks`) stand for it when the bundle has
  them (1,023 ranks in `all_reduce`, rank 17 in `_try_get_data`);
- on a bundle where none of these apply (no line names a rank), any one tool result: an answer with no tool call
  at all is never accepted.
A tool the toolbox does not have (a test's own registry, a tool not yet written) is left out of its requirement,
and a requirement with no tool left is dropped: the protocol never asks for what cannot be called. A requirement
is met by a call that ran (status ok or no_data: "no rank logged a collective timeout" is an answer); a call that
failed on its arguments does not count.

Loops (`judge`): a call is a repeat when the same tool with the same arguments already ran in this question and its
result is still in the history (a result that compaction folded away may be asked for again). Two calls taking
turns (grep, read_lines, grep, read_lines) are repeats too, and said so. The first repeat of a tool runs, with a
nudge beside its result; the next one is not run and the tool is withdrawn from what the model is offered for the
rest of the question. A tool the protocol still asks for is never withdrawn, nor `submit_answer`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

ANSWER = "submit_answer"


@dataclass(frozen=True)
class Requirement:
    """`what` the model must have seen, in words for the model; `tools`: any one of them, run, meets it."""

    what: str
    tools: tuple[str, ...]

    def met(self, met: set[str] | list[str]) -> bool:
        return any(t in met for t in self.tools)

    def ask(self) -> str:
        return f"{self.what} (call {' or '.join(self.tools)})"


def requirements(box) -> list[Requirement]:
    """What this bundle asks the model to have seen before it answers (see the module docstring)."""
    names = set(box.names)
    scan = box.report("scan") or {}
    out: list[Requirement] = []
    if any(r.get("last_line") for r in scan.get("ranks", {}).values()):
        out.append(Requirement("where every rank stops", ("where_ranks_stop",)))
    nccl = box.report("nccl")
    collective = []
    if nccl is not None and nccl.get("verdict") != "no_collective_state":
        collective.append("nccl_state")
    if getattr(box.inv, "fr", None) is not None:
        collective.append("flight_recorder")
    diag = box.inv.diagnosis
    if not collective and getattr(box.inv, "stacks", None) and diag is not None and diag.status.value == "hung":
        collective.append("stacks")
    if collective:
        out.append(Requirement("the collective state of every rank", tuple(collective)))
    out = [r for r in (Requirement(r.what, tuple(t for t in r.tools if t in names)) for r in out) if r.tools]
    return out or [Requirement("anything beyond the first message", tuple(n for n in box.names))]


def missing(reqs: list[Requirement], met: set[str] | list[str]) -> list[Requirement]:
    return [r for r in reqs if not r.met(met)]


def unmet_tools(reqs: list[Requirement], met: set[str] | list[str]) -> set[str]:
    return {t for r in missing(reqs, met) for t in r.tools}


def refusal(miss: list[Requirement], *, same_turn: bool, left: int) -> str:
    """The tool_result an early answer gets: what is missing and how to get it; or, when the model called the
    missing tools in the same reply as its answer, that it answered before it saw their results."""
    if same_turn:
        head = ("Not accepted yet: you answered in the same reply as the calls that show "
                + " and ".join(r.what for r in miss) + ". Their results are above: read them, then call "
                "submit_answer again.")
    else:
        head = ("Not accepted yet: before an answer is accepted you must have seen "
                + "; and ".join(r.ask() for r in miss) + ". Call them, then call submit_answer again.")
    tail = (" This is the last answer sent back: the next one without them ends the investigation."
            if left <= 0 else "")
    return head + tail


def signature(name: str, args) -> str:
    """`name{args}` with the keys sorted: the same call whatever order the model wrote its arguments in (and any
    malformed input, a list or a string, written as it came)."""
    return str(name) + json.dumps(args or {}, sort_keys=True, ensure_ascii=False, default=str)


Judgement = Literal["run", "nudge", "withdraw"]


def judge(sig: str, name: str, calls: list[str], strikes: dict[str, int], max_repeats: int,
          keep: set[str]) -> tuple[Judgement, str]:
    """(what to do with this call, the words for the model). `calls`: the signatures already run this question
    whose results are still in the history; `strikes`: repeats so far per tool; `keep`: tools never withdrawn."""
    if sig not in calls:
        return "run", ""
    alternating = len(calls) >= 2 and calls[-2] == sig and calls[-1] != sig
    how = ("you are alternating between this call and " + _name(calls[-1]) if alternating else
           f"you already called {name} with these arguments in this question")
    if strikes.get(name, 0) < max_repeats or name in keep or name == ANSWER:
        return "nudge", (f"Note: {how}; the result is the same as before. Use it, ask something different, or call "
                         f"submit_answer. Another repeat withdraws {name} for the rest of this question.")
    return "withdraw", (f"Not run: {how} again, so {name} is withdrawn for the rest of this question. Work from the "
                        f"results you have, use another tool, or call submit_answer.")


def _name(sig: str) -> str:
    return sig.split("{", 1)[0]
