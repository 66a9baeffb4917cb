"""The JSON format: `debugger <command> --format json` (or `--json`), a report as one JSON document.

What is printed is the report's public contract (tools.model.Report: `to_json()`, add keys, never rename); this
module only writes it. Two renderers, because of what they are handed: `report_json` gets a report, a pydantic
model or plain data and walks it to plain JSON (tools.jsonable); `plain_json` gets data that IS plain JSON already
(a report's `to_json()`, taken before redaction: registry `view`) and does not walk it again, which took a second
of a 4,096-file scan. `indent` is the CLI's choice: 2 for a person at a terminal, None (one line, json's C
encoder, ~5x faster) for a pipe or a file.
"""

from __future__ import annotations

from typing import Any

from trainlog_debugger.tools.jsonable import dumps


def report_json(report: Any, indent: int | None = None) -> str:
    return dumps(report, indent=indent) + "\n"


def plain_json(data: Any, indent: int | None = None) -> str:
    return dumps(data, indent=indent, plain=True) + "\n"
