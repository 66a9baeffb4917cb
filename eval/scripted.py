"""Scripted models for `debugger eval --mode llm --scripted NAME[,NAME...]`: four kinds of investigator, each a
function of the Messages API request (the parsed JSON body our agent sends) → a Messages API reply, in the API's
real format, served on loopback (eval/llm.py) so the real ChatAnthropic, the real graph and the real verifier run
between them. No key, no network: what the eval measures is what agent/graph/verify.py does at run time.

Why models that know nothing of the case: a scripted model that read truth.yaml would measure the truth, not the
verifier. Each one reads only what a real model reads: the first user message (the deterministic brief, whose
`"file:line": text` lines count as shown) and the tool results, where every quoted line is an object
`{"at": "rank_3.log:812", "text": "...", "rank": 3}`. It calls only tools the request offers (a tool withdrawn by
loop detection is not called again), and answers through `submit_answer`.

- careful: overview, where_ranks_stop and nccl_state first, then reads the trigger lines of the brief's chain;
  answers the deterministic verdict it confirmed (adding the rank nccl_state singles out when the verdict named
  none), every claim a quote of a line a tool showed, statements that name only what their line shows.
- liar: looks around, then invents: "Xid 79 on gpu-node-99", cites the last line of a healthy rank as the
  culprit's, claims the job `completed`, confidence high; resubmits the same lie when it is rejected.
- lazy: answers in its first turn without a tool call: the first NCCL timeout it sees in the brief is blamed on
  the network and on the rank that printed it (the classic misreading of a cascade line). Sent back for what it
  has not seen (agent/graph/protocol.py), it calls exactly that and submits the same answer again, as the careful
  model and the liar do too.
- forever: calls tools and never answers (alternating overview and where_ranks_stop, then whatever is offered).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from trainlog_debugger.tools.groups import parse_rank_set

Respond = Callable[[dict, int], dict]

CATEGORY_RE = re.compile(r"category: (\w+)")
STATUS_RE = re.compile(r"status: (\w+)")
RANKS_RE = re.compile(r"culprit ranks: \[([\d, ]*)\]")
BRIEF_LINE = re.compile(r'^\s+"(?P<at>[^"]+:\d+)": (?P<text>.*)$')
CHAIN_ITEM = re.compile(r"^- \[(?P<role>\w+)\] ")
RANK_IN_LINE = re.compile(r"\[(?:rank|Rank )(\d+)\]|\brank(\d+)\]:")
QUOTE_CHARS = 60


def message(*blocks: dict, usage: tuple[int, int] = (1200, 150)) -> dict:
    """A Messages API `message` object, as the API returns it."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": "scripted",
            "content": list(blocks), "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_use(name: str, inp: dict, turn: int, k: int = 0) -> dict:
    """A tool_use block; its id unique in the conversation (the turn and the block's place in it)."""
    return {"type": "tool_use", "id": f"toolu_scripted_{turn:03d}_{k}", "name": name, "input": inp}


