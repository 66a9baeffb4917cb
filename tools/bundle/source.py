"""One indexed file of a bundle and how it is read: `Source.open()` streams it read-only, never through a link, never
past the size seen when it was indexed, decompressing a .gz under its ratio budget and dropping copytruncate's NUL
runs; every reader catches READ_ERRORS and says why with `read_error_reason`. A file that could not be indexed at
all is a `Skipped` with its one-line reason.

Why apart from open.py: the readers (scan, the structured readers, the re-reader) need only this half; open.py walks
folders and archives to build the index.
"""
from __future__ import annotations

import errno
import io
import gzip
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from trainlog_debugger.tools.bundle.budget import Budget, human as _human


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
    within: str = ""    # the real path of the walked directory it was found in: open() refuses a file outside it
    utf16: str = ""     # 'utf-16', 'utf-16-le', 'utf-16-be': the file is UTF-16 text, open() gives it as UTF-8
    notebook: bool = False  # a Jupyter notebook: open() gives its outputs' lines, line for line (tools.bundle.notebook)
    json_lines: bool = False  # JSON lines: open() gives them with their strings' escapes decoded (tools.bundle.notebook)

    def open(self) -> BinaryIO:
        """Binary stream of the (decompressed) content, opened read-only, never through a link, at most `size`
        bytes of the file. Reads may raise READ_ERRORS (EOFError on a truncated .gz, ReadRefused); see
        read_error_reason()."""
        raw: io.RawIOBase = _Bounded(_open_nofollow(self.path, self.ident, self.within), self.size)
        if self.gzip:
            raw = _Capped(gzip.GzipFile(fileobj=io.BufferedReader(raw), mode="rb"), self.max_out, self.rel)
            if not self.nul:
                return cast(BinaryIO, raw)  # its own read(): a break gives the bytes before it, then the error
        if self.nul:
            raw = _NoNul(raw)
        if self.utf16:
            raw = _Utf8Of(raw, self.utf16)
        if self.notebook:
            raw = _NotebookOutputs(raw)
        elif self.json_lines:
            raw = _JsonLinesText(raw)
        return io.BufferedReader(raw, 1 << 16)


def _open_nofollow(path: Path, ident: tuple[int, int] | None, within: str = "") -> int:
    """A read-only descriptor of `path`, refused unless it is a regular file (and the one indexed, when `ident`) and,
    when `within` is given, unless the file it opened lies under that directory. O_NOFOLLOW guards the last
    component only: a DIRECTORY swapped for a symlink after the walk decided to descend led the tool to read and
    report files outside the bundle (issue 30). The check reads where the opened descriptor really is
    (/proc/self/fd), so no swap between the check and the read can fool it."""
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
    if within and not _opened_within(fd, path, within):
        os.close(fd)
        raise ReadRefused("reached through a directory replaced by a symlink: outside the bundle, not read")
    return fd


