"""The JSON format: `debugger <command> --format json` (or `--json`), a report as one JSON document.

What is printed is the report's public contract (tools.model.Report: `to_json()`, add keys, never rename); this
module only writes it. Two renderers, because of what they are handed: `report_json` gets a report, a pydantic
model or plain data and walks it to plain JSON (tools.jsonable); `plain_json` gets data that IS plain JSON already
(a report's `to_json()`, taken before redaction: registry `view`) and does not walk it again, which took a second
of a 4,096-file scan. `indent` is the CLI's choice: 2 for a person at a terminal, None (one line, json's C
encoder, ~5x faster) for a pipe or a file.

Every command's document is finished here, in one place (`finish`), when the CLI wrote it (`documented`):
- a head: `schema_version`, `tool_version`, `generated_at` (RFC 3339, UTC) and `bundle` (the paths given), so a
  saved document says what wrote it, from what and when;
- times as a script reads them: a stamp in our internal ISO form (tools.lines.isotime) becomes RFC 3339 with its
  offset where the log stated a year and a zone, else `null` with `<key>_text` beside it, the time as the log
  stated it (`Nov 05 03:35:19`: no year, no zone). A stamp object keeps its `text` as written and its parts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from trainlog_debugger.tools.jsonable import dumps, to_jsonable
from trainlog_debugger.tools.lines.isotime import human_time, is_iso, rfc3339

_HEAD: ContextVar[dict | None] = ContextVar("json_head", default=None)

_FIRST = frozenset("-T0123456789u")


@contextmanager
def documented(paths: Sequence[Any] = ()) -> Iterator[None]:
    """JSON written inside this block gets the document head (`finish`) with `paths` as its bundle. The CLI's
    report commands and `ask` open it; `debugger schema` does not (a schema is not a report)."""
    import datetime as dt
    import os

    head = {"tool_version": tool_version(),
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "bundle": [os.path.abspath(os.fspath(p)) for p in paths]}
    token = _HEAD.set(head)
    try:
        yield
    finally:
        _HEAD.reset(token)


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("trainlog-debugger")
    except PackageNotFoundError:
        return "0+unknown"


def finish(data: Any) -> Any:
    """A report's plain JSON as the CLI writes it: the head in front (inside `documented`) and times per the
    contract (`rfc3339_times`)."""
    head = _HEAD.get()
    data = rfc3339_times(data)
    if head is None or not isinstance(data, dict):
        return data
    from trainlog_debugger.tools.groups import SCHEMA_VERSION
    return {"schema_version": data.get("schema_version", SCHEMA_VERSION), **head,
            **{k: v for k, v in data.items() if k != "schema_version"}}


def rfc3339_times(obj: Any) -> Any:
    """`obj` with every time string in our ISO form made RFC 3339 or null (see the module's docstring)."""
    t = type(obj)
    if t is dict:
        out = {}
        for k, v in obj.items():
            if type(v) is str and v and v[0] in _FIRST and is_iso(v):
                out[k] = got = rfc3339(v)
                if got is None and k != "iso" and f"{k}_text" not in obj:
                    out[f"{k}_text"] = human_time(v)
            elif type(v) is dict or type(v) is list:
                out[k] = rfc3339_times(v)
            else:
                out[k] = v
        return out
    if t is list:
        return [rfc3339(v) if type(v) is str and v and v[0] in _FIRST and is_iso(v)
                else rfc3339_times(v) if type(v) in (dict, list) else v for v in obj]
    return obj


def report_json(report: Any, indent: int | None = None) -> str:
    return dumps(finish(to_jsonable(report)), indent=indent, plain=True) + "\n"


def plain_json(data: Any, indent: int | None = None) -> str:
    return dumps(finish(data), indent=indent, plain=True) + "\n"
