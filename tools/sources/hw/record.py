"""The one shape every hardware parser returns: a `Record` per thing the tool reports on (a GPU, a port, a test),
whose values each keep the line they were read from.

Why one generic shape and not a class per tool: the comparison asks the same question of every tool ("which node
has a value its peers do not"), and a finding must cite the exact line a value came from, so a value is never
stored without its Evidence. Pure: text in, records out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.lines.ansi import strip_ansi

MAX_LINES = 200_000  # a snapshot is a few thousand lines; anything past this is not one tool's output
MAX_COUNT = 1 << 62  # counters are 64-bit at most: anything larger is misread, never a count


@dataclass(frozen=True)
class Value:
    value: Any
    evidence: Evidence


@dataclass
class Record:
    """What one tool said about one subject: `tool` (nvidia-smi, topo, ibstat, ibv_devinfo, perfquery, nccl-tests,
    dcgmi), `subject` ("GPU 00000000:18:00.0", "mlx5_0 port 1", "GPU Memory"), values by key. `node` is filled by
    read.py (attribution), `hosts` are host names the file's own content states (nccl-tests rank lines)."""

    tool: str
    file: str
    subject: str
    values: dict[str, Value] = field(default_factory=dict)
    node: str | None = None
    node_basis: str | None = None
    hosts: tuple[str, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        v = self.values.get(key)
        return v.value if v is not None else default

    def ev(self, key: str) -> Evidence | None:
        v = self.values.get(key)
        return v.evidence if v is not None else None


def lines_of(text: str) -> list[str]:
    """Physical lines (colour codes dropped: `nvidia-smi topo -m` underlines its header on a terminal), capped."""
    return [strip_ansi(ln).rstrip("\r") for ln in text.split("\n")[:MAX_LINES]]


def evidence(file: str, lineno: int, raw: str, kind: str | None = None) -> Evidence:
    """The citation of a value: 1-based line, the raw text as in the file (colour codes dropped)."""
    return Evidence(file=file, line=lineno, text=raw.rstrip("\r\n") or " ", kind=kind)


def to_int(s: str) -> int | None:
    """A count read from the tool: decimal or 0x hex, bounded; None for N/A and anything unreadable."""
    s = s.strip().rstrip(".")
    try:
        n = int(s, 16) if s.lower().startswith("0x") else int(s)
    except ValueError:
        return None
    return n if 0 <= n <= MAX_COUNT else None


def to_float(s: str) -> float | None:
    try:
        x = float(s.strip())
    except ValueError:
        return None
    return x if 0 <= x < 1e12 else None
