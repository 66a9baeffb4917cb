"""Budgets of `open_bundle`: how much a bundle may cost to open, each with the environment variable that raises it.

Why: a bundle comes from strangers (uploads, the Slack bot, archives of unknown origin). A zip of many 1 MiB members
at 1000:1 passes any per-member check, a gzip/bz2 bomb is one member, a tar of 100,000 tiny files costs minutes of
file creation and scanning. So every budget is checked WHILE streaming (bytes really written, not declared sizes),
and a hit stops extraction with a message that names the budget and the variable to raise it; what was indexed
before the stop is analysed. Values from the environment are numbers read from input too: parsed strictly and
clamped, a bad one is one clear error line.

  DEBUGGER_MAX_EXTRACT_BYTES  total bytes copied out of archives (default 4G)
  DEBUGGER_MAX_MEMBERS        archive members looked at, across all archives (default 100000)
  DEBUGGER_MAX_FILES          files indexed for reading, directory files and members alike (default 10000): the
                              scan costs about 2 ms per file (issue 15 measurement), so this bounds `ask`'s time
  DEBUGGER_MAX_RATIO          bytes out per byte of the input file an archive or compressed file came from
                              (default 200), enforced once DEBUGGER_RATIO_FROM (default 128M) came out of
                              it; logs compress 5-50:1
  DEBUGGER_MAX_NESTING        archive levels (default 3)
  DEBUGGER_MIN_FREE_TMP       free space kept on the temp filesystem (os.statvfs, default 512M)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class BudgetConfigError(ValueError):
    """A budget variable that is not a number (the CLI reports it as one line, exit 2)."""


@dataclass(frozen=True)
class Budget:
    max_bytes: int = 4 << 30
    max_members: int = 100_000
    max_files: int = 10_000
    max_ratio: int = 200
    ratio_min_bytes: int = 128 << 20
    max_depth: int = 3
    min_free: int = 512 << 20

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Budget:
        env = os.environ if env is None else env
        got = {}
        for f in fields(cls):
            var = ENV.get(f.name)
            if var and env.get(var, "").strip():
                got[f.name] = parse_size(var, env[var])
        return replace(cls(), **got)

    def hint(self, name: str) -> str:
        """'raise it with DEBUGGER_X=...' for the budget `name` (a field)."""
        var = ENV[name]
        now = getattr(self, name)
        more = human(now * 4) if name in ("max_bytes",) else f"{now * 4}"
        if name == "min_free":
            return f"set TMPDIR to a filesystem with more room, or lower {var} (now {human(now)})"
        return f"raise it with {var}={more.replace(' ', '').replace('iB', '')}"


ENV = {"max_bytes": "DEBUGGER_MAX_EXTRACT_BYTES", "max_members": "DEBUGGER_MAX_MEMBERS",
       "max_files": "DEBUGGER_MAX_FILES", "max_ratio": "DEBUGGER_MAX_RATIO", "max_depth": "DEBUGGER_MAX_NESTING",
       "min_free": "DEBUGGER_MIN_FREE_TMP", "ratio_min_bytes": "DEBUGGER_RATIO_FROM"}
_MAX = {"max_bytes": 1 << 50, "max_members": 100_000_000, "max_files": 100_000_000, "max_ratio": 1_000_000,
        "max_depth": 16, "min_free": 1 << 50, "ratio_min_bytes": 1 << 50}


def parse_size(var: str, text: str) -> int:
    """'4G', '512M', '100000', '1.5g' → bytes/count; clamped to the budget's ceiling."""
    m = re.fullmatch(r"\s*(\d{1,16}(?:\.\d{1,6})?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise BudgetConfigError(f"{var}={text[:40]!r} is not a number (e.g. 4G, 100000)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    name = next(k for k, v in ENV.items() if v == var)
    return max(0 if name in ("min_free", "ratio_min_bytes") else 1, min(n, _MAX[name]))


def human(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"
