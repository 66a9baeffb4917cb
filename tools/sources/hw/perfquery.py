"""`perfquery` (infiniband-diags): a port's PMA counters, one Record per `# Port ... counters:` block.

Format (rdma-core `infiniband-diags/perfquery.c`, fields dumped by libibmad `mad_dump_fields`, dot-padded):

    # Port counters: Lid 5 port 1 (CapMask: 0x1600)
    PortSelect:......................1
    CounterSelect:...................0x0000
    SymbolErrorCounter:..............0
    LinkErrorRecoveryCounter:........0
    LinkDownedCounter:...............0
    PortRcvErrors:...................0
    ...
    PortXmitData:....................4294967295

`perfquery -x` prints `# Port extended counters: Lid 5 port 1 (CapMask: 0x5A00)`; older versions list only the
64-bit data/packet counters there, rdma-core >= v17 prints `(CapMask: 0x5A00 CapMask2: 0x0000002)` and, where the
port supports it, the error counters in the same block too. `-a` prints port 255 (all ports summed). The basic
counters saturate (SymbolErrorCounter at 65535, LinkDownedCounter at 255): a saturated value is still read as is.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of, to_int

TOOL = "perfquery"
ERRORS = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
          "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
          "PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped")
_HEAD = re.compile(r"^# Port (?:extended )?counters: (.{1,80}?) port (\d{1,3})\b")
_FIELD = re.compile(r"^(\w{2,48}):\.*(\S+)\s*$")


def parse(file: str, text: str) -> list[Record]:
    """Counters of the same port in a basic and an extended block are one Record (a value read twice keeps its
    first line)."""
    by_port: dict[str, Record] = {}
    rec: Record | None = None
    for i, raw in enumerate(lines_of(text), 1):
        if m := _HEAD.match(raw):
            subject = f"{m.group(1)} port {m.group(2)}"
            rec = by_port.setdefault(subject, Record(TOOL, file, subject))
            continue
        m = _FIELD.match(raw.strip()) if rec is not None else None
        if m and rec is not None and m.group(1) in ERRORS and m.group(1) not in rec.values:
            n = to_int(m.group(2))
            if n is not None:
                rec.values[m.group(1)] = Value(n, evidence(file, i, raw))
    return [r for r in by_port.values() if r.values]
