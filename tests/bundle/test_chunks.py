"""The one newline-aligned chunk reader every tool shares: nothing lost, nothing split mid-line, any chunk size."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from trainlog_debugger.tools.bundle.chunks import chunks

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
