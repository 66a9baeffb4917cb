"""The walk that builds a bundle's index (`_Loader`): folders, plain and compressed files, archives inside archives,
each file vetted (binary, source code, NUL runs), sniffed (tools/sources/detect.py) and counted against the budgets
(tools/bundle/budget.py) as it is streamed. open.py's docstring says why each rule exists.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import socket
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable

from trainlog_debugger.tools.bundle.budget import Budget, human as _human
from trainlog_debugger.tools.bundle.notebook import NotebookLines, looks_like_json_lines, looks_like_notebook
from trainlog_debugger.tools.sources.detect import GENERIC, HEAD_BYTES, sniff
from trainlog_debugger.tools.sources.flight_recorder.format import FR_DUMP
from trainlog_debugger.tools.bundle.archives import (_OPENERS, _UNREADABLE, _clean, _looks_tar, _magic, _printable,
                                                     _safe_name, _tar_members, _unsafe, _zip_members)
from trainlog_debugger.tools.bundle.source import (READ_ERRORS, ReadRefused, Skipped, Source, _Bounded, _open_nofollow,
                                                   natural_key, read_error_reason)

GZIP_VERIFY_BYTES = 64 << 20    # .gz files up to this (compressed) size are fully test-read at open
SKIP_LIST_MAX = 1000            # cap-skipped members listed one by one; the rest only counted
NUL_SEEK_MAX = 256 << 20        # how far past a NUL run (copytruncate) we look for the text; beyond: skipped
FREE_CHECK_EVERY = 64 << 20     # statvfs of the temp filesystem after this many bytes written
TMP_PREFIX = "trainlog-bundle-"
_NUL_RUN = re.compile(rb"\x00{16,}")   # copytruncate leaves runs (the bytes before the writer's offset)
OWNER_FILE = ".owner"            # "<host> <pid>" of the run that made the temp dir
CASE_LABEL = "truth.yaml"
JUNK_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "__MACOSX"})
_CHUNK = 1 << 20
_CTRL = bytes(set(range(32)) - set(b"\t\n\r\f\v\b\x1b")) + b"\x7f"


def _one_line(s: str) -> str:
    return re.sub(r"[\r\n]+", " ", s)


def _binary_reason(head: bytes) -> str | None:
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or _utf16_without_bom(head):
        return "UTF-16 text (convert it to UTF-8 to scan it: iconv -f UTF-16 -t UTF-8)"
    if b"\x00" in head or (head and len(head) - len(head.translate(None, _CTRL)) > len(head) // 10):
        return "binary file (no text)"
    return None


def _utf8(b: bytes) -> bool:
    """Whether `b` is UTF-8 text (a character cut at its end allowed): a pickle or an ELF is not."""
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError as e:
        return e.start >= len(b) - 3


def _utf16_without_bom(head: bytes) -> bool:
    return bool(_utf16(head)) and head[:2] not in (b"\xff\xfe", b"\xfe\xff")


def _utf16(head: bytes) -> str:
    """The codec of a UTF-16 text (a Windows tool's log): `utf-16` with a byte-order mark, else `utf-16-le`/`-be`
    where every other byte is NUL and the others printable ASCII, in at least 64 bytes; '' for anything else. Such a
    file is read decoded (issue 30: without a mark it was "binary", with one it was refused)."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    h = head[: 4096 - 4096 % 2]
    if len(h) < 64 or b"\x00" not in h:  # UTF-16 of ASCII text is half NULs (and most files have none: one find)
        return ""
    for zeros, text, codec in ((h[1::2], h[0::2], "utf-16-le"), (h[0::2], h[1::2], "utf-16-be")):
        if zeros.count(0) >= 0.95 * len(zeros) and sum(32 <= c < 127 or c in (9, 10, 13) for c in text) >= 0.9 * len(text):
            return codec
    return ""


# Program source, not output: a training script quotes the very messages we look for (`raise RuntimeError("NCCL
# error ...")`), so scanning it would cite code as if a rank had printed it. Shell scripts and configs stay: the
# environment and the launch command they set are evidence.
SOURCE_CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh",
                        ".go", ".rs", ".java", ".scala", ".kt", ".js", ".ts", ".rb", ".swift")
