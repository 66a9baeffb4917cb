"""What every agent tool returns: one ToolResult, whose status says whether there was something to show.

Why a status and not an empty success: "nothing matched" is an answer the model must be able to reason from (rank
17 never printed the line the others did), and an error must reach the model as a result it can correct, never as
an exception that ends the investigation (STYLE habit 4, HolmesGPT's StructuredToolResultStatus). What the model
receives is `payload()` as JSON:

    {"tool": "grep", "status": "no_data", "params": {"pattern": "Xid 79", "ignore_case": false},
     "data": {"matches": 0, "ranks_seen": 8}, "cut": []}

`lines` are the bundle lines the data quotes, each as `line()` writes it ({"at": "rank_3.log:812", "text": ...}):
the verifier accepts a citation only of a line the model was shown, so the toolbox records each of them as shown
when its `at` and the start of its text survive the token cap (agent/graph/toolbox.py, `render`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


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
        return {"tool": self.tool, "status": self.status.value, "params": self.params, "data": self.data,
                "cut": self.cut}


def ok(data: Any, cut: list[str] | None = None, lines: list[dict] | None = None) -> ToolResult:
    return ToolResult(ToolStatus.ok, data, list(cut or []), list(lines or []))


def no_data(data: Any, cut: list[str] | None = None, lines: list[dict] | None = None) -> ToolResult:
    return ToolResult(ToolStatus.no_data, data, list(cut or []), list(lines or []))


def error(why: str) -> ToolResult:
    return ToolResult(ToolStatus.error, why)


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