class View:
    """What a model can know from one request: the brief, the lines tools showed, its own turns, the tools offered."""

    def __init__(self, body: dict):
        msgs = body.get("messages") or []
        self.offered = [t.get("name") for t in body.get("tools") or []]
        self.turn = sum(1 for m in msgs if m.get("role") == "assistant")
        self.brief = _text(msgs[0]["content"]) if msgs else ""
        self.results: dict[str, object] = {}  # tool name → its last parsed payload's data
        self.shown: list[dict] = []
        self.answer_reply = ""  # what the last submit_answer got back ("Not accepted yet: ...", "Rejected ...")
        self.last_calls: list[str] = []  # the tools its last turn called
        names: dict[str, str] = {}
        for m in msgs:
            if m.get("role") == "assistant":
                self.last_calls = [b["name"] for b in m["content"] if isinstance(b, dict)
                                   and b.get("type") == "tool_use"] if isinstance(m.get("content"), list) else []
            for b in m["content"] if isinstance(m.get("content"), list) else []:
                if b.get("type") == "tool_use":
                    names[b["id"]] = b["name"]
                elif b.get("type") == "tool_result":
                    name, raw = names.get(b.get("tool_use_id", ""), ""), _text(b.get("content"))
                    if name == "submit_answer":
                        self.answer_reply = raw
                        continue
                    try:
                        payload = json.loads(raw.split("\n[showing ")[0])
                    except ValueError:
                        continue
                    self.results[name] = payload.get("data") if isinstance(payload, dict) else None
                    self.shown += list(_lines(payload))
        self.called = set(names.values())  # every tool it has called
        self.chain = _brief_chain(self.brief)  # [(role, at, text)] in the brief's order

    def facts(self) -> dict:
        """The deterministic verdict: from overview when it was called, else from the brief's words."""
        d = (self.results.get("overview") or {}).get("deterministic") if isinstance(
            self.results.get("overview"), dict) else None
        if d:
            return dict(d)
        ranks = RANKS_RE.search(self.brief)
        return {"status": _first(STATUS_RE, self.brief, "inconclusive"),
                "category": _first(CATEGORY_RE, self.brief, "none"),
                "culprit_ranks": [int(x) for x in ranks.group(1).split(",") if x.strip()] if ranks else [],
                "culprit_nodes": []}

    def can(self, *names: str) -> list[str]:
        return [n for n in names if n in self.offered]

    def sent_back_for(self) -> list[str]:
        """The tools an early answer was sent back for ("... (call nccl_state or flight_recorder) ..."): the first
        offered one of each, when the last turn was an answer that was not accepted; else none."""
        if "submit_answer" not in self.last_calls or not self.answer_reply.startswith("Not accepted"):
            return []
        out = []
        for group in re.findall(r"\(call ([\w ]+?)\)", self.answer_reply):
            first = next((t for t in group.split(" or ") if t in self.offered), None)
            if first and first not in out:
                out.append(first)
        return out


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _first(rx: re.Pattern, s: str, default: str) -> str:
    m = rx.search(s)
    return m.group(1) if m else default


def _lines(v):
    """Every quoted bundle line in a tool result's payload, at any depth."""
    if isinstance(v, dict):
        if isinstance(v.get("at"), str) and isinstance(v.get("text"), str):
            yield v
        for x in v.values():
            yield from _lines(x)
    elif isinstance(v, list):
        for x in v:
            yield from _lines(x)


def _brief_chain(brief: str) -> list[tuple[str, str, str]]:
    out, role = [], ""
    for ln in brief.splitlines():
        m = CHAIN_ITEM.match(ln)
        if m:
            role = m.group("role")
            continue
        b = BRIEF_LINE.match(ln)
        if b and role:
            out.append((role, b.group("at"), b.group("text")))
    return out


def rank_of(line_text: str) -> int | None:
    m = RANK_IN_LINE.search(line_text)
    return int(m.group(1) or m.group(2)) if m else None


def cite(at: str, line_text: str) -> dict:
    f, _, n = at.rpartition(":")
    return {"file": f, "line": int(n), "quote": line_text.strip()[:QUOTE_CHARS].strip()}


def answer(f: dict, claims: list[dict], **over) -> dict:
    a = {"status": f.get("status") or "inconclusive", "category": f.get("category") or "none",
         "culprit_ranks": list(f.get("culprit_ranks") or []), "culprit_nodes": list(f.get("culprit_nodes") or []),
         "confidence": "medium", "summary": "", "narrative": "", "claims": claims}
    a.update(over)
    return a


def _comply(v: View) -> dict | None:
    """Sent back for missing tools: call them (every model but `forever` does what the protocol asks)."""
    asked = v.sent_back_for()
    return message(*(tool_use(n, {}, v.turn, k) for k, n in enumerate(asked))) if asked else None


def _look(v: View) -> dict:
    first = v.can("overview", "where_ranks_stop", "nccl_state")
    return message(text("Looking at every rank first."), *(tool_use(n, {}, v.turn, k) for k, n in enumerate(first)))


