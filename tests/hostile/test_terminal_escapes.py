"""Terminal escapes in log lines never reach the terminal (issue 30): OSC 52 (clipboard write), OSC 8
(hyperlink), OSC 0 (title), CSI 2J (clear) and CSI 6n (cursor report) planted in a rank's log are shown with their
controls made visible by every text command, piped and on a terminal, and by the Markdown post-mortem."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROG = "from trainlog_debugger.agent.cli.app import run; run()"
PLANTS = ["\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "\x1b]0;pwned\x07",
          "\x1b[2J", "\x1b[6n", "\x9b6n"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("esc")
    for r in range(4):
        lines = [f"[rank{r}]:[I1105 12:00:0{r}.000000000 ProcessGroupNCCL.cpp:900] NCCL initialized"]
        if r == 2:
            lines += [f"[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered {p} tail{i}"
                      for i, p in enumerate(PLANTS)]
        lines.append(f"[rank{r}]:[E1105 12:30:0{r}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                     "Timeout(ms)=600000) ran for 600011 milliseconds before timing out.")
        (root / f"rank_{r}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("args", [["ask", "--offline"], ["ask", "--offline", "--full"], ["ask", "--markdown", "-"],
                                  ["scan"], ["grep", "illegal memory"], ["nccl"], ["diff"]])
def test_no_planted_control_reaches_the_output(bundle, args):
    env = {**os.environ, "NO_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "120"}  # rich: a terminal, no styles
    cmd = [*args, str(bundle)]  # grep: PATTERN then the bundle; the others: options before the bundle, as click allows
    r = subprocess.run([sys.executable, "-c", PROG, *cmd], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode in (0, 1), r.stderr
    out = r.stdout + r.stderr
    for bad in ("\x1b]", "\x1b[2J", "\x1b[6n", "\x07", "\x9b"):
        assert bad not in out, (args, bad)
    if args[0] == "grep":
        assert "␛]52;c;cm0gLXJmIH4=" in out  # shown, not acted on
        assert "tail5" in out  # the text after the controls is not swallowed
