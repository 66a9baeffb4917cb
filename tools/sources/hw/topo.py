"""`nvidia-smi topo -m`: the GPU-to-GPU matrix, one Record per GPU pair with the path between them.

Format (nvidia-smi(1) `topo -m`; tab-separated; the header row is underlined with ANSI codes on a terminal; NIC
rows/columns and `CPU Affinity` / `NUMA Affinity` / `GPU NUMA ID` columns follow the GPUs, depending on version):

            GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    NV18    NV18    PXB     0-55            0               N/A
    GPU1    NV18     X      NV18    NV18    PXB     0-55            0               N/A
    ...
    Legend:
      X    = Self
      SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
      NODE = ... PHB = ... PXB = ... PIX = ...
      NV#  = Connection traversing a bonded set of # NVLinks

Sources: nvidia-smi(1) and `topo -m` outputs in public notes (drivers 418 to 560: 418 prints no NIC columns, 525+
add `GPU NUMA ID`; `NV#` is the number of bonded links, NV12 on A100 SXM, NV18 on H100 SXM).
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of

TOOL = "topo"
_PATH = re.compile(r"^(?:X|NV\d{1,3}|SYS|NODE|PHB|PXB|PIX|SOC|PHB|N/A)$")
MAX_GPUS = 64


def parse(file: str, text: str) -> list[Record]:
    """One Record per unordered GPU pair: `link` is the matrix cell (NV18, SYS, PXB, ...), `nvlinks` the bonded
    NVLink count (0 for a PCIe/SMP path)."""
    lines = lines_of(text)
    cols: list[str] = []
    out: dict[tuple[int, int], Record] = {}
    for i, raw in enumerate(lines, 1):
        cells = [c for c in re.split(r"\t+|\s{2,}", raw.strip()) if c]
        if not cells:
            continue
        if not cols and cells[0] == "GPU0":
            cols = [c for c in cells if re.fullmatch(r"GPU\d{1,2}", c)][:MAX_GPUS]
            continue
        m = re.fullmatch(r"GPU(\d{1,2})", cells[0]) if cols else None
        if not m:
            if raw.startswith("Legend"):
                break
            continue
        a = int(m.group(1))
        for j, cell in enumerate(cells[1:len(cols) + 1]):
            b = int(cols[j][3:])
            if a == b or not _PATH.match(cell) or (min(a, b), max(a, b)) in out:
                continue
            nv = re.fullmatch(r"NV(\d{1,3})", cell)
            rec = Record(TOOL, file, f"GPU{min(a, b)}-GPU{max(a, b)}")
            ev = evidence(file, i, raw)
            rec.values["link"] = Value(cell, ev)
            rec.values["nvlinks"] = Value(int(nv.group(1)) if nv else 0, ev)
            out[(min(a, b), max(a, b))] = rec
    return list(out.values())
