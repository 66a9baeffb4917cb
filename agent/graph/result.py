"""What every agent tool returns: one ToolResult, whose status says whether there was something to show.

Why a status and not an empty success: "nothing matched" is an answer the model must be able to reason from (rank
17 never printed the line the others did), and an error must reach the model as a result it can correct, never as
an exception that ends the investigation (STYLE habit 4, HolmesGPT's StructuredToolResultStatus). What the model
receives is `payload()` as JSON:

    {"tool": "grep", "status": "no_data", "params": {"pattern": "Xid 79", "ignore_case": false}, "cut": [],
     "data": {"matches": 0, "ranks_seen": 8}}

Why `cut` before `data`, and the answer-carrying fields first inside `data`: what overflows the token cap is cut
from the end (agent/graph/toolbox.py shortens the longest lists first, then the text), so the fields that answer
the question (the ranks with no match, the culprits, the counts) are written before the lists of lines that
support them, and a rank set is written as ranges (`ranges`: `0-1023 except 17`, never a list of 1,023 numbers).

`lines` are the bundle lines the data quotes, each as `line()` writes it ({"at": "rank_3.log:812", "text": ...}):
the verifier accepts a citation only of a line the model was shown, so the toolbox records each of them as shown
when its `at` and the start of its text survive the token cap (agent/graph/toolbox.py, `render`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from trainlog_debugger.tools.groups import runs


class ToolStatus(str, Enum):
    """ok: `data` holds what was asked for. no_data: the tool ran and found nothing; `data` says what was searched
    (which ranks, which pattern). error: the call could not run (a bad argument, a file not in the bundle, a
    failure); `data` says why, in words the model can act on."""

    ok = "ok"
    no_data = "no_data"
    error = "error"


@dataclass
class ToolResult:
    status: ToolStatus
    data: Any = None
    cut: list[str] = field(default_factory=list)   # what the data leaves out, in words ("showing 40 of 512 ranks")
    lines: list[dict] = field(default_factory=list)  # the bundle lines `data` quotes, as line() writes them
    params: dict[str, Any] = field(default_factory=dict)  # the arguments as used (defaults in): set by the toolbox
    tool: str = ""                                         # set by the toolbox, which knows the name it was called by

    def payload(self) -> dict:
        return {"tool": self.tool, "status": self.status.value, "params": self.params, "cut": self.cut,
                "data": self.data}


def ok(data: Any, cut: list[str] | None = None, lines: list[dict] | None = None) -> ToolResult:
    return ToolResult(ToolStatus.ok, data, list(cut or []), list(lines or []))


def no_data(data: Any, cut: list[str] | None = None, lines: list[dict] | None = None) -> ToolResult:
    return ToolResult(ToolStatus.no_data, data, list(cut or []), list(lines or []))


def error(why: str) -> ToolResult:
    return ToolResult(ToolStatus.error, why)


def ranges(ranks, parts: int = 64) -> str:
    """A rank set as a person writes it, in the shorter form: `0-3,7` or `0-1023 except 17,512-515`.
    Why the second form: at 1,024 ranks "every rank but 17" is the answer, and as a list it is 1,023 numbers that
    the token cap cuts before the one that matters. Exact up to `parts` ranges; past that the rest is counted
    (`… +N ranks in M more ranges`), never silently dropped. "" for no rank. A report's rank set (schema_version 2
    writes rank lists as `0-4095 except 1365`) is already this form: it is taken as it is."""
    if isinstance(ranks, str):
        return "" if ranks.strip() in ("", "-") else ranks
    rs = sorted({r for r in ranks if isinstance(r, int) and not isinstance(r, bool)})
    if not rs:
        return ""
    plain = runs(rs)
    holes = sorted(set(range(rs[0], rs[-1] + 1)) - set(rs)) if rs[-1] - rs[0] < 10_000_000 else []
    gaps = runs(holes)
    if holes and len(gaps) < len(plain) and 4 * len(holes) <= len(rs):  # a few holes in a wide span
        return f"{rs[0]}-{rs[-1]} except {_join(gaps, parts)}"
    return _join(plain, parts)


def rank_list(v: Any) -> list[int]:
    """Ranks as ints from a report's JSON: a rank set string (schema_version 2, tools.groups.parse_rank_set,
    bounded) or a list of ints."""
    if isinstance(v, str):
        from trainlog_debugger.tools.groups import parse_rank_set
        return parse_rank_set(v)
    return [r for r in v or () if isinstance(r, int) and not isinstance(r, bool)]




def _join(runs: list[tuple[int, int]], parts: int) -> str:
    text = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:parts])
    if len(runs) > parts:
        rest = sum(b - a + 1 for a, b in runs[parts:])
        text += f",… +{rest} ranks in {len(runs) - parts} more ranges"
    return text


def line(ev: dict) -> dict:
    """One bundle line as the model sees it, from an Evidence's JSON (a report's to_json() holds them as
    {"file", "line", "text", "rank"?, "time": {"iso", ...}?, ...}): where it is, its words, its rank and time."""
    out = {"at": f"{ev['file']}:{ev['line']}", "text": ev["text"]}
    if ev.get("rank") is not None:
        out["rank"] = ev["rank"]
    if ev.get("time") is not None:
        out["time"] = ev["time"]["iso"]
    return out


def quote(value: Any, lines: list[dict]) -> Any:
    """`value` (a piece of a report's JSON) with every Evidence in it, at any depth, written as line() writes it,
    and each of those lines appended to `lines`: a report that holds lines in its own fields (AIStore's stats jump
    names the stats lines it compares) shows them to the model as lines, and they count as shown."""
    if isinstance(value, dict):
        if isinstance(value.get("file"), str) and isinstance(value.get("line"), int) and isinstance(
                value.get("text"), str):
            out = line(value)
            lines.append(out)
            return out
        return {k: quote(v, lines) for k, v in value.items()}
    if isinstance(value, list):
        return [quote(v, lines) for v in value]
    return value
