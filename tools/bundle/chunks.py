"""Newline-aligned chunked reading of one stream: the one loop behind every whole-file pass (tools.scan.filepass,
tools.rankdiff.analyze, tools.steps.parse, tools.sources.ais.files, tools.verify).

Each chunk holds whole lines only; the partial last line of a read is carried into the next chunk. A line longer
than a chunk cannot be held whole: its piece is handed on as it is and `cut_long_line` says so, so the caller can
note it in its own words. The stream's end is the first empty read; the carried rest (a last line without a
newline) comes as the final chunk, with `eof` set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

CHUNK = 64 << 20


class Chunk(NamedTuple):
    buf: bytes            # whole lines (unless `cut_long_line`, or the last piece of a stream)
    offset: int           # byte offset of buf[0] in the stream
    eof: bool             # the stream ended: buf is the carried rest
    cut_long_line: bool   # buf has no newline: a piece of one line longer than a chunk
    end: int              # the chunk is buf[:end]; len(buf) unless read with `trim=False`


def chunks(stream, size: int = CHUNK, *, known_size: int | None = None,
           align: Callable[[bytes, int], int] | None = None, trim: bool = True) -> Iterator[Chunk]:
    """Read `stream` (binary, `.read(n)`) in `size`-byte reads; yield newline-aligned chunks.

    `known_size`: the exact byte count of `stream` (plain files). Then each read asks for at most the bytes left
    plus one (the one shows the end without another full-size request): `read(64 MiB)` on a 1 MiB file allocates
    and page-faults 64 MiB, which made a chunked reader several times slower than one `read()` (../shared/PERF.md,
    "Pitfalls found" 1). A stream that turns out longer than `known_size` is read on in `size` reads.

    `align(buf, cut) -> cut`: moves the cut (a line start, > 0) back, e.g. to keep a multi-line block whole
    (tools.steps.timers.keep_block_whole); applied to every chunk but the last.

    `trim=False`: `buf` is the whole read buffer (no copy of up to `size` bytes to cut it) and the chunk is
    `buf[:end]`; the bytes after `end` (the partial last line) come again at the start of the next chunk.

    Read errors propagate: the caller keeps what it was given and says where the read stopped.
    """
    carry = b""
    offset = 0
    consumed = 0
    while True:
        if known_size is not None and known_size >= consumed:
            block = stream.read(min(size, known_size - consumed + 1))
        else:
            block = stream.read(size)
        consumed += len(block)
        eof = not block
        buf = carry + block if carry else block
        if not buf:
            return
        long_line = False
        if eof:
            carry = b""
        else:
            cut = buf.rfind(b"\n") + 1
            if cut == 0 and len(buf) < size:  # no line end yet in a short read: wait for more (or the end)
                carry = buf                   # (a 24-byte file with no final newline was "longer than 64 MiB")
                continue
            if cut == 0:  # one line longer than a chunk: hand it on in pieces, say so
                long_line = True
                cut = len(buf)
            if align is not None:
                cut = align(buf, cut)
            if cut == len(buf):
                carry = b""
            elif trim:
                carry, buf = buf[cut:], buf[:cut]
            else:
                carry = buf[cut:]
                yield Chunk(buf, offset, eof, long_line, cut)
                offset += cut
                continue
        yield Chunk(buf, offset, eof, long_line, len(buf))
        offset += len(buf)
        if eof:
            return


NL_PIECE = 64 << 10      # newlines are counted in pieces this big (they stay in the CPU's cache)
NL_DENSE = NL_PIECE // 64  # a piece with more newlines than this (lines under 64 bytes): the rest by bytes.count


def newlines(buf: bytes, start: int = 0, end: int | None = None) -> int:
    """`buf.count(b"\n", start, end)`, about twice as fast on log text.

    Why: counting newlines is the one pass over every byte besides the engine's (line numbers), and bytes.count of
    one byte is a plain loop (~1.4 GB/s on the project VM). bytes.replace finds each newline with memchr and copies
    the runs between with memcpy, both vectorized: a 64 KiB piece holds `len(piece) - len(piece.replace(...))`
    newlines, at ~3.4 GB/s with the piece's copy (bigger pieces fall out of cache: 1 MiB ran at 1.6, 4 MiB at 0.5).
    On dense newlines replace makes a call per newline (blank lines: 0.06 GB/s), so once a piece averages under 64
    bytes a line the rest goes to bytes.count: at most one slow piece per call, whatever the input."""
    if end is not None and end - start < NL_PIECE:  # a short range (between two hits): bytes.count, no set-up
        return buf.count(b"\n", start, end)
    start, end, _ = slice(start, end).indices(len(buf))  # bytes.count's reading of the range, negatives included
    if end - start < NL_PIECE:
        return buf.count(b"\n", start, end)
    n = 0
    for a in range(start, end, NL_PIECE):
        b = min(a + NL_PIECE, end)
        piece = buf[a:b]
        k = len(piece) - len(piece.replace(b"\n", b""))
        n += k
        if k > NL_DENSE:
            return n + buf.count(b"\n", b, end)
    return n
