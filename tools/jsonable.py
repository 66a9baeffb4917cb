"""Plain-JSON views of tool results (dataclasses, pydantic models, sets, tuple keys) for `--json` output.

Why it is written for speed: a 4,096-file scan's JSON is ~17 MB of small dicts and lists, and this walk runs once
per value in it; values that are already JSON (str, int, float, bool, None: most of them) return on one type test.
It imports no pydantic: an object can only be a pydantic model if pydantic is loaded, and `debugger scan --json`
never loads it for this.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from enum import Enum
from typing import Any

from trainlog_debugger.tools.lines.timestamps import Stamp

_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_jsonable(obj: Any) -> Any:
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is dict:
        return {(k if isinstance(k, str) else _key(k)): (v if type(v) in _PLAIN else to_jsonable(v))
                for k, v in obj.items()}
    if t is list or t is tuple:
        return [v if type(v) in _PLAIN else to_jsonable(v) for v in obj]
    if t is Stamp:  # its own JSON (iso, has_*), the same as inside Evidence
        return obj.to_json()
    return _other(obj)


def _other(obj: Any) -> Any:
    """Everything but plain values, dicts, lists and tuples: in the order of the original walk."""
    if callable(getattr(obj, "to_json", None)) and not isinstance(obj, type):
        # its own JSON, already plain: a Stamp, Evidence and Coverage (tools.evidence), a Report (tools.model)
        # wherever it sits; not walked twice
        return obj.to_json()
    if _is_model(obj):
        try:
            return obj.model_dump(mode="json", exclude_none=True)
        except (ValueError, UnicodeDecodeError):  # raw bytes from a hostile dump in some facts: never a traceback
            return to_jsonable(obj.model_dump(mode="python", exclude_none=True))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return fields_jsonable(obj)
    if isinstance(obj, dict):
        return {(k if isinstance(k, str) else _key(k)): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return [to_jsonable(v) for v in sorted(obj, key=lambda x: (str(type(x)), x))]
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray)):
        return str(obj)  # as the flight recorder's entry texts render them (json.dumps default=str)
    return obj


def _is_model(obj: Any) -> bool:
    main = sys.modules.get("pydantic.main")  # not loaded: no pydantic model exists
    return main is not None and isinstance(obj, main.BaseModel)


def fields_jsonable(obj: Any) -> dict:
    """A dataclass's fields as plain JSON: what a Report's to_json() starts from."""
    return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _key(k: Any) -> str:
    if isinstance(k, tuple):
        return ":".join("" if x is None else str(x) for x in k)
    return "null" if k is None else str(k)


def dumps(obj: Any, indent: int | None = 2, *, plain: bool = False) -> str:
    """`obj` as JSON text; `plain`: it is plain JSON data already (a Report's to_json()), not walked again.
    `indent=None` writes one line with json's C encoder; any indent runs its pure-Python encoder (~5x slower)."""
    data = obj if plain else to_jsonable(obj)
    try:
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a NaN or an infinity (a flight recorder's durations, a loss): JSON has none, null says it
        return json.dumps(_finite(data), indent=indent, ensure_ascii=False, allow_nan=False)


def _finite(obj: Any) -> Any:
    """`obj` with every NaN and infinity as None (issue 30: `fr --json` wrote a bare `NaN`, which no strict JSON
    reader accepts)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