# A notebook is both: its code cells are source, its outputs the run's console. It is read as its outputs only
# (tools.bundle.notebook); a `.ipynb` that is not a notebook's JSON is source as before.
NOTEBOOK_SUFFIX = ".ipynb"


# Documentation, not output (issue 30: /usr/share/doc got a confident verdict from an HTML page that explains
# EADDRINUSE): pages and manuals quote every error they document.
DOC_SUFFIXES = (".html", ".htm", ".xhtml", ".css", ".svg", ".md", ".markdown", ".rst", ".adoc", ".tex", ".texi",
                ".info", ".man", ".pod")
# a manual page's section number (`nccl.7`, `srun.1`) is also how logrotate and Python's RotatingFileHandler name a
# log's older parts (`train.log.1`, `syslog.1`, `messages.3.gz`): documentation only where the file is roff
MAN_SUFFIXES = (".1", ".3", ".5", ".7", ".8")
# documents of plain text that a user writes a question in, a log pasted between its paragraphs (not markup pages)
PASTE_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".adoc")
_ROFF = re.compile(rb"^(?:\.TH |\.\\\"|'\\\"|\.Dd |\.SH )", re.M)
_DOC_NAME = re.compile(r"(?:^|/)(?:changelog|changes|news|readme|copyright|license|licence|authors|thanks|todo|"
                       r"history)(?:[._-][\w.-]*)?$", re.I)


_HTML_TAG = re.compile(rb"</?(?:p|code|a|div|span|h[1-6]|li|ul|ol|pre|table|tr|td|em|strong|br)\b[^>\n]{0,200}>")


def _doc_head(head: bytes, kind: str) -> str | None:
    """A generic file whose head is markup-dense (an API reference as JSON with HTML in its strings, a saved
    page under another name): documentation. Twenty tags and one per 2 KiB at least: a proxy's error page quoted
    in a log is a few tags in a lot of text."""
    if kind != GENERIC:
        return None
    n = len(_HTML_TAG.findall(head))
    if n >= 20 and n * 2048 >= len(head):
        return "documentation, not a log (markup throughout: it quotes the errors it documents)"
    return None


def _source_code_reason(rel: str, kind: str, head: bytes = b"") -> str | None:
    name = rel.rsplit("!", 1)[-1].lower()
    if kind == FR_DUMP:
        return None
    if name.endswith(SOURCE_CODE_SUFFIXES) or (name.endswith(NOTEBOOK_SUFFIX) and not looks_like_notebook(head)):
        return "program source, not a log (its strings would read as log lines)"
    bare = name[:-3] if name.endswith(".gz") else name
    if kind == GENERIC and (bare.endswith(DOC_SUFFIXES) or _DOC_NAME.search(bare)
                            or (bare.endswith(MAN_SUFFIXES) and _ROFF.search(head[:4096]))):
        return "documentation, not a log (it quotes the errors it documents)"
    return None



def _relof(path: str, root, under: str, prefix: str) -> str:
    """The display path of `path`, found by os.walk under `root` (`under`: root as os.walk joins names onto it)."""
    # os.walk joins names onto `root` as given: the path below it is a slice (relpath calls getcwd twice and
    # normalises: 50 µs a file, 0.2 s of opening 4,096 files); anything else goes through relpath
    if os.sep == "/" and path.startswith(under) and "/." not in path[len(under) - 1:]:
        r = _printable(path[len(under):])
    else:
        r = _printable(Path(os.path.relpath(path, root)).as_posix())
    return f"{prefix}/{r}" if prefix and r != "." else (prefix or r)


PRECLASSIFY_MIN_FILES = 1024  # a directory with at least this many files is read and sniffed by forked workers


