"""Time limits on the agent's tools: every call ends within a wall-clock limit, and a call that runs the model's
own regex runs in a child process that is killed at its deadline.

Why two mechanisms. Python's `re` has no timeout, and its matcher is C code that holds the GIL for as long as it
backtracks: `(a+)+$` against a 40-character line of `a`s followed by `!` takes minutes, `(\\w+\\s?)*$` on a long log
line hours, and no other thread of the process runs meanwhile, so a thread with a deadline cannot even notice.
Refusing catastrophic constructs up front catches only the shapes one thinks of (`(a|aa)+`, `(.*a){20}` and
`\\w*\\w*\\w*x` all pass a nested-quantifier check), so a regex is run where it can be stopped: a forked child
(it inherits the open bundle and the reports, nothing is copied in), killed with its whole process group (the
scanner's own workers included) when the deadline passes. Every other tool is plain Python, which yields the GIL:
it runs in a daemon thread, and the caller stops waiting at the limit (the thread's late answer is dropped).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from typing import Any, Callable


class Timeout(Exception):
    """The call did not finish within its limit (the message says which limit)."""


def in_thread(fn: Callable[[], Any], seconds: float) -> Any:
    """fn() in a daemon thread; its result, its exception re-raised, or Timeout after `seconds`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as is
            box["error"] = e

    t = threading.Thread(target=run, name="agent-tool", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise Timeout(f"the call took longer than {seconds:g} s and was abandoned")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def in_child(fn: Callable[..., Any], *args: Any, seconds: float) -> Any:
    """fn(*args) in a forked child; its (picklable) result, a RuntimeError with the child's exception in words, or
    Timeout after `seconds` (the child and every process it started are killed)."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(send, fn, args), daemon=False)
    p.start()
    send.close()
    try:
        if not recv.poll(seconds):
            raise Timeout(f"stopped after {seconds:g} s")
        try:
            ok, value = recv.recv()
        except EOFError:  # the child died without answering (killed, out of memory)
            p.join(1)
            raise RuntimeError(f"the worker ended without an answer (exit code {p.exitcode})") from None
    finally:
        recv.close()
        if p.is_alive():
            _kill(p.pid)
        p.join(5)
    if not ok:
        raise RuntimeError(value)
    return value


def _child(send, fn, args) -> None:
    os.setpgid(0, 0)  # its own process group: the parent kills it with every worker it forks
    try:
        out = (True, fn(*args))
    except BaseException as e:  # noqa: BLE001 - sent to the parent as words
        out = (False, f"{type(e).__name__}: {e}")
    try:
        send.send(out)
    finally:
        send.close()
        os._exit(0)  # no atexit handlers, no flushing of the parent's inherited buffers


def _kill(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
