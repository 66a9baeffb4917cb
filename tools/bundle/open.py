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

import bz2
import contextlib
import errno
import io
import gzip
import lzma
import os
import re
import shutil
import socket
import stat
import tarfile
import tempfile
import weakref
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

from trainlog_debugger.tools.bundle.budget import Budget, BudgetConfigError, human as _human

from trainlog_debugger.tools.sources.detect import HEAD_BYTES, sniff
from trainlog_debugger.tools.sources.flight_recorder.format import FR_DUMP

GZIP_VERIFY_BYTES = 64 << 20    # .gz files up to this (compressed) size are fully test-read at open
SKIP_LIST_MAX = 1000            # cap-skipped members listed one by one; the rest only counted
RATIO_MAX, RATIO_MIN_SIZE = 1000, 16 << 20   # zip member > 16 MiB at > 1000:1 is a bomb, not a log
NUL_SEEK_MAX = 256 << 20        # how far past a NUL run (copytruncate) we look for the text; beyond: skipped
FREE_CHECK_EVERY = 64 << 20     # statvfs of the temp filesystem after this many bytes written
TMP_PREFIX = "trainlog-bundle-"
_NUL_RUN = re.compile(rb"\x00{16,}")   # copytruncate leaves runs (the bytes before the writer's offset)
OWNER_FILE = ".owner"            # "<host> <pid>" of the run that made the temp dir
CASE_LABEL = "truth.yaml"
JUNK_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "__MACOSX"})
_CHUNK = 1 << 20
_CTRL = bytes(set(range(32)) - set(b"\t\n\r\f\v\b\x1b")) + b"\x7f"
_DATA_FILTER = getattr(tarfile, "data_filter", None)

#: What a reader of `Source.open()` must catch: a .gz can be truncated or corrupt past the part
#: checked at open time (files > GZIP_VERIFY_BYTES), and files can vanish. gzip.BadGzipFile is an
#: OSError. On any of these, skip the rest of the source with `read_error_reason(exc)`.
READ_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, OSError)


class ReadRefused(OSError):
    """Source.open()/reads that must not go on: the file was swapped (link, other inode), or a budget was hit while
    decompressing. An OSError, so every reader already catches it (READ_ERRORS); `reason` is its one line."""

    def __init__(self, reason: str):
        super().__init__(errno.ELOOP, reason)
        self.reason = reason


def read_capped(src, cap: int, what: str, notes: list[str]) -> str | None:
    """A whole-file record (a stack dump, a hardware snapshot) as text, read up to `cap` bytes: the readers of such
    records share this so that a file cut at the cap, or not readable at all, is said in `notes`, never silent.
    None when it could not be read."""
    try:
        with src.open() as fh:
            raw = fh.read(cap + 1)
    except READ_ERRORS as e:
        notes.append(f"{src.rel}: not read ({read_error_reason(e)})")
        return None
    if len(raw) > cap:
        notes.append(f"{src.rel}: only the first {cap:,} bytes of the {what} were read")
    return raw[:cap].decode("utf-8", "replace")


def read_error_reason(exc: BaseException) -> str:
    """One-line Skipped reason for an exception in READ_ERRORS (or any other)."""
    if isinstance(exc, ReadRefused):
        return exc.reason
    if isinstance(exc, EOFError):
        return "truncated gzip"
    if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        return f"corrupt gzip ({exc})"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, OSError):
        return f"read error ({exc.strerror or exc})"
    return f"unreadable ({type(exc).__name__}: {exc})"


class BundleError(Exception):
    """Nothing usable: the message is ONE clear line for the user (the CLI prints it and exits 2)."""