def _preclassify_dir(listing: list, relof: Callable[[str], str], within: str, room: int) -> dict[str, tuple]:
    """{path: (rel, size, ident, kind, skip reason)} for the plain text files of a big directory (`listing`: what
    os.walk gave, as _Loader._walk keeps it), read and sniffed by forked workers (tools.bundle.parallel.map_ordered)
    before the walk indexes them; {} where the directory is small, over the files budget (`room`), or fork is
    unavailable. Why: opening a 10,000-rank bundle was 1.3 s in one process, most of it per file (open, read
    8 KiB, sniff: ~130 µs a file), all before the scan's workers start. The walk itself (order, budgets, links,
    archives, every refusal) is unchanged: it takes a worker's answer only for a file it reaches with the same
    display path and (device, inode), and reads anything else (compressed, archives, NUL runs, UTF-16, a file that
    changed or failed to open) itself, as before."""
    from trainlog_debugger.tools.bundle.parallel import fork_workers, map_ordered
    n = sum(len(e[2]) for e in listing if not isinstance(e, OSError))
    if n < PRECLASSIFY_MIN_FILES or n > room or fork_workers() < 2:
        return {}
    listed: list[tuple[str, str, tuple[int, int]]] = []
    for entry in listing:
        if isinstance(entry, OSError):
            continue
        d, _dirs, files = entry
        for name in files:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and name != CASE_LABEL:
                listed.append((path, relof(path), (st.st_dev, st.st_ino)))
    from trainlog_debugger.tools.sources.detect import detectors
    detectors()  # compiled once here, inherited by the forks
    out: dict[str, tuple] = {}
    for got in map_ordered(_preclassify, listed, within):
        out.update(got)
    return out


