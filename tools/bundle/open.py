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
"""
from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import weakref
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

from trainlog_debugger.tools.sources.detect import FR_DUMP, HEAD_BYTES, sniff

GZIP_VERIFY_BYTES = 64 << 20    # .gz files up to this (compressed) size are fully test-read at open
MAX_NESTING = 3                 # archive in archive in archive; a 4th level is skipped
SKIP_LIST_MAX = 1000            # cap-skipped members listed one by one; the rest only counted
RATIO_MAX, RATIO_MIN_SIZE = 1000, 16 << 20   # zip member > 16 MiB at > 1000:1 is a bomb, not a log
CASE_LABEL = "truth.yaml"
JUNK_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "__MACOSX"})
_CHUNK = 1 << 20
_CTRL = bytes(set(range(32)) - set(b"\t\n\r\f\v\b\x1b")) + b"\x7f"
_DATA_FILTER = getattr(tarfile, "data_filter", None)

#: What a reader of `Source.open()` must catch: a .gz can be truncated or corrupt past the part
#: checked at open time (files > GZIP_VERIFY_BYTES), and files can vanish. gzip.BadGzipFile is an
#: OSError. On any of these, skip the rest of the source with `read_error_reason(exc)`.
READ_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, OSError)


def read_error_reason(exc: BaseException) -> str:
    """One-line Skipped reason for an exception in READ_ERRORS (or any other)."""
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
    size: int           # bytes on disk of `path` (compressed size when gzip)
    gzip: bool = False  # `path` is gzip-compressed: open() decompresses

    def open(self) -> BinaryIO:
        """Binary stream of the (decompressed) content, opened read-only. Reads may raise
        READ_ERRORS (e.g. EOFError on a truncated .gz); see read_error_reason()."""
        return gzip.open(self.path, "rb") if self.gzip else open(self.path, "rb")


@dataclass
class Skipped:
    rel: str
    reason: str         # one line, e.g. 'binary file (no text)'


class Bundle:
    """Index of the sources of one bundle. Use as a context manager; close() removes `tmpdir`
    (None when nothing had to be extracted). Also removed at garbage collection / exit."""

    def __init__(self, root: str, sources: list[Source], skipped: list[Skipped], notes: list[str],
                 tmpdir: Path | None):
        self.root, self.sources, self.skipped, self.notes, self.tmpdir = (
            root, sources, skipped, notes, tmpdir)
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(tmpdir), True) if tmpdir else None

    def close(self) -> None:
        if self._cleanup:
            self._cleanup()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def natural_key(s: str) -> tuple:
    """'rank_2' < 'rank_10': digit runs compare as numbers, the rest case-insensitively."""
    return ([int(t) if i % 2 else t.lower() for i, t in enumerate(re.split(r"(\d+)", s))], s)


def _human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


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


def _looks_tar(block: bytes) -> bool:
    """A valid tar header checksum: detects every tar flavour, with no false positives on logs."""
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
    """Display paths go into one-line reports: a newline in a file name must not break them."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", rel)


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
        yield m.name, kind, m.size, (lambda m=m: tf.extractfile(m)), why


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

    def __init__(self, max_bytes: int, max_members: int):
        self.max_bytes, self.max_members = max_bytes, max_members
        self.sources: list[Source] = []
        self.skipped: list[Skipped] = []
        self.notes: list[str] = []
        self.tmp: Path | None = None
        self.extracted = self.members = self.seq = self.cap_skipped = 0
        self.stop = ""                  # once set, extraction stops everywhere: the Skipped reason
        self.limit = _human(max_bytes)  # which limit was hit, for the note
        self.unread: list[str] = []     # archives whose remaining members were never read

    def skip(self, rel: str, reason: str) -> bool:
        self.skipped.append(Skipped(rel, _one_line(reason)))
        return False                    # "did not become a Source", for one-line returns

    def tmpdir(self) -> Path:
        if self.tmp is None:
            self.tmp = Path(tempfile.mkdtemp(prefix="trainlog-bundle-"))
        return self.tmp

    def walk(self, root: Path, prefix: str) -> None:
        """Recursive and sorted; symlinks are never followed (inside ones point at what the walk
        reaches anyway, outside ones are listed as skipped); each inode (hard links) counted once."""
        real_root, seen, links = os.path.realpath(root), set(), []

        def relof(path: str) -> str:
            r = _printable(Path(os.path.relpath(path, root)).as_posix())
            return f"{prefix}/{r}" if prefix and r != "." else (prefix or r)

        def unreadable(exc: OSError) -> None:
            self.skip(relof(exc.filename), f"unreadable directory ({exc.strerror or exc})")

        for d, dirs, files in os.walk(root, onerror=unreadable):
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
                        self.add_file(Path(path), rel, 0)
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
                self.add_file(Path(target), rel, 0)

    def add_file(self, path: Path, rel: str, depth: int) -> bool:
        """Index `path` (a text source, or an archive to open). True if it became a Source."""
        try:
            return self._add_file(path, rel, depth)
        except Exception as exc:  # noqa: BLE001 - last line of defence: one bad file, never a traceback
            return self.skip(rel, read_error_reason(exc))

    def _add_file(self, path: Path, rel: str, depth: int) -> bool:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
        kind = _magic(head)
        if kind in _OPENERS:
            try:
                with _OPENERS[kind](path, "rb") as f:
                    head = f.read(HEAD_BYTES)
            except _UNREADABLE as exc:
                name = "gzip" if kind == "gz" else kind
                return self.skip(rel, f"truncated {name}" if isinstance(exc, EOFError) else f"corrupt {name} ({exc})")
            if _looks_tar(head):
                return self.open_archive(path, rel, depth, "tar", compressed=True)
            if kind != "gz" or _magic(head):    # .bz2/.xz, or .zip.gz & co: index a capped copy
                dest = self.copy_out(rel, lambda: _OPENERS[kind](path, "rb"), 0)
                return bool(dest) and self.keep(dest, self.add_file(dest, rel, depth + 1))
        elif kind in ("tar", "zip"):
            return self.open_archive(path, rel, depth, kind)
        elif kind:
            return self.skip(rel, f"unsupported compression or archive ({kind})")
        src_kind = sniff(rel, head)
        why = None if src_kind == FR_DUMP else (_binary_reason(head) or _source_code_reason(rel, src_kind))
        if why:
            return self.skip(rel, why)
        if kind == "gz" and size <= GZIP_VERIFY_BYTES:
            try:                    # cheap enough to catch a truncated upload now, not mid-scan
                with gzip.open(path, "rb") as f:
                    while f.read(_CHUNK):
                        pass
            except READ_ERRORS as exc:
                return self.skip(rel, read_error_reason(exc))
        self.sources.append(Source(rel, path, src_kind, size, gzip=kind == "gz"))
        return True

    def keep(self, dest: Path, is_source: bool) -> bool:
        """Drop a temp copy nobody reads (archive already expanded, or skipped): saves disk."""
        if not is_source:
            dest.unlink(missing_ok=True)
        return is_source

    def open_archive(self, path: Path, rel: str, depth: int, fmt: str, compressed: bool = False) -> bool:
        if depth >= MAX_NESTING:
            return self.skip(rel, f"nested archive too deep (more than {MAX_NESTING} levels)")
        try:
            arc = tarfile.open(path, "r:*") if fmt == "tar" else zipfile.ZipFile(path)
        except _UNREADABLE as exc:
            return self.skip(rel, f"corrupt archive ({exc})")
        with arc:
            members = _tar_members(arc, str(self.tmpdir())) if fmt == "tar" else _zip_members(arc)
            try:
                for name, kind, size, opener, why in members:
                    got = self.member(rel, depth, name, kind, size, opener, why)
                    # A tar is a stream: skipping on means reading (decompressing) what is skipped.
                    if fmt == "tar" and (self.stop or (got == "cap" and compressed)):
                        self.unread.append(rel)
                        self.skip(f"{rel}!*", f"extraction cap reached ({self.limit}): remaining members not read")
                        break
            except _UNREADABLE as exc:
                self.skip(f"{rel}!*", f"truncated or corrupt archive ({exc})")
        return False

    def member(self, arch: str, depth: int, name: str, kind: str, declared: int,
               opener: Callable[[], BinaryIO | None], why: str | None) -> str:
        """Vet, copy out and index one archive member. Returns 'ok', 'skip' or 'cap'."""
        self.members += 1
        mrel = f"{arch}!{_clean(name) or _printable(name)}"
        if _unsafe(name):
            why = f"unsafe archive member path {name}"
        elif kind == "dir" or JUNK_DIRS.intersection(_clean(name).split("/")):
            return "skip"
        elif kind != "file":
            why = f"{kind} member (not extracted)" if "link" in kind else "device or fifo member (not extracted)"
        if why:
            self.skip(mrel, why)
            return "skip"
        if self.members > self.max_members and not self.stop:
            self.limit = f"{self.max_members} members"
            self.stop = f"extraction cap reached ({self.limit})"
        before = self.cap_skipped
        dest = self.copy_out(mrel, opener, declared)
        if dest is None:
            return "cap" if self.cap_skipped > before else "skip"
        self.keep(dest, self.add_file(dest, mrel, depth + 1))
        return "ok"

    def cap_skip(self, rel: str, reason: str) -> None:
        self.cap_skipped += 1
        if self.cap_skipped <= SKIP_LIST_MAX:
            self.skip(rel, reason)

    def copy_out(self, rel: str, opener: Callable[[], BinaryIO | None], declared: int) -> Path | None:
        """Stream one member into the temp dir under a name of our own, counting the bytes really
        written against the cap (a declared size is only a hint)."""
        budget = self.max_bytes - self.extracted
        if self.stop or declared > budget:  # a too-big member is skipped; smaller ones may still fit
            self.cap_skip(rel, self.stop or f"extraction cap reached ({self.limit}): member is {_human(declared)}")
            return None
        self.seq += 1
        dest = self.tmpdir() / f"{self.seq:06d}-{_safe_name(rel)}"
        written = 0
        try:
            with opener() as src, open(dest, "xb") as out:
                while (chunk := src.read(min(_CHUNK, budget - written + 1))) and written + len(chunk) <= budget:
                    written += out.write(chunk)
            if not chunk:
                return dest
            self.stop = f"extraction cap reached ({self.limit})"   # more bytes than declared: stop all
            self.cap_skip(rel, f"{self.stop}: member larger than declared")
        except _UNREADABLE as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                self.limit, self.stop = "a full temp dir", "temp dir full (no space left)"
                self.cap_skip(rel, self.stop)
            else:
                self.skip(rel, f"corrupt archive member ({exc})")
        finally:
            self.extracted += written
        dest.unlink(missing_ok=True)
        return None

    def finish(self) -> None:
        if self.cap_skipped:
            more = f" (first {SKIP_LIST_MAX} listed)" if self.cap_skipped > SKIP_LIST_MAX else ""
            note = f"extraction stopped at {self.limit}: {self.cap_skipped} members not extracted{more}"
            if self.unread:
                note += f"; rest of {', '.join(dict.fromkeys(self.unread))} not read"
            self.notes.append(note)
        count: dict[str, int] = {}
        for src in self.sources:    # tar allows a name twice; rel must stay a unique key
            count[src.rel] = count.get(src.rel, 0) + 1
            src.rel += f"~{count[src.rel]}" if count[src.rel] > 1 else ""
        self.sources.sort(key=lambda s: natural_key(s.rel))


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


def open_bundle(paths: str | Path | Sequence[str | Path], *, max_extract_bytes: int = 8 << 30,
                max_members: int = 200_000) -> Bundle:
    """Index `paths` (one or several files/dirs/archives). Raises BundleError (one line) when a
    path is missing or nothing readable is found; everything else becomes `skipped`/`notes`."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise BundleError("no input given")
    root = _one_line(", ".join(str(p) for p in items))
    for p in items:
        if not isinstance(p, (str, os.PathLike)) or "\x00" in str(p) or not os.path.exists(p):
            raise BundleError(_one_line(f"no such file or directory: {p}"))
        if not (os.path.isdir(p) or os.path.isfile(p)):
            raise BundleError(_one_line(f"not a regular file or directory: {p}"))
    loader = _Loader(max_extract_bytes, max_members)
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