def _opened_within(fd: int, path: Path, within: str) -> bool:
    """Whether the file open on `fd` lies under `within` (a real path): by the descriptor where the system says
    (Linux /proc), else by the real path of `path` now."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
    return real == within or real.startswith(within.rstrip(os.sep) + os.sep)


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

    PIECE = 1 << 18  # read from the gzip stream at most this much at a time: what a cut stream loses

    def __init__(self, inner, cap: int, rel: str):
        self.inner, self.cap, self.rel, self.pos = inner, cap, rel, 0
        self.cut: BaseException | None = None
        # read1: one decompression step a call (GzipFile.read loops over them in a BufferedReader, which drops what
        # it had when a later step raises)
        self._read = getattr(inner, "read1", inner.read)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        """Up to `n` decompressed bytes (all, when n < 0), read from the gzip stream in pieces. A truncated or
        corrupt stream first gives what it held (the read that hits the break returns the bytes before it), then
        raises on the next read: one big read that raised took the data decompressed before the break with it,
        and a cut .gz read 0 lines and still said "partial" (issue 30). No BufferedReader goes on top: its own
        loop of raw reads would drop a short read the same way."""
        if self.cut is not None:
            raise self.cut
        want = n if n is not None and n >= 0 else 1 << 62
        out = bytearray()
        while len(out) < want:
            try:
                data = self._read(min(want - len(out), self.PIECE))
            except (EOFError, OSError, zlib.error) as exc:
                if not out:
                    self.cut = exc
                    raise
                self.cut = exc
                break
            if not data:
                break
            out += data
            self.pos += len(data)
            if self.cap and self.pos > self.cap:
                b_ = Budget.from_env()
                raise ReadRefused(f"compression ratio budget: more than {_human(self.cap)} decompressed "
                                  f"(over {b_.max_ratio}:1), {b_.hint('max_ratio')}")
        return bytes(out)

    def readinto(self, b) -> int:
        data = self.read(len(b))
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


class _Converted(io.RawIOBase):
    """The inner stream's bytes converted piece by piece (`_convert`; b"" = the inner stream ended). A conversion may
    give more or fewer bytes than it took, so its output is carried between reads, never assumed to fit the
    caller's buffer. Not seekable (offsets would not match the file's)."""

    def __init__(self, inner):
        self.inner, self.out = inner, b""

    def readable(self) -> bool:
        return True

    def _convert(self, data: bytes) -> bytes:
        raise NotImplementedError

    def readinto(self, b) -> int:
        while not self.out:
            data = self.inner.read(max(len(b), 1 << 16))
            self.out = self._convert(data)
            if not data:
                break
        n = min(len(b), len(self.out))
        b[:n], self.out = self.out[:n], self.out[n:]
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


class _Utf8Of(_Converted):
    """A UTF-16 stream read as UTF-8 (line numbers and text as the file has them): decoded incrementally, a
    character cut between two reads kept for the next, undecodable bytes replaced."""

    def __init__(self, inner, codec: str):
        import codecs
        super().__init__(inner)
        self.dec = codecs.getincrementaldecoder(codec)(errors="replace")

    def _convert(self, data: bytes) -> bytes:
        return self.dec.decode(data, final=not data).encode("utf-8")


class _NotebookOutputs(_Converted):
    """A notebook's JSON read as its outputs' lines, one line out for each line in (tools.bundle.notebook): a line
    cut between two reads is held until its end comes; one longer than notebook.LINE_MAX is dropped as it comes."""

    def __init__(self, inner):
        from trainlog_debugger.tools.bundle.notebook import NotebookLines
        super().__init__(inner)
        self.lines, self.held, self.dropping = NotebookLines(), b"", False

    def _convert(self, data: bytes) -> bytes:
        from trainlog_debugger.tools.bundle.notebook import LINE_MAX
        if not data:
            held, self.held = self.held, b""
            return b"" if not held or self.dropping else self.lines.line(held)
        parts = (self.held + data).split(b"\n")
        self.held = parts.pop()
        out = []
        for i, raw in enumerate(parts):
            if i == 0 and self.dropping:  # the rest of a line too long to hold: its end, now
                self.dropping = False
                out.append(b"")
                continue
            out.append(self.lines.line(raw.rstrip(b"\r")))
        if len(self.held) > LINE_MAX:
            self.held, self.dropping = b"", True
        return b"\n".join(out) + b"\n" if out else b""


class _JsonLinesText(_Converted):
    """JSON lines with their strings' escapes decoded, whole lines at a time (an escape is never cut between two
    reads); a line longer than notebook.LINE_MAX is passed on as it is, not held."""

    def __init__(self, inner):
        super().__init__(inner)
        self.held = b""

    def _convert(self, data: bytes) -> bytes:
        from trainlog_debugger.tools.bundle.notebook import LINE_MAX, unescape_json_strings
        if not data:
            held, self.held = self.held, b""
            return unescape_json_strings(held)
        data = self.held + data
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) <= LINE_MAX:
            self.held = data
            return b""
        if not cut:
            self.held = b""
            return data
        self.held = data[cut:]
        return unescape_json_strings(data[:cut])


_NULS = re.compile(rb"\x00{16,}")


class _NoNul(_Converted):
    """The stream without its NUL runs: copytruncate leaves them where the rotated-away bytes were; the text around
    them is evidence. A lone NUL inside text is shown as ␀ (three bytes for one). NULs at the end of a read are held
    back until the next one shows whether they are a run."""

    def __init__(self, inner):
        super().__init__(inner)
        self.held = b""

    @staticmethod
    def _shown(data: bytes) -> bytes:
        # runs (copytruncate) go; a stray NUL inside text is shown (issue 30: read, with the NUL shown)
        return _NULS.sub(b"", data).replace(b"\x00", "␀".encode())

    def _convert(self, data: bytes) -> bytes:
        if not data:
            held, self.held = self.held, b""
            return self._shown(held)
        data = self.held + data
        body = data.rstrip(b"\x00")
        self.held = data[len(body):][:16]  # a run of 16 stays a run; more adds nothing
        return self._shown(body)


@dataclass
class Skipped:
    rel: str
    reason: str         # one line, e.g. 'binary file (no text)'


_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(s: str) -> tuple:
    """'rank_2' < 'rank_10': digit runs compare as numbers, the rest case-insensitively."""
    return ([int(t) if i % 2 else t.lower() for i, t in enumerate(_DIGIT_RUNS.split(s))], s)