def _preclassify(items: list[tuple[str, str, tuple[int, int]]], within: str) -> dict[str, tuple]:
    """A worker's part of _preclassify_dir: each file that is plain text (no NUL, no compression or archive magic,
    no byte-order mark) in its first HEAD_BYTES, with its kind and, where the walk would refuse it, why."""
    out: dict[str, tuple] = {}
    for path, rel, ident in items:
        if rel.lower().endswith(NOTEBOOK_SUFFIX):
            continue    # read through its outputs by the walk itself (_Loader._add_file)
        try:
            fd = _open_nofollow(Path(path), ident, within)
        except (OSError, ReadRefused):
            continue    # the walk meets it again and says why
        try:
            size = os.fstat(fd).st_size
            with io.BufferedReader(_Bounded(fd, size)) as f:
                head = f.read(HEAD_BYTES)
            if b"\x00" in head or _magic(head) or _utf16(head):
                continue
            kind = sniff(rel, head)
            if kind == GENERIC and looks_like_json_lines(head):
                continue    # read with its escapes decoded: the walk indexes it itself (_Loader._add_file)
            why = None if kind == FR_DUMP else (_binary_reason(head) or _source_code_reason(rel, kind, head)
                                                or _doc_head(head, kind))
        except Exception:  # noqa: BLE001 - the walk reads it again, and its last line of defence says why
            continue
        out[path] = (rel, size, ident, kind, why)
    return out


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
        self.within = ""                # while a directory is walked: its real path (files outside it are refused)
        self.read_through = 0           # bytes of compressed-tar members decompressed only to reach later members
        self.pre: dict[str, tuple] = {}  # path -> what a worker read of it while the walk runs (_preclassify_dir)
        self.doc_pastes: list[Source] = []  # plain-text documents skipped as such (finish reads a lone one)

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
        real_root = os.path.realpath(root)
        seen: set[tuple[int, int]] = set()
        links: list[tuple[str, str]] = []
        under = os.path.join(os.fspath(root), "")  # what os.walk's paths start with
        outer, self.within = self.within, real_root
        try:
            self._walk(root, prefix, real_root, seen, links, under)
        finally:
            self.within, self.pre = outer, {}

    def _walk(self, root: Path, prefix: str, real_root: str, seen: set, links: list, under: str) -> None:

        def relof(path: str) -> str:
            return _relof(path, root, under, prefix)

        # the tree is listed first (in the order os.walk gives it, an unreadable directory at its place), so that
        # the files of a big one can be read and sniffed by workers (_preclassify_dir) before they are indexed here
        listing: list[tuple[str, list[str], list[str]] | OSError] = []
        for d, dirs, files in os.walk(root, onerror=listing.append):
            listing.append((d, list(dirs), files))
            dirs[:] = sorted((x for x in dirs if x not in JUNK_DIRS), key=natural_key)
        self.pre = _preclassify_dir(listing, relof, real_root, self.budget.max_files - len(self.sources))
        for entry in listing:
            if isinstance(entry, OSError):
                self.skip(relof(entry.filename), f"unreadable directory ({entry.strerror or entry})")
                continue
            d, dirs, files = entry
            if self.files_note:         # over the files budget: only count what is left
                self.files_over += len(files)
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
        # a file of the walked directory must lie in it; our own extracted copies (in the private temp dir) need no check
        within = "" if self.tmp is not None and os.fspath(path).startswith(os.fspath(self.tmp) + os.sep) else self.within
        pre = self.pre.pop(os.fspath(path), None) if depth == 0 and self.pre else None
        if pre is not None and pre[0] == rel and pre[2] == ident and within == self.within:
            _rel, size, _ident, src_kind, why = pre    # read and sniffed by a worker (_preclassify_dir): plain text
            if why:
                return self.skip(rel, why)
            self.sources.append(Source(rel, path, src_kind, size, ident=ident, within=within))
            return True
        fd = _open_nofollow(path, ident, within)
        st = os.fstat(fd)
        ident, size = (st.st_dev, st.st_ino), st.st_size
        with io.BufferedReader(_Bounded(fd, size)) as f:
            head = f.read(HEAD_BYTES)
            nul = b"\x00" in head and not _magic(head) and not head.startswith((b"\xff\xfe", b"\xfe\xff"))
            # runs (copytruncate), or a few stray NULs in text (issue 30: one NUL in the first 8 KiB dropped the
            # file): read, without the NULs; many scattered NULs mean binary (or UTF-16, said as such)
            rest = _NUL_RUN.sub(b"", head) if nul else b""  # (a regex pass over the head: only where a NUL is)
            nul = nul and (b"\x00" not in rest or (rest.count(b"\x00") <= max(8, len(rest) // 1000)
                                                   and b"\n" in rest and _utf8(rest.replace(b"\x00", b""))))
            if nul and not head.strip(b"\x00"):
                after = _after_nul_run(f, fd, size)
                if after is None:
                    return self.skip(rel, "only NUL bytes (an emptied log file)")
                head = after
        kind = _magic(head)

        def reopen() -> BinaryIO:   # the same file again, never by its name alone (it may be swapped meanwhile)
            return io.BufferedReader(_Bounded(_open_nofollow(path, ident, within), size))

        if kind in _OPENERS:
            try:
                with _OPENERS[kind](reopen(), "rb") as inner:
                    head = inner.read(HEAD_BYTES)
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
                return dest is not None and self.keep(dest, self.add_file(dest, rel, depth + 1)) and self.mark(partial)
        elif kind in ("tar", "zip"):
            return self.open_archive(reopen, rel, depth, kind)
        elif kind:
            return self.skip(rel, f"unsupported compression or archive ({kind})")
        utf16 = _utf16(head) if not kind else ""
        if utf16:  # sniffed and checked as the text it is; read decoded (Source.open)
            head, nul = head.decode(utf16, "replace").encode("utf-8"), False
        notebook = rel.rsplit("!", 1)[-1].lower().endswith(NOTEBOOK_SUFFIX) and looks_like_notebook(head)
        raw_head = head
        if notebook:  # sniffed and checked as the outputs it is read as (Source.open)
            lines = NotebookLines()
            head = b"\n".join(lines.line(x) for x in head.split(b"\n")[:-1])
        src_kind = sniff(rel, head)
        nul = nul or (kind == "gz" and b"\x00" in head)
        why = None if src_kind == FR_DUMP else (_binary_reason(head.replace(b"\x00", b"") if nul else head)
                                                 or _source_code_reason(rel, src_kind, raw_head) or _doc_head(head, src_kind))
        src = Source(rel, path, src_kind, size, gzip=kind == "gz", ident=ident, nul=nul and src_kind != FR_DUMP,
                     within=within, utf16=utf16, notebook=notebook,
                     json_lines=src_kind == GENERIC and not notebook and looks_like_json_lines(head))
        if why:
            if why.startswith("documentation") and rel.lower().endswith(PASTE_DOC_SUFFIXES) and not nul:
                self.doc_pastes.append(src)  # read after all if it is the only file given (finish)
            return self.skip(rel, why)
        if kind == "gz":
            src.max_out = max(self.budget.ratio_min_bytes, self.budget.max_ratio * size)
            if size <= GZIP_VERIFY_BYTES:
                try:                    # cheap enough to catch a truncated upload or a bomb now, not mid-scan
                    with src.open() as whole:
                        while whole.read(_CHUNK):
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
        arc: tarfile.TarFile | zipfile.ZipFile
        try:
            arc = tarfile.open(fileobj=fobj, mode="r:*") if fmt == "tar" else zipfile.ZipFile(fobj)
        except _UNREADABLE as exc:
            fobj.close()
            return self.skip(rel, f"corrupt archive ({exc})")
        last = ""
        with fobj, arc:
            members = _tar_members(arc, str(self.tmpdir())) if isinstance(arc, tarfile.TarFile) else _zip_members(arc)
            try:
                for name, kind, size, opener, why in members:
                    got = self.member(rel, depth, name, kind, size, opener, why)
                    last = name
                    # A tar is a stream: skipping on means reading (decompressing) what is skipped. One member too
                    # big to extract (a core file before the logs) is read through and the rest extracted, as long
                    # as what is read through stays within the compression-ratio budget of the file (a bomb does
                    # not); before, that one member ended the archive and the logs after it were never read.
                    if got == "cap" and compressed and not self.stop and self.can_read_through(size):
                        continue
                    if fmt == "tar" and (self.stop or (got == "cap" and compressed)):
                        self.unread.append(rel)
                        self.skip(f"{rel}!*", f"{self.stop or 'extraction cap reached (' + self.limit + ')'}: "
                                              "remaining members not read")
                        break
                else:
                    if isinstance(arc, tarfile.TarFile):
                        self.tar_end(arc, rel, last)
            except _UNREADABLE as exc:
                where = f" after member {_clean(last)}" if last else ""
                self.skip(f"{rel}!*", f"truncated or corrupt archive{where} ({exc}); earlier members kept")
        return False

    def can_read_through(self, size: int) -> bool:
        """Whether a compressed tar member of `size` bytes that is not extracted may be read through to reach the
        members after it: the bytes decompressed so far from the user's file, this member's included, stay within
        the compression-ratio budget against that file's size."""
        through = self.read_through + max(size, 0)
        if self.from_top + through > max(self.budget.ratio_min_bytes, self.budget.max_ratio * self.top_size):
            return False
        self.read_through = through
        return True

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
            src = opener()
            if src is None:  # tarfile.extractfile() of what is no file: members of kind "file" only come here
                raise TypeError(f"{rel}: not a regular file")
            with src, open(dest, "xb") as out:
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
        docs = [s for s in self.skipped if s.reason.startswith("documentation")]
        others = [s for s in self.skipped if not s.reason.startswith(("documentation", "case label file"))]
        if not self.sources and len(self.doc_pastes) == 1 and len(docs) == 1 and not others \
                and not _DOC_NAME.search(self.doc_pastes[0].rel.rsplit("!", 1)[-1].lower()):
            # the one file given is a Markdown or plain-text document: a user's question with their log pasted in
            # (an issue's text saved as question.md). A folder of documents still reads as documentation, and so does
            # a README or CHANGELOG, or a document beside program source (a source tree's lone README.md quotes the
            # errors it explains); one document alone is read, and the gate (tools.bundle.recognise) still refuses it
            # unless it speaks of training
            src = self.doc_pastes[0]
            self.skipped = [s for s in self.skipped if s is not docs[0]]
            self.sources.append(src)
            self.notes.append(f"{src.rel}: read although its name says a document: it is the only file given")
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

