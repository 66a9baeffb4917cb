"""Run `debugger` on a hostile input the way a user does, and measure what it cost.

Why a subprocess and not CliRunner: the claims of issue 15 are about the whole process tree (forked scan workers
included): its exit code, its peak memory, its wall time, what it leaves in the temp dir, and signals. Only a real
child process shows those. TMPDIR points at a fresh private dir per run, so "temp dir left behind" is a plain
directory listing and nothing of another run can be mistaken for ours.

Peak RSS: the tree (the child and its descendants) is polled with psutil every 20 ms and summed; the child's own
ru_maxrss from wait4() is a floor for short runs the poller may miss. Both are in MiB.

Used by tests/hostile/test_*.py (both parts of issue 15); keep the interface stable:
    run_cli(args, *, env=None, timeout=60, cwd=None, on_start=None) -> Result
    assert_clean(result, rc_in=(0, 2), max_rss_mb=1024, max_s=60.0)
    snapshot(path) -> dict  (compare before/after to prove the input was not modified)
    write_tar(path, members, mode='w:gz')  (build a tar input at test time)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

MODULE = "trainlog_debugger.agent.cli.app"


@dataclass
class Result:
    args: list[str]
    rc: int
    stdout: str
    stderr: list[str]                 # stderr split into lines
    rss_mb: float                     # peak RSS of the whole process tree, MiB
    seconds: float                    # wall time
    tmp_left: list[str]               # what was left in the private TMPDIR (empty = cleaned up)
    timed_out: bool = False
    tmpdir: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def tmp_dirty(self) -> bool:
        return bool(self.tmp_left)

    def line(self) -> str:
        """The one-line summary used in assertion messages."""
        last = self.stderr[-1] if self.stderr else ""
        return (f"rc={self.rc} {self.seconds:.1f}s {self.rss_mb:.0f}MiB tmp_left={len(self.tmp_left)} "
                f"timed_out={self.timed_out} stderr[-1]={last[:200]!r}")


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        procs = [proc] + proc.children(recursive=True)
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _default_sigint() -> None:
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(args: list[str], *, env: dict | None = None, timeout: float = 60, cwd: str | None = None,
            on_start: Callable[[subprocess.Popen], None] | None = None, stdin: bytes | None = None,
            new_session: bool = False) -> Result:
    """`python -m trainlog_debugger.agent.cli.app ARGS` with TMPDIR at a fresh private dir. `env` is added to the
    current environment. `on_start(popen)` runs in a thread once the child started (e.g. to send it a signal);
    `popen.tmpdir` is the child's TMPDIR. `new_session`: the child leads its own process group (a signal to the
    group, as a terminal's Ctrl-C sends it, reaches it and its workers, not the test runner).
    On timeout the tree is killed and `timed_out` set (rc is then the kill's)."""
    tmp = tempfile.mkdtemp(prefix="hostile-tmp-")
    e = dict(os.environ)
    e.update({"TMPDIR": tmp, "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"})
    e.pop("DEBUGGER_TRACEBACK", None)
    e.update(env or {})
    t0 = time.monotonic()
    popen = subprocess.Popen([sys.executable, "-m", MODULE, *map(str, args)], env=e, cwd=cwd,
                             stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=new_session,
                             # a test run started in the background (CI) ignores SIGINT, and a child inheriting that
                             # gets no KeyboardInterrupt handler: Ctrl-C as a user's terminal sends it needs the default
                             preexec_fn=_default_sigint)
    popen.tmpdir = tmp          # for on_start callbacks (e.g. wait for the extraction dir, then signal)
    ps = psutil.Process(popen.pid)
    peak = [0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(ps))
            done.wait(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    if on_start:
        threading.Thread(target=on_start, args=(popen,), daemon=True).start()
    timed_out = False
    try:
        out, err = popen.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for p in _descendants(ps) + [ps]:
            try:
                p.kill()
            except psutil.Error:
                pass
        out, err = popen.communicate()
    seconds = time.monotonic() - t0
    done.set()
    poller.join()
    rss = max(peak[0], _maxrss_children())
    left = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*"))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return Result(list(map(str, args)), popen.returncode, out.decode("utf-8", "replace"),
                  err.decode("utf-8", "replace").splitlines(), rss / (1 << 20), seconds, left, timed_out, tmp)


def _descendants(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children(recursive=True)
    except psutil.Error:
        return []


def _maxrss_children() -> int:
    """ru_maxrss of the largest waited-for child so far (KiB on Linux): a floor, not the tree's sum."""
    import resource
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 if sys.platform != "darwin" else 0


def snapshot(path: str | os.PathLike) -> dict[str, tuple]:
    """Every path under `path` (itself included) with type, size, mtime_ns and a sha256 of regular files; links
    are recorded by target, never followed. Equal snapshots before and after = the input was not modified."""
    root = Path(path)
    out: dict[str, tuple] = {}
    items = [root] + (sorted(root.rglob("*")) if root.is_dir() and not root.is_symlink() else [])
    for p in items:
        st = os.lstat(p)
        rel = str(p.relative_to(root)) if p != root else "."
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            out[rel] = ("file", st.st_size, st.st_mtime_ns, h.hexdigest())
        else:
            out[rel] = ("dir" if p.is_dir() else "other", st.st_mode)
    return out


def write_tar(path: str | os.PathLike, members, mode: str = "w:gz") -> Path:
    """A tar of `members` ((name, bytes) pairs, an iterable: 100,000 need not be held at once) at `path`."""
    import io
    import tarfile
    with tarfile.open(path, mode) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return Path(path)


def assert_clean(result: Result, rc_in: tuple[int, ...] = (0, 2), max_rss_mb: float = 1024,
                 max_s: float = 60.0) -> None:
    """The issue's contract for every hostile input: an expected exit code, no traceback, a clear last line when it
    failed (exactly one `error:` line), memory and time under bounds, and the temp dir removed. One clear line on
    failure."""
    problems = []
    if result.timed_out:
        problems.append("timed out")
    if result.rc not in rc_in:
        problems.append(f"exit code {result.rc} not in {rc_in}")
    text = "\n".join(result.stderr) + result.stdout
    if "Traceback" in text:
        problems.append("a traceback was printed")
    if result.rc != 0:
        errs = [ln for ln in result.stderr if ln.startswith("error:")]
        if len(errs) != 1:
            problems.append(f"{len(errs)} 'error:' lines on stderr (want exactly one)")
    if result.rss_mb > max_rss_mb:
        problems.append(f"peak RSS {result.rss_mb:.0f} MiB > {max_rss_mb} MiB")
    if result.seconds > max_s:
        problems.append(f"took {result.seconds:.1f}s > {max_s}s")
    if result.tmp_left:
        problems.append(f"temp dir not removed ({result.tmp_left[:3]})")
    if problems:
        raise AssertionError(f"{' '.join(result.args)[:120]}: {'; '.join(problems)} | {result.line()}")
