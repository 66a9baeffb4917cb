"""`dcgmi diag -r 1|2|3|4` (NVIDIA DCGM): the result table, one Record per test with its worst result.

Layouts (DCGM `dcgmi/Diag.cpp`, DIAG_HEADER / DIAG_DATA rows of 27 + 48 characters):

    DCGM 1.x-3.x                                              DCGM 4.x
    | Diagnostic                | Result          |           | Diagnostic                | Result          |
    |-----  Deployment  --------+-----------------|           |-----  Deployment  --------+-----------------|
    | Denylist                  | Pass            |           | software                  | Pass            |
    +-----  Hardware  ----------+-----------------+           |                           | GPU0: Pass      |
    | GPU Memory                | Pass - All      |           +-----  Hardware  ----------+-----------------+
    | PCIe                      | Pass - GPUs: 0, 1, 2        | memory                    | Fail            |
    |                           | Fail - GPU: 3   |           |                           | GPU3: Fail      |
    | Warning                   | GPU 3 ...       |           | Warning: GPU3             | ...             |

(1.x says `Blacklist`, 3.x `Denylist`; 3.x adds a `Metadata` section with the DCGM and driver versions.) Results
are Pass, Fail, Warn, Skip; a test row whose later rows fail for some GPUs is a Fail. Sources: DCGM source
(`DIAG_HEADER`, `DIAG_DEPLOYMENT` strings) and the outputs in the DCGM user guide (4.0) and public issue threads
(3.3.5-3.3.9).
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of

TOOL = "dcgmi"
_ROW = re.compile(r"^\|\s?(.{0,40}?)\s*\|\s?(.*?)\s*\|?\s*$")
_RESULT = re.compile(r"^(?:(GPU\d{1,2}):\s*)?(Pass|Fail|Warn|Skip)\b(?:\s*-\s*(.*))?", re.I)
_DETAIL = re.compile(r"^(?:Warning|Error|Info)\b", re.I)
RANK = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}
_META = ("dcgm version", "driver version detected", "gpu device ids detected")


def parse(file: str, text: str) -> list[Record]:
    out: dict[str, Record] = {}
    cur: Record | None = None
    for i, raw in enumerate(lines_of(text), 1):
        m = _ROW.match(raw.strip()) if raw.lstrip().startswith("|") and "-----" not in raw else None
        if not m:
            continue
        name, cell = m.group(1).strip(), m.group(2).strip()
        if _DETAIL.match(name):
            if cur is not None and "detail" not in cur.values and cell:
                cur.values["detail"] = Value(cell[:200], evidence(file, i, raw))
            continue
        if name.lower() in _META or cell.lower() == "result":  # the header row and the Metadata section
            cur = None
            continue
        r = _RESULT.match(cell)
        if name:
            cur = out.setdefault(name, Record(TOOL, file, name)) if r else None
        if cur is None or not r:
            continue
        word = r.group(2).capitalize()
        ev = evidence(file, i, raw)
        if "result" not in cur.values or RANK[word.lower()] > RANK[str(cur.get("result")).lower()]:
            cur.values["result"] = Value(word, ev)
        if word == "Fail":
            named = r.group(1) or (r.group(3) if re.match(r"GPUs?:", r.group(3) or "") else "")
            gpus = [int(g) for g in re.findall(r"\d{1,2}", named or "")]
            if gpus:  # cited at the first row that names a failed GPU
                prev = list(cur.get("failed_gpus", []))
                cur.values["failed_gpus"] = Value(sorted(set(prev + gpus))[:64], cur.ev("failed_gpus") or ev)
    return [r for r in out.values() if "result" in r.values]
