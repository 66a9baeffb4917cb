"""Signals as a log line names them: by name (`SIGHUP`), or by number where the line says it is a signal
(torch elastic's `Received 1 death signal`, `killed by signal 9`, torchrun's `exitcode: -9`), and who sends each
one to a training job. Pure data and string reading, shared by the rules (tools/rules/scheduler.py) and the
statement check (tools/statements.py).
"""

from __future__ import annotations

import re

__all__ = ["NAME", "SIGNALS", "SIGNAL_WHY", "line_signals", "signal_name"]

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

NAME = re.compile(r"\bSIG(?:HUP|INT|QUIT|ILL|TRAP|ABRT|BUS|FPE|KILL|USR1|USR2|SEGV|PIPE|ALRM|TERM|CHLD|CONT|STOP|TSTP|"
                   r"XCPU|XFSZ)\b")
# a number a line says is a signal: torch elastic's `Received 15 death signal`, `Signal 9 (SIGKILL)`, `killed by
# signal 9`, `terminated by signal 15`, torchrun's negative exit code (`exitcode: -9`, `exitcode  : -6`)
_NUMBERED = re.compile(r"(?i)\breceived (\d{1,2}) death signal|\b(?:by )?signal:? (\d{1,2})\b"
                       r"|\bexit ?code\s*:?\s*-(\d{1,2})\b")


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
    found = [(m.start(), m.group(0)) for m in NAME.finditer(text)]
    for m in _NUMBERED.finditer(text):
        name = SIGNALS.get(int(next(g for g in m.groups() if g)))
        if name:
            found.append((m.start(), name))
    return list(dict.fromkeys(n for _, n in sorted(found)))
