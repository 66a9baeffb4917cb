"""`nvidia-smi -q` (the full query, also `-q -d ECC,ROW_REMAPPER,PERFORMANCE,TEMPERATURE,PAGE_RETIREMENT`): one
Record per GPU block (`GPU 00000000:18:00.0`), with the values that say a GPU is failing or held back.

Format (NVIDIA nvidia-smi(1); indented `Key : Value` under section names, 4 spaces a level):

    ==============NVSMI LOG==============
    Driver Version                            : 535.129.03
    GPU 00000000:18:00.0
        Clocks Event Reasons                            (drivers >= 535; before: "Clocks Throttle Reasons")
            HW Slowdown                       : Not Active
                HW Thermal Slowdown           : Not Active
                HW Power Brake Slowdown       : Not Active
            SW Thermal Slowdown               : Not Active
        ECC Errors
            Volatile
                SRAM Correctable              : 0       (A100/H100, drivers >= 450; 555+ also print
                SRAM Uncorrectable            : 0        "SRAM Uncorrectable Parity" / "SRAM Uncorrectable SEC-DED")
                DRAM Correctable              : 0
                DRAM Uncorrectable            : 0
            Aggregate
                ...
        ECC Errors                                      (V100 and older drivers: per-location counts)
            Volatile
                Single Bit
                    Device Memory             : 0
                    Total                     : 0
                Double Bit
                    Device Memory             : 0
                    Total                     : 0
        Retired Pages
            Single Bit ECC                    : 0       (N/A on A100+, which remap rows instead)
            Double Bit ECC                    : 0
            Pending Page Blacklist            : No      ("Pending" / "Pending Page Retirement" on some drivers)
        Remapped Rows
            Correctable Error                 : 0
            Uncorrectable Error               : 0
            Pending                           : No
            Remapping Failure Occurred        : No
        Temperature
            GPU Current Temp                  : 33 C

Sources: nvidia-smi(1) and `nvidia-smi -q` outputs published in NVIDIA's A100 GPU memory error management guide and
in public issue threads (drivers 470.103, 535, 550, 560). `nvidia-smi -q` prints no Xid numbers (they are in the
kernel log: tools/sources/kernel.py), so none is read here. "N/A" values are unknown, never 0.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of, to_int

TOOL = "nvidia-smi"
_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^( *)([^:]+?)\s*:\s?(.*)$")
THROTTLE_SECTIONS = ("clocks throttle reasons", "clocks event reasons", "clocks_event_reasons",
                     "clocks_throttle_reasons")
# reasons that mean the hardware held the clocks down; Idle, application clocks, SW power cap and sync boost are
# settings or normal operation
HW_THROTTLE = ("hw slowdown", "hw thermal slowdown", "hw power brake slowdown", "sw thermal slowdown")


def parse(file: str, text: str) -> list[Record]:
    out: list[Record] = []
    rec: Record | None = None
    stack: list[tuple[int, str]] = []  # (indent, section name in lowercase)
    ecc: dict[str, list] = {}
    for i, raw in enumerate(lines_of(text), 1):
        if not raw.strip():
            continue
        m = _GPU.match(raw)
        if m:
            _finish(rec, ecc, out)
            rec, stack, ecc = Record(TOOL, file, f"GPU {m.group(1)}"), [], {}
            rec.values["bus_id"] = Value(m.group(1), evidence(file, i, raw))
            continue
        if rec is None:
            continue
        kv = _KV.match(raw)
        indent = len(raw) - len(raw.lstrip(" "))
        if indent == 0:  # a new top-level block that is not a GPU: this GPU's block ended
            _finish(rec, ecc, out)
            rec = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not kv:  # a section name (`ECC Errors`, `Volatile`): values below it are read under it
            stack.append((indent, raw.strip().lower()))
            continue
        key, val = kv.group(2).strip().lower(), kv.group(3).strip()
        _read(rec, [s for _, s in stack], key, val, evidence(file, i, raw), ecc)
    _finish(rec, ecc, out)
    return out


def _read(rec: Record, path: list[str], key: str, val: str, ev, ecc: dict[str, list]) -> None:
    where = path[0] if path else ""
    low = val.lower()
    if where in THROTTLE_SECTIONS:
        if low == "active":
            rec.values[f"throttle:{key}"] = Value(True, ev)
        return
    if where == "ecc errors" and len(path) >= 2 and path[1] in ("volatile", "aggregate"):
        n = to_int(val)
        unc = "uncorrectable" in key or (len(path) >= 3 and path[2] == "double bit" and key == "total")
        if unc and n is not None:
            ecc.setdefault(path[1], []).append((n, ev))
        return
    if where == "retired pages":
        if key in ("single bit ecc", "double bit ecc"):
            n = to_int(val)
            if n is not None:
                rec.values["retired." + ("sbe" if key.startswith("single") else "dbe")] = Value(n, ev)
        elif key.startswith("pending") and low in ("yes", "no"):
            rec.values["retired.pending"] = Value(low == "yes", ev)
        return
    if where == "remapped rows":
        if key in ("correctable error", "uncorrectable error"):
            n = to_int(val)
            if n is not None:
                rec.values["remap." + key.split()[0]] = Value(n, ev)
        elif key in ("pending", "remapping failure occurred") and low in ("yes", "no"):
            rec.values["remap." + ("pending" if key == "pending" else "failure")] = Value(low == "yes", ev)
        return
    if where == "temperature" and key == "gpu current temp":
        m = re.match(r"(\d{1,3}) C", val)
        if m:
            rec.values["temp_c"] = Value(int(m.group(1)), ev)
    elif not path and key == "product name":
        rec.values["product"] = Value(val[:80], ev)


def _finish(rec: Record | None, ecc: dict[str, list], out: list[Record]) -> None:
    """ECC uncorrectable counts are summed over the locations the driver lists (DRAM + SRAM, or the Double Bit
    Total); the cited line is the first non-zero one, or the first one when all are zero."""
    if rec is not None:
        for scope, got in ecc.items():
            total = min(sum(n for n, _ in got), 1 << 62)
            ev = next((e for n, e in got if n), got[0][1])
            rec.values[f"ecc.{scope}.uncorrectable"] = Value(total, ev)
        out.append(rec)