@dataclass
class Source:
    rel: str            # display path; archive members as 'logs.tar.gz!dir/rank_3.log'
    path: Path          # the real file: the user's original (read in place) or a copy in the temp dir
    kind: str           # tools.sources.detect.sniff()
    size: int           # bytes on disk of `path` (compressed size when gzip) when indexed: reads stop there
    gzip: bool = False  # `path` is gzip-compressed: open() decompresses
    ident: tuple[int, int] | None = None   # (st_dev, st_ino) seen when indexed: open() refuses any other file
    nul: bool = False   # NUL runs seen (copytruncate): open() drops NUL bytes from the stream
    max_out: int = 0    # gzip: decompressed bytes allowed (compression ratio budget); 0 = no cap
    partial: str = ""   # why this source is known to be incomplete ('' = whole); also in Bundle.notes

    def open(self) -> BinaryIO:
        """Binary stream of the (decompressed) content, opened read-only, never through a link, at most `size`
        bytes of the file. Reads may raise READ_ERRORS (EOFError on a truncated .gz, ReadRefused); see
        read_error_reason()."""
        raw: io.RawIOBase = _Bounded(_open_nofollow(self.path, self.ident), self.size)
        if self.gzip:
            raw = _Capped(gzip.GzipFile(fileobj=io.BufferedReader(raw), mode="rb"), self.max_out, self.rel)
        if self.nul:
            raw = _NoNul(raw)
        return io.BufferedReader(raw, 1 << 16)


