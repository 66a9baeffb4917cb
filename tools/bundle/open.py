"""Open what users really hand us (a folder, tarballs, zips, .gz files, archives inside archives)
as ONE read-only index of text sources, so scanners never care how the logs were packed.

Why it is built this way:
- Inputs are evidence: nothing on disk is modified. Plain and .gz files are read in place; only
  archive members are copied, into a private `tempfile.mkdtemp()` dir that `close()` removes.
- Archives come from strangers: member names are never joined into a filesystem path. Each member is
  streamed into `<tmp>/<seq>-<sanitised name>`, so `../x`, `/etc/x`, `C:\\x` cannot escape by
  construction; they, links and device members are also rejected explicitly (and tar members pass
  `tarfile.data_filter` too). Extracted bytes and member counts are capped, counting the bytes
  actually copied (declared sizes can lie), so a zip bomb ends with a note, not a full disk.
- Every failure of one file is a `Skipped` with a one-line reason; only "nothing usable at all" is
  a `BundleError` (the CLI prints its one line and exits 2). No input may produce a traceback.
- Budgets (tools/bundle/budget.py: bytes, members, files, compression ratio, nesting, temp free space) are checked
  while streaming; a hit stops extraction with a note naming the budget and its variable (issue 15).
- Reads never follow links and never run past what was indexed: `Source.open()` opens with O_NOFOLLOW (and
  O_NONBLOCK, so a fifo swapped in cannot block), checks with fstat on the descriptor that it is still the regular
  file the walk saw (same device and inode), and reads at most the size seen at open time; a file that grew or was
  swapped is reported by `Bundle.notes`/`Bundle.skipped`, which re-check the sources when read.
- Evidence is kept where it can be: NUL runs (what copytruncate leaves) are dropped from the stream instead of the
  file being called binary; a truncated .gz or tar member is read to the break and marked partial; a tar that
  stops early says after which member and at which byte.
- Temp dirs are named `trainlog-bundle-<pid>-*` with an `.owner` marker (host, pid): one of a run that was killed
  (same user, same host, pid gone) is removed when the next bundle is opened.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from trainlog_debugger.tools.bundle.budget import Budget, BudgetConfigError
from trainlog_debugger.tools.bundle.archives import _printable
from trainlog_debugger.tools.bundle.source import Skipped, Source
from trainlog_debugger.tools.bundle.walk import OWNER_FILE, TMP_PREFIX, _Loader, _one_line, _summary


class BundleError(Exception):
    """Nothing usable: the message is ONE clear line for the user (the CLI prints it and exits 2)."""




class Bundle:
    """Index of the sources of one bundle. Use as a context manager; close() removes `tmpdir`
    (None when nothing had to be extracted). Also removed at garbage collection / exit."""

    def __init__(self, root: str, sources: list[Source], skipped: list[Skipped], notes: list[str],
                 tmpdir: Path | None, inputs: list[str] | None = None):
        self.root, self.sources, self.tmpdir = root, sources, tmpdir
        # the prefix each input's files carry (`a/x.log` for input `a` when several were given; [] for one input):
        # what tools.bundle.recognise.unrelated_inputs compares
        self.inputs = list(inputs or [])
        self._skipped, self._notes = skipped, notes
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(tmpdir), True) if tmpdir else None

    # What was indexed can change under us (a log still written, a file swapped for a link). Readers never see it
    # (Source.open() reads to the indexed size and refuses another inode, in forked workers too), and the answer
    # says so: both lists are re-checked against the disk whenever they are read, in the parent process.
    @property
    def skipped(self) -> list[Skipped]:
        return self._skipped + [Skipped(s.rel, why) for s, why in self._changed() if why.startswith("replaced")]

    @skipped.setter
    def skipped(self, value: list[Skipped]) -> None:
        self._skipped = list(value)

    @property
    def notes(self) -> list[str]:
        partial = [f"{s.rel}: {s.partial}" for s in self.sources if s.partial]
        grew = [f"{s.rel}: {why}" for s, why in self._changed() if not why.startswith("replaced")]
        return self._notes + partial + grew

    @notes.setter
    def notes(self, value: list[str]) -> None:
        self._notes = list(value)

    def _changed(self) -> list[tuple[Source, str]]:
        out, tmp = [], f"{self.tmpdir}{os.sep}" if self.tmpdir else ""
        for s in self.sources:
            if s.ident is None or (tmp and str(s.path).startswith(tmp)):
                continue
            try:
                st = os.lstat(s.path)
            except OSError:
                out.append((s, "removed after the bundle was indexed: read as far as it went"))
                continue
            if stat.S_ISLNK(st.st_mode):
                out.append((s, "replaced by a symlink after the bundle was indexed: not followed"))
            elif (st.st_dev, st.st_ino) != s.ident:
                out.append((s, "replaced by another file after the bundle was indexed: not read"))
            elif st.st_size > s.size:
                out.append((s, f"still growing: read to its size when opened ({s.size:,} bytes; now {st.st_size:,})"))
            elif st.st_size < s.size:
                out.append((s, f"shrank while read (truncated to {st.st_size:,} of {s.size:,} bytes): partial"))
        return out

    def close(self) -> None:
        if self._cleanup:
            self._cleanup()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()




def clean_stale_tmpdirs(parent: str | None = None) -> list[str]:
    """Remove the temp dirs of runs that were killed (SIGKILL, OOM, power): named `trainlog-bundle-<pid>-*`,
    owned by us, with an `.owner` marker of this host whose pid is no longer alive. Anything else is left alone:
    a dir of another user, another host or container sharing /tmp (its pids are not ours to judge), a live run.
    Returns the dirs removed."""
    parent = parent or tempfile.gettempdir()
    host, removed = socket.gethostname(), list[str]()
    try:
        names = [n for n in os.listdir(parent) if n.startswith(TMP_PREFIX)]
    except OSError:
        return removed
    for name in names:
        m = re.match(rf"{TMP_PREFIX}(\d{{1,10}})-", name)
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
            if not m or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            with open(os.path.join(path, OWNER_FILE), "rb") as fh:
                owner = fh.read(300).decode("utf-8", "replace").split()
        except OSError:
            continue
        if owner != [host, m.group(1)] or _alive(int(m.group(1))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True         # exists (another user's), or cannot tell: keep
    return True


_STALE_CLEANED = False


def open_bundle(paths: str | Path | Sequence[str | Path], *, max_extract_bytes: int | None = None,
                max_members: int | None = None, budget: Budget | None = None) -> Bundle:
    """Index `paths` (one or several files/dirs/archives). Raises BundleError (one line) when a
    path is missing or nothing readable is found; everything else becomes `skipped`/`notes`.
    `budget`: the extraction budgets (default: Budget.from_env()); `max_extract_bytes`/`max_members` override
    two of them."""
    global _STALE_CLEANED
    try:
        budget = budget or Budget.from_env()
    except BudgetConfigError as exc:
        raise BundleError(str(exc)) from None
    if max_extract_bytes is not None:
        budget = replace(budget, max_bytes=max(1, int(max_extract_bytes)))
    if max_members is not None:
        budget = replace(budget, max_members=max(1, int(max_members)))
    if not _STALE_CLEANED:
        _STALE_CLEANED = True
        clean_stale_tmpdirs()
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise BundleError("no input given")
    root = _one_line(", ".join(str(p) for p in items))
    for p in items:
        if not isinstance(p, (str, os.PathLike)) or "\x00" in str(p) or not os.path.exists(p):
            raise BundleError(_one_line(f"no such file or directory: {p}"))
        if not (os.path.isdir(p) or os.path.isfile(p)):
            raise BundleError(_one_line(f"not a regular file or directory: {p}"))
    loader = _Loader(budget)
    try:
        used: set[str] = set()
        for p in map(Path, items):
            name = _printable(p.name or p.resolve().name or str(p))
            prefix = name if len(items) > 1 or not p.is_dir() else ""
            while prefix and prefix in used:
                prefix += "~"       # two inputs with the same base name stay distinguishable
            used.add(prefix)
            if p.is_dir():
                loader.walk(p, prefix)
            else:
                loader.add_file(p, prefix, 0)
        loader.finish()
        if not any(s.size for s in loader.sources):
            raise BundleError(_summary(root, loader))
    except BaseException:
        if loader.tmp:
            shutil.rmtree(loader.tmp, ignore_errors=True)
        raise
    return Bundle(root, loader.sources, loader.skipped, loader.notes, loader.tmp,
                  inputs=sorted(used - {""}) if len(items) > 1 else [])
