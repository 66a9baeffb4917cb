"""`debugger eval --mode llm`: the agent on each case, and what its verifier changed.

Three things a run of the agent must say, and that a score alone hides:
- **the outcome.** An agent that did not answer (api_error: a replay that no longer matches the prompt; no_answer:
  the round limit; budget; error) leaves the deterministic verdict in place, which may well score 100 %. That case
  fails (`agent did not answer: ...`, exit code 1): an eval that cannot tell a broken agent from a good one proves
  nothing.
- **the verdict before verification**: what the model submitted in its last `submit_answer`, read from the HTTP
  exchange itself (the scripted model's replies here, or the cassette's recorded responses), never from the
  agent's internals; and **after**: the verdict the agent's section holds once agent/graph/verify.py has run. Both
  are scored against the truth beside the deterministic verdict, so the table shows per model what the verifier
  took away and what it let through (`effect`).
- **which model**: `--scripted careful,liar,lazy,forever` (eval/scripted.py) serves each scripted model on
  loopback in the Messages API's real format, so the real ChatAnthropic, graph and verifier run, with no key.

`spread(cases, n)`: `--limit N` takes N cases round-robin over generated, lab and real dev cases, one category after
another, cases that name a culprit and smaller bundles first (never a real case of the test split: a scripted
model's run is read while writing it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from trainlog_debugger.eval.loopback import Loopback
from trainlog_debugger.eval.score import origin, score, totals

ANSWERED = "answered"
SECRET = re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}|(?i:x-api-key|authorization)\s*:\s*\S{8,}")


class Served(Loopback):
    """A scripted model on 127.0.0.1 (`url` for ChatAnthropic's base_url); `replies` holds what it answered."""

    def __init__(self, model: Callable[[dict, int], dict]):
        self.replies: list[dict] = []
        self.model = model
        super().__init__(self._reply)

    def _reply(self, body: dict, n: int) -> tuple[int, dict]:
        try:
            reply = self.model(body, n)
            reply["usage"]["input_tokens"] = max(1, len(self.bodies[n]) // 4)  # about what the API would count
            status = 200
        except Exception as e:  # a bug in a scripted model is the API's error, as the client sees one
            reply, status = {"type": "error", "error": {"type": "api_error", "message": repr(e)[:300]}}, 500
        self.replies.append(reply)
        return status, reply


@contextmanager
def serve(respond: Callable[[dict, int], dict]) -> Iterator[Served]:
    with Served(respond) as s:
        yield s


def submitted(replies: list[dict]) -> dict | None:
    """The model's last `submit_answer` input in these Messages API replies: its verdict before verification."""
    last = None
    for r in replies:
        for b in (r or {}).get("content") or []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "submit_answer":
                last = b.get("input")
    return last if isinstance(last, dict) else None


def cassette_replies(path: Path) -> list[dict]:
    """The recorded responses of a vcrpy cassette, as Messages API replies (a body that is not JSON is left out)."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    out = []
    for it in data.get("interactions") or []:
        body = ((it.get("response") or {}).get("body") or {}).get("string")
        try:
            out.append(json.loads(body))
        except (TypeError, ValueError):
            continue
    return out


def secrets_in(path: Path, key: str | None = None) -> list[str]:
    """What in a recorded cassette looks like a secret: a key or key header (vcrpy filters x-api-key and
    authorization before writing; this checks it did), the key itself, or anything tools/redact.py would remove
    (the agent redacts every text before the model sees it, so a request body never holds one). A recording that
    holds any is deleted, not kept."""
    from trainlog_debugger.tools.redact import Redactor
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    found = [m[:12] + "..." for m in SECRET.findall(text)]
    if key and key in text:
        found.append("the value of ANTHROPIC_API_KEY")
    red = Redactor()
    red.redact(text)
    if red.secrets_found:
        found.append(f"{red.secrets_found} value(s) the redactor removes")
    return found


def no_answer(agent) -> str | None:
    """The case's error when the agent did not answer, else None."""
    if agent is None:
        return "agent did not answer: it did not run"
    if agent.outcome == ANSWERED:
        return None
    return f"agent did not answer: {agent.outcome}" + (f" ({agent.notice})" if agent.notice else "")


def with_verdict(diag, verdict: dict | None):
    """`diag` with a verdict's status, category and culprits in place (None: `diag` as it is)."""
    if not verdict or not verdict.get("category"):
        return diag
    from trainlog_debugger.tools.model import Status
    upd: dict = {"category": verdict["category"], "culprit_ranks": list(verdict.get("culprit_ranks") or []),
                 "culprit_nodes": list(verdict.get("culprit_nodes") or [])}
    try:
        upd["status"] = Status(verdict.get("status"))
    except ValueError:
        pass
    return diag.model_copy(update=upd)


def verdicts(truth, facts, diag, before: dict | None, bundle) -> dict:
    """Scores of the deterministic verdict, the model's before verification and the agent's after, and the three
    verdicts in brief: {"deterministic": {...}, "before": {...} | None, "after": {...} | None}: None where the
    model submitted nothing, or the agent did not answer (the user is left with the deterministic verdict, and the
    case fails)."""
    def view(d, s):
        return {"status": d.status.value, "category": d.category, "culprit_ranks": list(d.culprit_ranks),
                "culprit_nodes": list(d.culprit_nodes), "category_ok": s["category"], "culprit": s["culprit"],
                "all_clear": s["all_clear"]}
    agent = diag.agent
    out = {"deterministic": view(facts, score(truth, facts, bundle)), "before": None, "after": None}
    if before:
        b = with_verdict(facts, before)
        out["before"] = view(b, score(truth, b, bundle))
    if agent is not None and agent.outcome == ANSWERED:
        a = with_verdict(facts, agent.verdict)
        out["after"] = view(a, score(truth, a, bundle))
    return out


def effect(rows: list[dict]) -> dict[str, dict]:
    """Per model: cases, outcomes, and category accuracy / culprit mean / false all-clears of the deterministic
    verdict, the model's before verification and after (a case with no answer scores as failed on both)."""
    out: dict[str, dict] = {}
    for model in dict.fromkeys(r.get("model") or "cassette" for r in rows):
        sel = [r for r in rows if (r.get("model") or "cassette") == model and r.get("verdicts")]
        outcomes: dict[str, int] = {}
        for r in sel:
            outcomes[r.get("agent_outcome") or "none"] = outcomes.get(r.get("agent_outcome") or "none", 0) + 1
        m = {"cases": len(sel), "outcomes": outcomes, "unconfirmed": sum(1 for r in sel if r.get("unconfirmed"))}
        for side in ("deterministic", "before", "after"):
            vs = [r["verdicts"][side] for r in sel]
            cats = [bool(v and v["category_ok"]) for v in vs]
            cul = [(v["culprit"] if v else 0.0) for v, r in zip(vs, sel)
                   if r["verdicts"]["deterministic"]["culprit"] is not None]
            m[side] = {"category_accuracy": round(sum(cats) / len(cats), 4) if cats else None,
                       "culprit_mean": round(sum(cul) / len(cul), 4) if cul else None,
                       "false_all_clear": sum(1 for v in vs if v and v["all_clear"])}
        out[model] = m
    return out


def spread(cases: list, n: int) -> list:
    """N cases round-robin over origins (generated, lab, real dev), smallest bundles first; no real test case."""
    groups: dict[str, list] = {}
    for c in cases:
        o = origin(c.truth.tags, c.truth.split)
        if o in ("real test", "real"):
            continue
        groups.setdefault(o, []).append(c)
    for g in groups.values():  # the smallest case of each category first (one that names a culprit, if any: a
        # blamed healthy rank is what the culprit score sees), then the second of each, ...
        g.sort(key=lambda c: (not (c.truth.culprit_ranks or c.truth.culprit_nodes), _size(c.path), c.id))
        seen: dict[str, int] = {}
        nth = {}
        for c in g:
            nth[c.id] = seen[c.truth.category] = seen.get(c.truth.category, -1) + 1
        g.sort(key=lambda c: nth[c.id])
    out: list = []
    order = [groups[o] for o in ("generated", "lab", "real dev") if o in groups]
    while len(out) < n and any(order):
        for g in order:
            if g and len(out) < n:
                out.append(g.pop(0))
    return sorted(out, key=lambda c: c.id)


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in Path(p).rglob("*") if f.is_file())


def model_totals(rows: list[dict]) -> dict[str, dict]:
    """The usual totals per scripted model (after verification: the row's own scores)."""
    names = dict.fromkeys(r.get("model") or "cassette" for r in rows)
    return {m: totals([r for r in rows if (r.get("model") or "cassette") == m]) for m in names}
