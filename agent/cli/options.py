"""What every `debugger` command shares: the PATH argument and --json option, the two consoles, `fail`, the error
guard `guarded()`, `opened()` (a bundle inside the guard) and the progress bar on stderr. How a report is rendered
in the chosen format is agent/cli/runner.py.

Bad input never produces a traceback: a BundleError (nothing usable) is one line on stderr and exit code 2; any
other unexpected error, an ImportError of a broken install included, is one line and exit code 2 too (set
DEBUGGER_TRACEBACK=1 to see the stack when debugging).

Signals: SIGTERM (what `timeout`, SLURM and Kubernetes send) and SIGHUP (a closed terminal) unwind the command like
Ctrl-C does, so every `with bundle:` runs its close() and the private temp dir (up to the extraction budget) is
removed; the exit code is 128 + the signal's number, as a shell reports it. The handlers are installed by
`guarded()` for the body and the previous ones restored afterwards. So that an import error is caught too, this module imports
nothing from trainlog_debugger.tools / .eval / the renderers: the commands import those INSIDE `guarded()`.

Nor does it import Typer or rich at its top: the fast path of `debugger scan` (agent/cli/fast.py) runs a command
through `guarded()`, `opened()` and `progress()` (agent/cli/runner.py) without building the Typer app, and Typer
(with the click and pydantic it imports) and rich cost ~0.2 s of a run that should take less than 0.15 s (issue
16). `fail` ends a command with SystemExit, which Typer lets through as it is.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path


def _console_class():
    from rich.console import Console
    from rich.segment import Segment

    from trainlog_debugger.agent.render.plain import UNSAFE, visible

    class _Console(Console):
        """rich's Console, except that
        - a closed pipe (`| head -1`) ends the command quietly with exit code 0, as ripgrep and git do (rich's own
          handler exits 1);
        - no text reaches the terminal with a control character in it (issue 30): a log line or the agent's answer
          holding OSC 52 (clipboard write), OSC 8 (hyperlink), OSC 0 (title), CSI 2J (clear) or CSI 6n (report the
          cursor, whose reply lands in the shell's input) is shown with its controls made visible (`␛]52;c;…`).
          Checked on every segment rich renders, so no renderer can forget it; rich's own control segments (cursor
          moves of a progress bar) and its styles are not text and pass as they are."""

        def on_broken_pipe(self) -> None:
            quiet_pipe()
            raise SystemExit(0)

        def render(self, renderable, options=None):
            for seg in super().render(renderable, options):
                if seg.control is None and UNSAFE.search(seg.text):
                    yield Segment(visible(seg.text), seg.style, None)
                else:
                    yield seg
    return _Console


def _make_out():
    # On a terminal rich wraps at words whatever a renderer did not fit itself (agent/render/fit.py fits what it
    # prints and passes soft_wrap=True), so no line is wider than the terminal and none is broken mid-token by the
    # terminal. Piped output (soft_wrap): rich never inserts a line break, every line stays whole (rows of
    # file:line are meant to be grepped); tables are laid out at $COLUMNS when set.
    cls = _console_class()
    console = cls(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        cols = os.environ.get("COLUMNS", "")
        console = cls(highlight=False, soft_wrap=True,
                      width=int(cols) if cols.isdigit() and 20 <= int(cols) <= 1000 else 200)
    return console


def _make_err():
    return _console_class()(stderr=True, highlight=False, soft_wrap=True)


class LazyConsole:
    """A rich Console made on first use. Why: importing rich costs ~80 ms, and `debugger scan --json` (or a usage
    error) never prints through rich; every command module imports `out`/`err` at its top, so the object they
    import must be cheap. Every attribute goes to the real Console, except `is_terminal` while there is none yet
    (asked by every command before its progress bar or spinner): a stream that is not a tty, with neither of the
    variables that make rich call a pipe a terminal, is not one for rich either, so rich is not loaded to say so."""

    def __init__(self, make, stream: str):
        object.__setattr__(self, "_make", make)
        object.__setattr__(self, "_real", None)
        object.__setattr__(self, "_stream", stream)

    @property
    def is_terminal(self) -> bool:
        if object.__getattribute__(self, "_real") is None and not _may_be_terminal(getattr(sys, self._stream, None)):
            return False
        return self._get().is_terminal

    def _get(self):
        real = object.__getattribute__(self, "_real")
        if real is None:
            real = object.__getattribute__(self, "_make")()
            object.__setattr__(self, "_real", real)
        return real

    def __getattr__(self, name):
        return getattr(self._get(), name)

    def __setattr__(self, name, value):
        setattr(self._get(), name, value)

    def __enter__(self):
        return self._get().__enter__()

    def __exit__(self, *exc):
        return self._get().__exit__(*exc)


def _may_be_terminal(stream) -> bool:
    """False when rich's Console.is_terminal would say False for sure: no TTY_COMPATIBLE or FORCE_COLOR in the
    environment (rich's overrides) and a stream that is not a tty."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream: rich says False too
        return False


out = LazyConsole(_make_out, "stdout")
err = LazyConsole(_make_err, "stderr")


def __getattr__(name: str):
    """PathsArg and JsonOpt, the Typer parameters the command modules share, made on first use (PEP 562): they
    import Typer, which the fast path never loads."""
    if name not in ("PathsArg", "JsonOpt"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import typer
    if name == "PathsArg":
        value = typer.Argument(..., metavar="PATH", help="Log bundle(s): directory, .tar/.tar.gz/.tgz/.zip, or files (.gz ok).")
    else:
        value = typer.Option(False, "--json", help="Print machine-readable JSON.")
    globals()[name] = value
    return value


def print_json(obj) -> None:
    """`obj` (a pydantic model or plain data: `debugger schema`) as JSON on stdout, written as the JSON format
    writes a report (agent/cli/runner.py): indented for a person at a terminal, one line for a pipe or a file."""
    from trainlog_debugger.agent.render.data import report_json
    sys.stdout.write(report_json(obj, indent=2 if is_tty(sys.stdout) else None))


def is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def fail(msg: str, code: int = 2):
    """The command's error as one line on stderr, and exit `code` (SystemExit: Typer, click and CliRunner pass it
    through as they pass typer.Exit, and the fast path has no Typer)."""
    msg = " ".join(str(msg).split())  # exactly one line, whatever the exception text held
    sys.stderr.write(f"error: {msg}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _is_bundle_error(e: BaseException) -> bool:
    try:  # imported here, not above: a broken install must still end in one line, not a traceback
        from trainlog_debugger.tools.bundle.open import BundleError
    except Exception:
        return False
    return isinstance(e, BundleError)


def _is_typer_exit(e: BaseException) -> bool:
    typer = sys.modules.get("typer")  # no Typer loaded, no typer.Exit raised: it is not imported to say so
    return typer is not None and isinstance(e, typer.Exit)


def quiet_pipe() -> None:
    """The reader went away (`debugger ask … | head -1`): nothing more to say, and Python's flush at exit must not
    complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class Terminated(BaseException):
    """SIGTERM/SIGHUP arrived: unwinds like KeyboardInterrupt (a BaseException, so no `except Exception` in a tool
    swallows it) and runs every cleanup on the way out."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_SIGNALS = ("SIGTERM", "SIGHUP")


def _on_signal(owner: int):
    def handler(signum, frame):
        if os.getpid() != owner:    # a forked worker (its parent unwinds and removes the temp dir): just end
            os._exit(128 + signum)
        raise Terminated(signum)
    return handler


@contextmanager
def signals_unwind():
    """SIGTERM and SIGHUP raise Terminated in the main thread while the body runs; the previous handlers are
    restored after. Elsewhere than the main thread (signal handlers cannot be installed there) it does nothing."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in _SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, _on_signal(os.getpid()))
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _signal_name(signum: int) -> str:
    import signal
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextmanager
def guarded():
    """The body's errors as one line on stderr: BundleError → exit 2, anything else (imports too) → exit 2, with the
    exception's type; SIGTERM/SIGHUP → 128+signum after cleanup; a closed pipe on stdout → exit 0, quietly."""
    try:
        with signals_unwind():
            yield
    except BrokenPipeError:
        quiet_pipe()
        raise SystemExit(0)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Terminated as t:
        fail(f"terminated by {_signal_name(t.signum)}; temporary files removed", 128 + t.signum)
    except MemoryError:
        fail("out of memory (the input is too large for this machine's memory)", 2)
    except Exception as e:  # never a traceback for the user
        if _is_typer_exit(e):  # a command's own `raise typer.Exit(code)`: its exit code, as it is
            raise
        if _is_bundle_error(e):
            fail(str(e), 2)
        if os.environ.get("DEBUGGER_TRACEBACK"):
            raise
        fail(f"internal error: {type(e).__name__}: {e}", 2)


STDIN_LIMIT = 8 << 30  # a log on stdin is copied to a private temp file; past this it is refused


@contextmanager
def opened(paths: list[Path]):
    """The bundle of `paths` (use inside `guarded()`: its errors are the user's one line). `-` is one log read from
    stdin (`kubectl logs pod | debugger ask -`), and a pipe given as a path (`<(zcat run.log.gz)`, `/dev/stdin`)
    is read the same way: each copied into a private temporary directory removed afterwards."""
    import shutil

    from trainlog_debugger.tools.bundle.open import BundleError, open_bundle
    tmp = None
    try:
        real = []
        for p in paths:
            if str(p) == "-":
                if sys.stdin.isatty():
                    raise BundleError("`-` reads a log from stdin, and stdin is a terminal: pipe a log in")
                stream, name = sys.stdin.buffer, "stdin.log"
            elif _is_pipe(p):
                stream, name = open(p, "rb"), f"{_pipe_name(p)}.log"  # noqa: SIM115 (closed below)
            else:
                real.append(str(p))
                continue
            tmp = tmp or _stdin_dir()
            dest = os.path.join(tmp, name)
            while os.path.exists(dest):
                dest = dest[:-4] + "~.log"
            try:
                _copy_stream(stream, dest, "stdin" if str(p) == "-" else str(p))
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()
            real.append(dest)
        with spinner("reading the bundle (archives are extracted to a private temp dir)"):
            b = open_bundle(real)
        with b:
            yield b
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _is_pipe(p: Path) -> bool:
    """A FIFO named as a path: process substitution (`/dev/fd/63`), `/dev/stdin` fed by a pipe, a named pipe.
    Only pipes: a character device (/dev/zero, a terminal) is no log and never ends."""
    import stat
    try:
        return stat.S_ISFIFO(os.stat(p).st_mode)
    except (OSError, ValueError):
        return False


def _pipe_name(p: Path) -> str:
    """`stdin` for /dev/stdin, `fd-63` for /dev/fd/63, else the pipe's own name: what the report cites."""
    s = str(p)
    if s in ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
        return "stdin"
    if s.startswith(("/dev/fd/", "/proc/self/fd/")):
        return f"fd-{p.name}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in p.name)[:64] or "pipe"


def _stdin_dir() -> str:
    """A private temp dir named and marked as the bundle's are (`trainlog-bundle-<pid>-…` with its `.owner`), so a
    run killed while it copied stdin leaves nothing the next run does not sweep (issue 30: it was never swept)."""
    import socket
    import tempfile

    from trainlog_debugger.tools.bundle.walk import OWNER_FILE, TMP_PREFIX
    tmp = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-stdin-")
    with open(os.path.join(tmp, OWNER_FILE), "x") as fh:
        fh.write(f"{socket.gethostname()} {os.getpid()}\n")
    return tmp


SNIFF_BYTES = 1 << 20  # the first MiB of a piped log is judged before the rest is copied


def _copy_stream(stream, dest: str, what: str) -> None:
    """Copy a piped log into `dest`, refusing early (issue 30: stdin wrote up to 8 GiB before refusing, and a
    small TMPDIR filled to an "internal error"): after its first MiB when nothing in it is a training job's log,
    past STDIN_LIMIT, and when the temp filesystem falls under its free-space floor (the extraction budget's)."""
    from trainlog_debugger.tools.bundle.budget import Budget
    from trainlog_debugger.tools.bundle.open import BundleError
    from trainlog_debugger.tools.bundle.recognise import speaks_training
    floor = Budget.from_env().min_free
    with open(dest, "wb") as fh:
        n, head, judged = 0, b"", False
        while chunk := stream.read(1 << 20):
            n += len(chunk)
            if n > STDIN_LIMIT:
                raise BundleError(f"{what} holds more than {STDIN_LIMIT >> 30} GiB: save it to a file")
            if not judged:
                head += chunk
                if len(head) >= SNIFF_BYTES:
                    judged = True
                    if not speaks_training(head):
                        raise BundleError(f"no training-job log in the first MiB of {what}: nothing copied further")
            try:
                fh.write(chunk)
                if n % (64 << 20) < len(chunk):
                    sv = os.statvfs(os.path.dirname(dest))
                    if sv.f_bavail * sv.f_frsize < floor:
                        raise BundleError(f"the temp filesystem is nearly full while copying {what} (set TMPDIR "
                                          f"to a larger one, or save the log to a file)")
            except OSError as e:
                raise BundleError(f"cannot copy {what} into the temp dir ({e.strerror or e}): set TMPDIR to a "
                                  "larger one, or save the log to a file") from None


@contextmanager
def spinner(what: str):
    """A spinner on stderr while a phase runs, only on a terminal (a tar.gz of 256 ranks takes seconds to open)."""
    if not err.is_terminal:
        yield
        return
    with err.status(what, spinner="dots"):
        yield


def writable(path: Path | None, what: str) -> None:
    """Fail now, before a long analysis, when an output path cannot be written (`-` is stdout)."""
    if path is None or str(path) == "-":
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        fail(f"{what} {path} is a directory")
    if not parent.is_dir():
        fail(f"{what} {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"{what} {path} is not writable")


@contextmanager
def progress():
    """A progress bar on stderr, only on a terminal and only once a run has lasted a few seconds: yields the
    callback `cb(done, total)` to hand to the tool (None when there is no terminal); the bar is gone afterwards."""
    if not err.is_terminal:
        yield None
        return
    import time
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   console=err._get(), transient=True)
    state = {"task": None, "t0": time.monotonic()}

    def cb(done: int, total: int):
        if state["task"] is None:
            if time.monotonic() - state["t0"] < 2.0:
                return
            bar.start()
            state["task"] = bar.add_task("scanning", total=total)
        bar.update(state["task"], completed=done)

    try:
        yield cb
    finally:
        bar.stop()
