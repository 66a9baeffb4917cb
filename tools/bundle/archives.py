"""Archive members as strangers hand them to us: tar and zip members listed with every unsafe one (links, devices,
`../x`, absolute names) flagged, names made printable and safe to use as a temp file's suffix, the magic numbers
that say what a file really is. Pure helpers of the walk (walk.py); nothing here writes anywhere.
"""
from __future__ import annotations

import bz2
import io
import gzip
import lzma
import re
import stat
import tarfile
import zipfile
import zlib
from typing import Any, Callable


RATIO_MAX, RATIO_MIN_SIZE = 1000, 16 << 20   # zip member > 16 MiB at > 1000:1 is a bomb, not a log
_DATA_FILTER = getattr(tarfile, "data_filter", None)



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


_OPENERS: dict[str, Callable[..., Any]] = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}
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


