"""Each statement checked against the lines it cites, before it is shown (issue 29).

Why: a sentence written from a rule's template can say more than its line. A launcher line `Sending process 4193
closing signal SIGHUP` was told as "launcher sent SIGTERM", a `retrying 4/5` line was cited for "retries ran out
(5/5)", a line with no rank gave "CUDA error on rank None". Rules should write the right words, and they are fixed
where they do not; this is the last check, in one place, on every chain step, timeline entry and alternative:

- **signals**: the signals a statement names (`SIGTERM`, `SIGTERM/SIGINT/SIGHUP`) must be the ones its lines hold,
  by name or by number where the line says it is a signal (`Received 1 death signal`, `killed by signal 9`,
  torchrun's `exitcode: -9`). Alternatives are narrowed to the one the line holds; a contradiction is replaced;
- **retry figures**: an `(a/b)` figure of a sentence about retries must be one its lines print, else it is left
  out (the sentence then says what the line supports);
- **no `None`**: a rank, node or count the code did not know is left out, never printed as Python's `None`.

A statement whose lines name no signal or figure is not touched: there is nothing to check it against. What was
changed is returned, so the caller can say it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SIGNALS", "SIGNAL_WHY", "checked_statement", "line_signals", "signal_name"]

# Linux's numbering (the logs come from Linux machines; Python's `signal` module would answer for the machine
# reading the logs instead)
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
           17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 24: "SIGXCPU", 25: "SIGXFSZ"}
_NUMBERS = {v: k for k, v in SIGNALS.items()}

# who sends each signal to a training job, and what to do (the explanation follows the fact)
SIGNAL_WHY = {
    "SIGHUP": ("the launching terminal or SSH session closed (the job ran in a foreground shell)",
               "run the job under nohup, tmux/screen or setsid, or submit it to the scheduler"),
    "SIGINT": ("Ctrl-C in the launching terminal, or a SIGINT sent to the launcher",
               "check who interrupted the run; restart as is if it was deliberate"),
    "SIGTERM": ("a stop from outside: the scheduler (scancel, time limit, preemption), Kubernetes (pod deleted or "
                "evicted) or a user's kill",
                "check the scheduler for cancellation, time limit, preemption or node drain at this time"),
    "SIGKILL": ("killed without a chance to clean up: the kernel's OOM killer, the scheduler after its grace period, "
                "or kill -9",
                "check the kernel log for the OOM killer and the scheduler for a forced end"),
    "SIGUSR1": ("a user signal: Slurm's --signal before the time limit, or a trainer's requeue",
                "check the job's --signal setting and whether it was requeued"),
    "SIGUSR2": ("a user signal: Slurm's --signal before the time limit, or a trainer's requeue",
                "check the job's --signal setting and whether it was requeued"),
    "SIGXCPU": ("the CPU time limit was reached", "raise the job's CPU time limit"),
}

_NAME = re.compile(r"\bSIG(?:HUP|INT|QUIT|ILL|TRAP|ABRT|BUS|FPE|KILL|USR1|USR2|SEGV|PIPE|ALRM|TERM|CHLD|CONT|STOP|TSTP|"
                   r"XCPU|XFSZ)\b")
# a number a line says is a signal: torch elastic's `Received 15 death signal`, `Signal 9 (SIGKILL)`, `killed by
# signal 9`, `terminated by signal 15`, torchrun's negative exit code (`exitcode: -9`, `exitcode  : -6`)
_NUMBERED = re.compile(r"(?i)\breceived (\d{1,2}) death signal|\b(?:by )?signal:? (\d{1,2})\b"
                       r"|\bexit ?code\s*:?\s*-(\d{1,2})\b")
_GROUP = re.compile(_NAME.pattern + r"(?:\s*/\s*" + _NAME.pattern + r")*")
_FIGURE = re.compile(r"\b\d{1,6}/\d{1,6}\b")
_PAREN_FIGURE = re.compile(r"\s*\((\d{1,6}/\d{1,6})\)")
_NONE = re.compile(r"(?: on| of| from)? (?:rank|node|ranks|rank\(s\))\s+None\b|\bNone\b(?= ranks?\b)")


def signal_name(value) -> str | None:
    """`SIGTERM` for 15, '15', 'SIGTERM', 'Signals.SIGTERM', 'TERM'; None for anything else."""
    s = str(value).strip()
    if s.lstrip("-").isdigit():
        return SIGNALS.get(abs(int(s)))
    s = s.rsplit(".", 1)[-1].upper()
    s = s if s.startswith("SIG") else f"SIG{s}"
    return s if s in _NUMBERS else None


def line_signals(text: str) -> list[str]:
    """The signals a line holds, in the order it names them."""
    found = [(m.start(), m.group(0)) for m in _NAME.finditer(text)]
    for m in _NUMBERED.finditer(text):
        name = SIGNALS.get(int(next(g for g in m.groups() if g)))
        if name:
            found.append((m.start(), name))
    return list(dict.fromkeys(n for _, n in sorted(found)))


def checked_statement(text: str, lines: Iterable[str]) -> tuple[str, list[str]]:
    """(the statement as its lines support it, what was changed). See the module's docstring."""
    lines = [ln for ln in lines if ln]
    changes: list[str] = []
    held = list(dict.fromkeys(s for ln in lines for s in line_signals(ln)))
    if held:
        def fix(m: re.Match) -> str:
            said = [s.strip() for s in m.group(0).split("/")]
            keep = [s for s in said if s in held] or held
            new = "/".join(keep)
            if new != m.group(0):
                changes.append(f"{m.group(0)} → {new} (what the line holds)")
            return new
        text = _GROUP.sub(fix, text)
    if "retr" in text.lower():
        figures = {m.group(0) for ln in lines for m in _FIGURE.finditer(ln)}

        def fig(m: re.Match) -> str:
            if m.group(1) in figures:
                return m.group(0)
            changes.append(f"{m.group(1)} left out (no cited line prints it)")
            return ""
        text = _PAREN_FIGURE.sub(fig, text)
    if "None" in text:
        new = _NONE.sub("", text)
        if new != text:
            changes.append("an unknown rank or node left out (was printed as None)")
            text = new
    return text, changes
