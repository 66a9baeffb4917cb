"""The README's sample outputs, regenerated from the current code so that they cannot drift.

A sample in README.md is a fenced block whose first line is `$ debugger ...`: this runs that command from the
repository root (no API key, 120 columns, no colour) and puts its output under it. `--check` only compares and
exits 1 naming the stale samples (a test runs it). Long outputs keep their first and last lines with a marker.

    python -m trainlog_debugger.eval.readme_samples            # rewrite README.md
    python -m trainlog_debugger.eval.readme_samples --check    # is every sample current?
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```\n(\$ debugger [^\n]+)\n(.*?)^```$", re.M | re.S)
MAX_LINES = 24
# commands whose output needs what is not in a clone, or takes long: kept as written
SKIP = ("debugger eval",)


def run(cmd: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_"))}
    env.update(COLUMNS="120", NO_COLOR="1", TERM="dumb")
    args = shlex.split(cmd[2:])[1:]
    r = subprocess.run([sys.executable, "-c", "from trainlog_debugger.agent.cli.app import run; run()", *args],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    lines = r.stdout.rstrip("\n").split("\n")
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 6] + ["..."] + lines[-5:]
    return "\n".join(line.rstrip() for line in lines) + "\n"


# what changes from run to run without the output meaning anything else: durations and throughputs
_VOLATILE = re.compile(r"\b\d+(?:\.\d+)?(?: ?(?:s|ms|MB/s|GB/s|MiB/s))\b")


def _same(a: str, b: str) -> bool:
    return _VOLATILE.sub("#", a) == _VOLATILE.sub("#", b)


def refresh(text: str) -> tuple[str, list[str]]:
    stale: list[str] = []

    def sub(m: re.Match) -> str:
        cmd, body = m.group(1), m.group(2)
        if cmd[2:].startswith(SKIP):
            return m.group(0)
        new = run(cmd)
        if _same(new, body):
            return m.group(0)
        stale.append(cmd)
        return f"```\n{cmd}\n{new}```"
    return BLOCK.sub(sub, text), stale


def main(argv: list[str]) -> int:
    readme = ROOT / "README.md"
    text, stale = refresh(readme.read_text(encoding="utf-8"))
    if "--check" in argv:
        for c in stale:
            print(f"stale README sample: {c} (run python -m trainlog_debugger.eval.readme_samples)")
        return 1 if stale else 0
    readme.write_text(text, encoding="utf-8")
    print(f"{len(stale)} sample(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