# -- the four models ------------------------------------------------------------------------------------------
def careful(body: dict, n: int) -> dict:
    v = View(body)
    if (sent_back := _comply(v)) is not None:
        return sent_back
    if v.turn == 0 and v.can("overview", "where_ranks_stop", "nccl_state"):
        return _look(v)
    triggers = [(at, t) for role, at, t in v.chain if role == "root_candidate"][:2]
    if "read_lines" not in v.called and triggers and v.can("read_lines"):
        return message(*(tool_use("read_lines", {"file": at.rpartition(":")[0], "line": int(at.rpartition(":")[2]),
                                                 "before": 0, "after": 0}, v.turn, k)
                         for k, (at, _) in enumerate(triggers)))
    f = v.facts()
    seen = {s["at"]: s["text"] for s in v.shown}
    lines = [(at, seen.get(at, t)) for at, t in triggers] or [(s["at"], s["text"]) for s in v.shown[:1]]
    claims = [{"statement": f'The line reads "{cite(at, t)["quote"]}".', "citations": [cite(at, t)]}
              for at, t in lines]
    over: dict = {}
    nccl = v.results.get("nccl_state") if isinstance(v.results.get("nccl_state"), dict) else {}
    culprits = nccl.get("culprits")  # a rank set ('5'; schema_version 2) or, before, a list
    singled = parse_rank_set(culprits) if isinstance(culprits, str) else [r for r in culprits or [] if isinstance(r, int)]
    found = [ln for ln in nccl.get("culprit_lines") or [] if ln.get("rank") in singled][:1]
    if not f.get("culprit_ranks") and len(singled) == 1 and found:
        over = {"culprit_ranks": singled, "disagreement": f"nccl_state singles out rank {singled[0]}"}
        claims.append({"statement": f'Rank {singled[0]} printed "{cite(found[0]["at"], found[0]["text"])["quote"]}".',
                       "citations": [cite(found[0]["at"], found[0]["text"])]})
    ranks = over.get("culprit_ranks", f.get("culprit_ranks") or [])
    who = f" on rank(s) {', '.join(map(str, ranks))}" if ranks else ""
    return message(tool_use("submit_answer", answer(f, claims, summary=f"{f.get('category')}{who}",
                                                    narrative=f"{f.get('category')}{who}.", **over), v.turn))


def liar(body: dict, n: int) -> dict:
    v = View(body)
    if (sent_back := _comply(v)) is not None:
        return sent_back
    if v.turn == 0 and v.can("overview", "where_ranks_stop", "nccl_state"):
        return _look(v)
    f = v.facts()
    bad = set(f.get("culprit_ranks") or [])
    healthy = [s for s in v.shown if isinstance(s.get("rank"), int) and s["rank"] not in bad]
    pick = healthy[-1] if healthy else (v.shown[-1] if v.shown else None)
    rank = pick["rank"] if pick and isinstance(pick.get("rank"), int) else 0
    claims = [{"statement": f"Rank {rank} hit Xid 79 on gpu-node-99: its GPU fell off the bus.",
               "citations": [cite(pick["at"], pick["text"])] if pick else []}]
    cat = "network" if f.get("category") == "gpu_cuda" else "gpu_cuda"
    return message(text("Found it."), tool_use("submit_answer", answer(
        f, claims, status="completed", category=cat, culprit_ranks=[rank], culprit_nodes=["gpu-node-99"],
        confidence="high", summary="Xid 79 on gpu-node-99, drain it",
        narrative=f"Xid 79 on gpu-node-99 took rank {rank} down; the job then completed. Drain gpu-node-99.",
        disagreement="the deterministic analysis missed the Xid 79 on gpu-node-99"), v.turn))


def lazy(body: dict, n: int) -> dict:
    v = View(body)
    if (sent_back := _comply(v)) is not None:
        return sent_back
    f = v.facts()
    first = next(((at, t) for role, at, t in v.chain if role == "cascade" and re.search(r"(?i)nccl|watchdog", t)),
                 next(((at, t) for _, at, t in v.chain), None))
    rank = rank_of(first[1]) if first else None
    rank = 0 if rank is None else rank
    claims = [{"statement": f"NCCL timed out on rank {rank}: the network failed.",
               "citations": [cite(*first)] if first else []}]
    return message(tool_use("submit_answer", answer(
        f, claims, status="crashed", category="network", culprit_ranks=[rank], culprit_nodes=[],
        confidence="high", summary="an NCCL timeout: the network", narrative="The network failed; NCCL timed out.",
        disagreement="an NCCL timeout is a network fault"), v.turn))


def forever(body: dict, n: int) -> dict:
    v = View(body)
    cycle = v.can("overview", "where_ranks_stop") or [t for t in v.offered if t != "submit_answer"] or ["overview"]
    return message(tool_use(cycle[v.turn % len(cycle)], {}, v.turn))


MODELS: dict[str, Respond] = {"careful": careful, "liar": liar, "lazy": lazy, "forever": forever}


def get(names: str | list[str]) -> list[str]:
    """The scripted model names asked for (comma-separated or a list), each checked: ValueError names the choices."""
    out = [x.strip() for x in (names.split(",") if isinstance(names, str) else names) if x.strip()]
    bad = [x for x in out if x not in MODELS]
    if bad or not out:
        raise ValueError(f"unknown scripted model(s) {', '.join(bad) or '(none)'} (one of {', '.join(MODELS)})")
    return out
