"""Nothing wider than the terminal (issue 29): every text command in a real pty at 80 and 120 columns, the way a
person runs it in tmux; piped, nothing is cut."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parents[2] / "cases"
CASE = CASES / "gen-slurm-8r-a"
SIGHUP = CASES / "real" / "yolov8-ddp-sighup-terminal-closed-nohup"
PROG = "from trainlog_debugger.agent.cli.app import run; run()"
COMMANDS = [["ask", str(CASE), "--offline"], ["ask", str(CASE), "--offline", "--full"], ["scan", str(CASE)],
            ["nccl", str(CASE)], ["grep", "Watchdog|retrying", str(CASE)], ["steps", str(CASE)], ["diff", str(CASE)],
            ["ask", str(SIGHUP), "--offline", "--full"]]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def in_pty(args: list[str], cols: int, rows: int = 40) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the pty
        os.environ.update(TERM="xterm-256color", NO_COLOR="1")
        os.environ.pop("COLUMNS", None)
        os.execv(sys.executable, [sys.executable, "-c", PROG, *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    out = b""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 120)
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return ANSI.sub("", out.decode("utf-8", "replace")).replace("\r", "")


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 120])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x for x in a if not x.startswith("/")))
def test_no_row_is_wider_than_the_terminal(args, cols):
    text = in_pty(args, cols)
    rows = text.split("\n")
    assert len(rows) > 3, text
    wide = [r for r in rows if len(r) > cols]
    assert not wide, wide[:3]


def test_the_decisive_words_of_the_sighup_trigger_are_on_screen_at_80_columns():
    """The trigger's raw line starts with a tqdm bar; the signal is at its end. It was cut at the width."""
    flat = " ".join(in_pty(["ask", str(SIGHUP), "--offline"], 80).split())
    assert "Received 1 death signal, shutting down workers" in flat
    assert "SIGHUP" in flat and "terminal or SSH session closed" in flat


def test_piped_grep_never_cuts_a_line():
    r = subprocess.run([sys.executable, "-c", PROG, "grep", "Watchdog caught", str(CASE)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert "…" not in r.stdout
    assert "Timeout(ms)=1800000) ran for 1800035 milliseconds before timing out." in r.stdout
