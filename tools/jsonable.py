"""Plain-JSON views of tool results (dataclasses, pydantic models, sets, tuple keys) for `--json` output."""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

from pydantic import BaseModel

from trainlog_debugger.tools.lines.timestamps import Stamp


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, Stamp):  # its own JSON (iso, has_*), the same as inside Evidence
        return obj.to_json()
    if isinstance(obj, BaseModel):
        try:
            return obj.model_dump(mode="json", exclude_none=True)
        except (ValueError, UnicodeDecodeError):  # raw bytes from a hostile dump in some facts: never a traceback
            return to_jsonable(obj.model_dump(mode="python", exclude_none=True))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if callable(getattr(obj, "to_json", None)):  # a Report (tools.model.Report): its own JSON, wherever it sits
            return obj.to_json()  # already plain (the Report contract): not walked twice
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


def fields_jsonable(obj: Any) -> dict:
    """A dataclass's fields as plain JSON: what a Report's to_json() starts from."""
    return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _key(k: Any) -> str:
    if isinstance(k, tuple):
        return ":".join("" if x is None else str(x) for x in k)
    return "null" if k is None else str(k)


def dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False)
