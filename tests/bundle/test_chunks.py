"""The one newline-aligned chunk reader every tool shares: nothing lost, nothing split mid-line, any chunk size."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from trainlog_debugger.tools.bundle.chunks import NL_DENSE, NL_PIECE, chunks, newlines

LINES = st.lists(st.text(alphabet="ab[]:0123 \r", max_size=30), max_size=40)


@settings(max_examples=200, deadline=None)
@given(lines=LINES, size=st.integers(1, 64), trailing=st.booleans(), sized=st.booleans())
def test_chunks_cover_the_stream_exactly_on_line_boundaries(lines, size, trailing, sized):
    data = "\n".join(lines).encode() + (b"\n" if trailing and lines else b"")
    got = list(chunks(io.BytesIO(data), size, known_size=len(data) if sized else None))
    assert b"".join(c.buf for c in got) == data
    offset = 0
    for c in got:
        assert c.offset == offset
        offset += len(c.buf)
        if not c.eof and not c.cut_long_line:
            assert c.buf.endswith(b"\n")  # only the last chunk, or a piece of an over-long line, may end mid-line


def test_a_line_longer_than_a_chunk_is_passed_on_in_pieces():
    data = b"x" * 100 + b"\nend\n"
    got = list(chunks(io.BytesIO(data), 16))
    assert any(c.cut_long_line for c in got)
    assert b"".join(c.buf for c in got) == data


_LINES = st.lists(st.sampled_from([b"", b"x", b"[rank3]: iteration 10 | lm loss: 2.1", b"a" * 300, b"\r", b"b" * 5000]),
                  max_size=400)


@settings(max_examples=300, deadline=None)
@given(_LINES, st.integers(0, 7), st.integers(0, 4 * NL_PIECE), st.integers(0, 4 * NL_PIECE))
def test_newlines_is_bytes_count(lines, reps, a, b):
    """The fast count is bytes.count on any text and any range: long, short and blank lines, pieces' edges, a dense
    stretch after a sparse one (where it switches to bytes.count), an end past the buffer, an empty range."""
    buf = b"\n".join(lines) * reps + b"\n" * (a % 3000) + b"y" * (b % 200_000)
    for start, end in ((0, None), (a, b), (min(a, b), max(a, b)), (a, len(buf) + 10)):
        assert newlines(buf, start, end) == buf.count(b"\n", start, end)


def test_newlines_at_the_edges_of_its_pieces():
    """Ranges that begin and end one byte either side of a piece's edge, over text with a newline at every edge."""
    buf = (b"0123456\n" * (NL_PIECE // 8)) * 3 + b"\n\n" + b"x" * (NL_PIECE + 5)
    edges = [k * NL_PIECE + d for k in range(4) for d in (-1, 0, 1)]
    for start in [e for e in edges if e >= 0]:
        for end in edges + [len(buf), None]:
            assert newlines(buf, start, end) == buf.count(b"\n", start, end), (start, end)
    assert newlines(buf, -NL_PIECE - 3) == buf.count(b"\n", -NL_PIECE - 3)  # a negative start, as bytes.count reads it


def test_newlines_on_dense_then_sparse_and_blank_only_text():
    """Every shape the switch to bytes.count can meet: all newlines, a dense piece then long lines, exact pieces."""
    for buf in (b"\n" * (3 * NL_PIECE), b"\n" * (NL_DENSE + 1) + b"z" * (3 * NL_PIECE) + b"\n",
                (b"q" * 99 + b"\n") * (NL_PIECE // 100 * 3), b"w" * NL_PIECE + b"\n" * NL_PIECE):
        assert newlines(buf) == buf.count(b"\n")
        assert newlines(buf, 1, len(buf) - 1) == buf.count(b"\n", 1, len(buf) - 1)