def _open_nofollow(path: Path, ident: tuple[int, int] | None) -> int:
    """A read-only descriptor of `path`, refused unless it is a regular file (and the one indexed, when `ident`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReadRefused("replaced by a symlink after the bundle was indexed: not followed") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (ident is not None and (st.st_dev, st.st_ino) != ident):
        os.close(fd)
        raise ReadRefused("replaced by another file after the bundle was indexed: not read")
    return fd


class _Bounded(io.RawIOBase):
    """A descriptor read up to `limit` bytes: a file still being appended to ends where it ended when indexed."""

    def __init__(self, fd: int, limit: int):
        self.fd, self.limit, self.pos = fd, limit, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), max(0, self.limit - self.pos))
        if not n:
            return 0
        got = os.readv(self.fd, [memoryview(b)[:n]])
        self.pos += got
        return got

    def readall(self) -> bytes:
        """`read()` of everything left in one system call loop (RawIOBase's default reads 8 KiB at a time)."""
        parts = []
        while self.pos < self.limit and (data := os.read(self.fd, min(self.limit - self.pos, 1 << 30))):
            parts.append(data)
            self.pos += len(data)
        return b"".join(parts)

    def seek(self, off: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.limit}[whence]
        self.pos = os.lseek(self.fd, max(0, base + off), 0)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


class _Capped(io.RawIOBase):
    """A decompressed stream that raises ReadRefused past `cap` bytes (0 = no cap): the ratio budget of a .gz read
    in place, enforced while streaming."""

    def __init__(self, inner, cap: int, rel: str):
        self.inner, self.cap, self.rel, self.pos = inner, cap, rel, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.inner.read(len(b))
        self.pos += len(data)
        if self.cap and self.pos > self.cap:
            b_ = Budget.from_env()
            raise ReadRefused(f"compression ratio budget: more than {_human(self.cap)} decompressed "
                              f"(over {b_.max_ratio}:1), {b_.hint('max_ratio')}")
        b[:len(data)] = data
        return len(data)

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = self.inner.seek(off, whence)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        self.inner.close()
        super().close()


class _NoNul(io.RawIOBase):
    """The stream without its NUL bytes: copytruncate leaves NUL runs where the rotated-away bytes were; the text
    around them is evidence. Not seekable (offsets would not match the file's)."""

    def __init__(self, inner):
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while True:
            data = self.inner.read(len(b))
            if not data:
                return 0
            data = data.replace(b"\x00", b"")
            if data:
                b[:len(data)] = data
                return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


@dataclass
class Skipped:
    rel: str
    reason: str         # one line, e.g. 'binary file (no text)'


class Bundle:
    """Index of the sources of one bundle. Use as a context manager; close() removes `tmpdir`
    (None when nothing had to be extracted). Also removed at garbage collection / exit."""

    def __init__(self, root: str, sources: list[Source], skipped: list[Skipped], notes: list[str],
                 tmpdir: Path | None):
        self.root, self.sources, self.tmpdir = root, sources, tmpdir
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


_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(s: str) -> tuple:
    """'rank_2' < 'rank_10': digit runs compare as numbers, the rest case-insensitively."""
    return ([int(t) if i % 2 else t.lower() for i, t in enumerate(_DIGIT_RUNS.split(s))], s)


def _one_line(s: str) -> str:
    return re.sub(r"[\r\n]+", " ", s)


def _binary_reason(head: bytes) -> str | None:
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16 text (convert it to UTF-8 to scan it)"
    if b"\x00" in head or (head and len(head) - len(head.translate(None, _CTRL)) > len(head) // 10):
        return "binary file (no text)"
    return None


# Program source, not output: a training script quotes the very messages we look for (`raise RuntimeError("NCCL
# error ...")`), so scanning it would cite code as if a rank had printed it. Shell scripts and configs stay: the
# environment and the launch command they set are evidence.
SOURCE_CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh",
                        ".go", ".rs", ".java", ".scala", ".kt", ".js", ".ts", ".rb", ".swift", ".ipynb")


def _source_code_reason(rel: str, kind: str) -> str | None:
    name = rel.rsplit("!", 1)[-1].lower()
    if kind != FR_DUMP and name.endswith(SOURCE_CODE_SUFFIXES):
        return "program source, not a log (its strings would read as log lines)"
    return None


# What tarfile's nti() can read in a header's checksum field (up to its first NUL): octal digits and whatever else
# int(s, 8) takes (whitespace, a sign, underscores, a 0o prefix), or GNU's base-256 marker byte first. A log's bytes
# 148-156 are nearly never that.
_TAR_CHKSUM = re.compile(rb"[\x80\xff]|[0-7_+\-oO\t-\r\x1c-\x1f ]*(?:\x00|$)")


def _looks_tar(block: bytes) -> bool:
    """A valid tar header checksum: detects every tar flavour, with no false positives on logs. The checksum field
    is looked at first, so that a log's head is turned down without building a TarInfo (30-40 µs per file of a
    4,096-file bundle)."""
    if len(block) < 512 or not _TAR_CHKSUM.match(block, 148, 156):
        return False
    try:
        return len(block) >= 512 and bool(tarfile.TarInfo.frombuf(block[:512], "utf-8", "surrogateescape"))
    except tarfile.HeaderError:
        return False


_MAGIC = ((b"\x1f\x8b", "gz"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"),
          (b"PK\x05\x06", "zip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"7z\xbc\xaf\x27\x1c", "7z"), (b"Rar!", "rar"))


def _magic(head: bytes) -> str:
    """The container format from magic bytes, never from the name (names lie, e.g. `.log` tarballs)."""
    return next((k for sig, k in _MAGIC if head.startswith(sig)), "tar" if _looks_tar(head) else "")


_OPENERS: dict[str, Callable[..., BinaryIO]] = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}
_UNREADABLE = (OSError, EOFError, zlib.error, lzma.LZMAError, tarfile.TarError, zipfile.BadZipFile,
               RuntimeError, NotImplementedError, ValueError)


def _unsafe(name: str) -> bool:
    n = name.replace("\\", "/")
    return (not n.strip("/") or "\x00" in n or n.startswith("/") or bool(re.match(r"[A-Za-z]:", n))
            or ".." in n.split("/"))


def _safe_name(rel: str) -> str:
    return re.sub(r"[^\w.-]", "_", re.split(r"[/!]", rel)[-1])[-80:]


def _printable(rel: str) -> str:
    """Display paths go into one-line reports: a newline in a file name must not break them. Bytes that are not
    UTF-8 (os.walk and tarfile hand them over as lone surrogates) become `\\xNN`: `--json` stays valid UTF-8."""
    if rel.isascii():  # nearly every name: no surrogate to escape (a per-character scan cost 2 µs a file)
        return _CONTROL.sub("?", rel) if not rel.isprintable() else rel
    if _SURROGATE.search(rel):
        rel = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    rel = rel.encode("utf-8", "backslashreplace").decode("utf-8")   # any other lone surrogate
    return _CONTROL.sub("?", rel)


_SURROGATE = re.compile("[\udc80-\udcff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _clean(name: str) -> str:
    return _printable("/".join(p for p in name.replace("\\", "/").split("/") if p not in ("", ".")))


def _tar_members(tf: tarfile.TarFile, tmp: str):
    """(name, type, declared size, opener, reason-to-skip) per member; `tarfile.data_filter` vets
    each regular file on top of our own checks (defence in depth; we never call extract())."""
    for m in tf:
        kind = ("dir" if m.isdir() else "symlink" if m.issym() else "hardlink" if m.islnk()
                else "file" if m.isreg() else "special")
        why = None
        if kind == "file" and _DATA_FILTER and not _unsafe(m.name):
            try:
                _DATA_FILTER(m, tmp)
            except tarfile.FilterError as exc:
                why = f"unsafe archive member ({exc})"
        raw = kind == "file" and not m.issparse()
        yield m.name, kind, m.size, (lambda m=m: _TarData(tf.fileobj, m.offset_data, m.size) if raw
                                     else tf.extractfile(m)), why


class _TarData(io.RawIOBase):
    """A regular tar member's bytes straight from the archive stream: where the archive was cut inside them, reads
    end early (tarfile's own reader raises and gives nothing), so what was there is kept and marked partial."""

    def __init__(self, fileobj, offset: int, size: int):
        self.f, self.offset, self.size, self.pos = fileobj, offset, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        self.f.seek(self.offset + self.pos)
        data = self.f.read(n)
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


def _zip_members(zf: zipfile.ZipFile):
    for i in zf.infolist():
        fmt = stat.S_IFMT(i.external_attr >> 16)
        kind = ("dir" if i.is_dir() else "symlink" if fmt == stat.S_IFLNK
                else "file" if fmt in (0, stat.S_IFREG) else "special")
        ratio = i.file_size / max(i.compress_size, 1)
        why = ("encrypted zip member" if i.flag_bits & 0x1 else
               f"suspicious compression ratio ({ratio:.0f}:1)"
               if ratio > RATIO_MAX and i.file_size > RATIO_MIN_SIZE else None)
        yield i.filename, kind, i.file_size, (lambda i=i: zf.open(i)), why


class _Loader:
    """Builds the index. `depth` counts archive levels above a file (0 = file on the user's disk)."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.max_bytes, self.max_members = budget.max_bytes, budget.max_members
        self.sources: list[Source] = []
        self.skipped: list[Skipped] = []
        self.notes: list[str] = []
        self.tmp: Path | None = None
        self.extracted = self.members = self.seq = self.cap_skipped = 0
        self.stop = ""                  # once set, extraction stops everywhere: the Skipped reason
        self.limit = self.budget_text("max_bytes", f"{_human(budget.max_bytes)} total")  # which budget was hit, for the note
        self.unread: list[str] = []     # archives whose remaining members were never read
        self.top_size = self.from_top = 0   # the user's file that extraction comes from: its size, bytes out of it
        self.unchecked = 0              # bytes written since the last statvfs of the temp filesystem
        self.files_over = 0             # files not indexed: the files budget was reached
        self.files_note = ""

    def budget_text(self, name: str, what: str) -> str:
        return f"{what}; {self.budget.hint(name)}"

    def halt(self, name: str, what: str) -> None:
        """A budget stops all extraction from now on; the first one hit is the one named."""
        if not self.stop:
            self.limit = self.budget_text(name, what)
            self.stop = f"extraction cap reached ({self.limit})"

    def skip(self, rel: str, reason: str) -> bool:
        self.skipped.append(Skipped(rel, _one_line(reason)))
        return False                    # "did not become a Source", for one-line returns

    def tmpdir(self) -> Path:
        if self.tmp is None:
            self.tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
            with contextlib.suppress(OSError), open(self.tmp / OWNER_FILE, "x") as fh:
                fh.write(f"{socket.gethostname()} {os.getpid()}\n")
        return self.tmp

    def files_full(self) -> bool:
        """The files budget: past it nothing more is indexed (each file costs the scan about 2 ms)."""
        if len(self.sources) < self.budget.max_files:
            return False
        self.files_over += 1
        if not self.files_note:
            self.files_note = (f"files budget reached: only the first {self.budget.max_files:,} files (in name order) "
                               f"were read; {self.budget.hint('max_files')}")
            self.halt("max_files", f"{self.budget.max_files:,} files")
        return True

    def walk(self, root: Path, prefix: str) -> None:
        """Recursive and sorted; symlinks are never followed (inside ones point at what the walk
        reaches anyway, outside ones are listed as skipped); each inode (hard links) counted once."""
        real_root, seen, links = os.path.realpath(root), set(), []
        under = os.path.join(os.fspath(root), "")  # what os.walk's paths start with

        def relof(path: str) -> str:
            # os.walk joins names onto `root` as given: the path below it is a slice (relpath calls getcwd twice
            # and normalises: 50 µs a file, 0.2 s of opening 4,096 files); anything else goes through relpath
            if os.sep == "/" and path.startswith(under) and "/." not in path[len(under) - 1:]:
                r = _printable(path[len(under):])
            else:
                r = _printable(Path(os.path.relpath(path, root)).as_posix())
            return f"{prefix}/{r}" if prefix and r != "." else (prefix or r)

        def unreadable(exc: OSError) -> None:
            self.skip(relof(exc.filename), f"unreadable directory ({exc.strerror or exc})")

        for d, dirs, files in os.walk(root, onerror=unreadable):
            if self.files_note:         # over the files budget: only count what is left
                self.files_over += len(files)
                dirs[:] = [x for x in dirs if x not in JUNK_DIRS]
                continue
            for name in sorted(dirs + files, key=natural_key):
                path, rel = os.path.join(d, name), relof(os.path.join(d, name))
                try:
                    st = os.lstat(path)
                    if stat.S_ISLNK(st.st_mode):
                        links.append((path, rel))
                    elif name == CASE_LABEL:
                        # A case folder (cases/, eval) holds its answer beside the logs: never scan the answer.
                        self.skip(rel, "case label file (truth.yaml), not a log")
                    elif stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                        seen.add((st.st_dev, st.st_ino))
                        if not self.files_full():
                            self.add_file(Path(path), rel, 0, (st.st_dev, st.st_ino), st.st_size)
                    elif not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
                        self.skip(rel, "not a regular file (device, fifo or socket)")
                except OSError as exc:
                    self.skip(rel, read_error_reason(exc))
            dirs[:] = sorted((x for x in dirs if x not in JUNK_DIRS), key=natural_key)
        for path, rel in links:
            target = os.path.realpath(path)
            try:
                inside = os.path.commonpath([real_root, target]) == real_root
                st = os.stat(target)
            except (OSError, ValueError):
                self.skip(rel, "broken symlink")
                continue
            if not inside:
                self.skip(rel, "symlink pointing outside the bundle")
            elif stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))    # e.g. a link into a skipped .git dir
                if not self.files_full():
                    self.add_file(Path(target), rel, 0, (st.st_dev, st.st_ino), st.st_size)

    def add_file(self, path: Path, rel: str, depth: int, ident: tuple[int, int] | None = None,
                 size: int | None = None) -> bool:
        """Index `path` (a text source, or an archive to open). True if it became a Source. `ident`: the
        (device, inode) the walk saw; the file opened must be that one, and never through a link. `size`: its size
        as the walk's stat saw it (not stat'ed again)."""
        try:
            if depth == 0:
                self.top_size, self.from_top = max(1, size if size is not None else path.stat().st_size), 0
            return self._add_file(path, rel, depth, ident)
        except ReadRefused as exc:
            return self.skip(rel, exc.reason)
        except Exception as exc:  # noqa: BLE001 - last line of defence: one bad file, never a traceback
            return self.skip(rel, read_error_reason(exc))

    def _add_file(self, path: Path, rel: str, depth: int, ident: tuple[int, int] | None) -> bool:
        fd = _open_nofollow(path, ident)
        st = os.fstat(fd)
        ident, size = (st.st_dev, st.st_ino), st.st_size
        with io.BufferedReader(_Bounded(fd, size)) as f:
            head = f.read(HEAD_BYTES)
            nul = b"\x00" in head and not _magic(head) and not head.startswith((b"\xff\xfe", b"\xfe\xff"))
            nul = nul and b"\x00" not in _NUL_RUN.sub(b"", head)    # runs only: scattered NULs mean binary
            if nul and not head.strip(b"\x00"):
                head = _after_nul_run(f, fd, size)
                if head is None:
                    return self.skip(rel, "only NUL bytes (an emptied log file)")
        kind = _magic(head)

        def reopen() -> BinaryIO:   # the same file again, never by its name alone (it may be swapped meanwhile)
            return io.BufferedReader(_Bounded(_open_nofollow(path, ident), size))

        if kind in _OPENERS:
            try:
                with _OPENERS[kind](reopen(), "rb") as f:
                    head = f.read(HEAD_BYTES)
            except _UNREADABLE as exc:
                name = "gzip" if kind == "gz" else kind
                return self.skip(rel, f"truncated {name}" if isinstance(exc, EOFError) else f"corrupt {name} ({exc})")
            if _looks_tar(head):
                return self.open_archive(reopen, rel, depth, "tar", compressed=True)
            inner_binary = None if kind == "gz" or _magic(head) else (
                "only NUL bytes" if head and not head.strip(b"\x00") else _binary_reason(_NUL_RUN.sub(b"", head)))
            if inner_binary:    # e.g. a bz2 bomb of zeros: nothing to read, so nothing to extract
                return self.skip(rel, f"{inner_binary} inside {kind}")
            if kind != "gz" or _magic(head):    # .bz2/.xz, or .zip.gz & co: index a capped copy
                dest, partial = self.copy_out(rel, lambda: _OPENERS[kind](reopen(), "rb"), 0)
                return bool(dest) and self.keep(dest, self.add_file(dest, rel, depth + 1)) and self.mark(partial)
        elif kind in ("tar", "zip"):
            return self.open_archive(reopen, rel, depth, kind)
        elif kind:
            return self.skip(rel, f"unsupported compression or archive ({kind})")
        src_kind = sniff(rel, head)
        nul = nul or (kind == "gz" and b"\x00" in head)
        why = None if src_kind == FR_DUMP else (_binary_reason(head.replace(b"\x00", b"") if nul else head)
                                                 or _source_code_reason(rel, src_kind))
        if why:
            return self.skip(rel, why)
        src = Source(rel, path, src_kind, size, gzip=kind == "gz", ident=ident, nul=nul and src_kind != FR_DUMP)
        if kind == "gz":
            src.max_out = max(self.budget.ratio_min_bytes, self.budget.max_ratio * size)
            if size <= GZIP_VERIFY_BYTES:
                try:                    # cheap enough to catch a truncated upload or a bomb now, not mid-scan
                    with src.open() as f:
                        while f.read(_CHUNK):
                            pass
                except ReadRefused as exc:
                    return self.skip(rel, exc.reason)
                except READ_ERRORS as exc:      # read to the break by every reader: kept, marked partial
                    src.partial = f"{read_error_reason(exc)}: partial, read up to the break"
        self.sources.append(src)
        return True

    def keep(self, dest: Path, is_source: bool) -> bool:
        """Drop a temp copy nobody reads (archive already expanded, or skipped): saves disk."""
        if not is_source:
            dest.unlink(missing_ok=True)
        return is_source

    def mark(self, partial: str) -> bool:
        """The source just added was copied out only up to a break: say so on it."""
        if partial:
            self.sources[-1].partial = partial
        return True

    def open_archive(self, reopen: Callable[[], BinaryIO], rel: str, depth: int, fmt: str,
                     compressed: bool = False) -> bool:
        if depth >= self.budget.max_depth:
            return self.skip(rel, f"nested archive too deep (more than {self.budget.max_depth} levels; "
                                  f"{self.budget.hint('max_depth')})")
        fobj = reopen()
        try:
            arc = tarfile.open(fileobj=fobj, mode="r:*") if fmt == "tar" else zipfile.ZipFile(fobj)
        except _UNREADABLE as exc:
            fobj.close()
            return self.skip(rel, f"corrupt archive ({exc})")
        last = ""
        with fobj, arc:
            members = _tar_members(arc, str(self.tmpdir())) if fmt == "tar" else _zip_members(arc)
            try:
                for name, kind, size, opener, why in members:
                    got = self.member(rel, depth, name, kind, size, opener, why)
                    last = name
                    # A tar is a stream: skipping on means reading (decompressing) what is skipped.
                    if fmt == "tar" and (self.stop or (got == "cap" and compressed)):
                        self.unread.append(rel)
                        self.skip(f"{rel}!*", f"{self.stop or 'extraction cap reached (' + self.limit + ')'}: "
                                              "remaining members not read")
                        break
                else:
                    if fmt == "tar":
                        self.tar_end(arc, rel, last)
            except _UNREADABLE as exc:
                where = f" after member {_clean(last)}" if last else ""
                self.skip(f"{rel}!*", f"truncated or corrupt archive{where} ({exc}); earlier members kept")
        return False

    def tar_end(self, tf: tarfile.TarFile, rel: str, last: str) -> None:
        """tarfile ends quietly at a header it cannot read (cut inside it, or garbage): say where, if anything but
        end-of-archive zeros follows."""
        try:
            tf.fileobj.seek(tf.offset)
            rest = tf.fileobj.read(1 << 16)
        except _UNREADABLE as exc:
            rest, why = b"?", f"({read_error_reason(exc)})"
        else:
            why = "(cut inside a header)" if 0 < len(rest.rstrip(b"\x00")) and len(rest) < 512 else "(not a tar header)"
        if rest.strip(b"\x00"):
            where = f"after member {_clean(last)}" if last else "at its first member"
            self.skip(f"{rel}!*", f"tar stops at byte {tf.offset:,} {where} {why}: later members (if any) lost; "
                                  "earlier members kept")

    def member(self, arch: str, depth: int, name: str, kind: str, declared: int,
               opener: Callable[[], BinaryIO | None], why: str | None) -> str:
        """Vet, copy out and index one archive member. Returns 'ok', 'skip' or 'cap'."""
        self.members += 1
        mrel = f"{arch}!{_clean(name) or _printable(name)}"
        if _unsafe(name):
            why = f"unsafe archive member path {_printable(name)}"
        elif kind == "dir" or JUNK_DIRS.intersection(_clean(name).split("/")):
            return "skip"
        elif kind != "file":
            why = f"{kind} member (not extracted)" if "link" in kind else "device or fifo member (not extracted)"
        if why:
            self.skip(mrel, why)
            return "skip"
        if self.members > self.max_members:
            self.halt("max_members", f"{self.max_members} members")
        if self.files_full():
            self.halt("max_files", f"{self.budget.max_files:,} files")
        before = self.cap_skipped
        dest, partial = self.copy_out(mrel, opener, declared)
        if dest is None:
            return "cap" if self.cap_skipped > before else "skip"
        if self.keep(dest, self.add_file(dest, mrel, depth + 1)):
            self.mark(partial)
        return "ok"

    def cap_skip(self, rel: str, reason: str) -> None:
        self.cap_skipped += 1
        if self.cap_skipped <= SKIP_LIST_MAX:
            self.skip(rel, reason)

    def over_budget(self, written: int) -> str:
        """The budget that writing `written` more bytes of this member breaks ('' = none): total bytes, the ratio
        against the user's file it comes from, free space on the temp filesystem."""
        total, from_top = self.extracted + written, self.from_top + written
        if total > self.max_bytes:
            self.halt("max_bytes", f"{_human(self.max_bytes)} total")
        elif from_top > self.budget.ratio_min_bytes and from_top > self.budget.max_ratio * self.top_size:
            self.halt("max_ratio", f"compression ratio over {self.budget.max_ratio}:1 "
                                   f"({_human(from_top)} out of {_human(self.top_size)})")
        elif self.unchecked + written >= FREE_CHECK_EVERY:
            self.unchecked = -written
            try:
                sv = os.statvfs(self.tmpdir())
                free = sv.f_bavail * sv.f_frsize
            except OSError:
                free = self.budget.min_free
            if free < self.budget.min_free:
                self.halt("min_free", f"temp filesystem nearly full ({_human(free)} free)")
        return self.stop

    def copy_out(self, rel: str, opener: Callable[[], BinaryIO | None], declared: int) -> tuple[Path | None, str]:
        """Stream one member into the temp dir under a name of our own, counting the bytes really
        written against the budgets (a declared size is only a hint). Returns (copy, why partial)."""
        budget = self.max_bytes - self.extracted
        if not self.stop and declared > budget:
            self.limit = self.budget_text("max_bytes", f"{_human(self.max_bytes)} total")
            self.cap_skip(rel, f"extraction cap reached ({self.limit}): member is {_human(declared)}")
            return None, ""
        if self.stop:   # a too-big member is skipped above; smaller ones may still fit
            self.cap_skip(rel, self.stop)
            return None, ""
        self.seq += 1
        dest = self.tmpdir() / f"{self.seq:06d}-{_safe_name(rel)}"
        written = 0
        try:
            with opener() as src, open(dest, "xb") as out:
                while chunk := src.read(_CHUNK):
                    if self.over_budget(written + len(chunk)):
                        break
                    written += out.write(chunk)
            if not chunk:
                cut = f"archive cut inside this member: partial, read up to byte {written:,} of {declared:,}"
                return dest, cut if written < declared else ""
            self.cap_skip(rel, f"{self.stop}: member larger than declared" if "total" in self.limit else self.stop)
        except _UNREADABLE as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                self.halt("min_free", "a full temp dir (no space left)")
                self.cap_skip(rel, self.stop)
            elif written:       # a member cut short: keep what was there
                return dest, f"{read_error_reason(exc)}: partial, read up to byte {written:,}"
            else:
                self.skip(rel, f"corrupt archive member ({exc})")
        finally:
            self.extracted += written
            self.from_top += written
            self.unchecked += written
        dest.unlink(missing_ok=True)
        return None, ""

    def finish(self) -> None:
        if self.cap_skipped:
            more = f" (first {SKIP_LIST_MAX} listed)" if self.cap_skipped > SKIP_LIST_MAX else ""
            note = f"extraction stopped at {self.limit}: {self.cap_skipped} members not extracted{more}"
            if self.unread:
                note += f"; rest of {', '.join(dict.fromkeys(self.unread))} not read"
            self.notes.append(note)
        if self.files_note:
            self.notes.append(f"{self.files_note} ({self.files_over:,} more not read)")
        count: dict[str, int] = {}
        for src in self.sources:    # tar allows a name twice; rel must stay a unique key
            count[src.rel] = count.get(src.rel, 0) + 1
            src.rel += f"~{count[src.rel]}" if count[src.rel] > 1 else ""
        self.sources.sort(key=lambda s: natural_key(s.rel))


def _after_nul_run(f: BinaryIO, fd: int, size: int) -> bytes | None:
    """The head of the text after a leading NUL run (copytruncate of a log being written: the writer's offset is
    kept, the bytes before it read as NUL, often a sparse hole). None when only NULs within NUL_SEEK_MAX."""
    with contextlib.suppress(OSError, AttributeError):
        f.seek(os.lseek(fd, 0, os.SEEK_DATA))   # skip a hole without reading it
    seen = 0
    while seen < NUL_SEEK_MAX and (block := f.read(_CHUNK)):
        seen += len(block)
        if text := block.replace(b"\x00", b""):
            return (text + f.read(HEAD_BYTES).replace(b"\x00", b""))[:HEAD_BYTES]
    return None


def _summary(root: str, loader: _Loader) -> str:
    if not loader.sources and not loader.skipped:
        return f"no files found in {root}"
    counts: dict[str, int] = {}
    for s in loader.skipped:
        short = re.split(r" \(|: ", s.reason, maxsplit=1)[0].replace("binary file", "binary")
        counts[short] = counts.get(short, 0) + 1
    empty = len(loader.sources)
    parts = [f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    parts += [f"{empty} empty"] if empty else []
    return f"no readable log files in {root} ({len(loader.skipped) + empty} skipped: {', '.join(parts)})"


def clean_stale_tmpdirs(parent: str | None = None) -> list[str]:
    """Remove the temp dirs of runs that were killed (SIGKILL, OOM, power): named `trainlog-bundle-<pid>-*`,
    owned by us, with an `.owner` marker of this host whose pid is no longer alive. Anything else is left alone:
    a dir of another user, another host or container sharing /tmp (its pids are not ours to judge), a live run.
    Returns the dirs removed."""
    parent = parent or tempfile.gettempdir()
    host, removed = socket.gethostname(), []
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
    return Bundle(root, loader.sources, loader.skipped, loader.notes, loader.tmp)
