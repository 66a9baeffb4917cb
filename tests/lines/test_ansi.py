"""Terminal escapes come out the same way for every reader (tools.lines.ansi)."""

from trainlog_debugger.tools.lines.ansi import ANSI_BYTES, strip_ansi
from trainlog_debugger.tools.lines.attribution import attribute_line as attribute
from trainlog_debugger.tools.sources.hw.record import lines_of as clean_lines


def test_colours_cursor_moves_and_titles_come_out():
    # rich's bold red, tqdm's cursor-up-and-erase, a terminal title (OSC ... BEL) and a hyperlink (OSC ... ST)
    line = ("\x1b[1;31mRuntimeError\x1b[0m: CUDA error\x1b[A\x1b[2K"
            "\x1b]0;train.py\x07 see \x1b]8;;https://x.org\x1b\\docs\x1b]8;;\x1b\\")
    assert strip_ansi(line) == "RuntimeError: CUDA error see docs"
    assert strip_ansi(strip_ansi(line)) == strip_ansi(line)
    assert ANSI_BYTES.sub(b"", line.encode()) == b"RuntimeError: CUDA error see docs"


def test_a_line_without_escapes_is_returned_as_is():
    s = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. [0;31m is no escape without ESC"
    assert strip_ansi(s) is s


def test_readers_share_it():
    """torchrun's role prefix behind a cursor move or a terminal title (not only behind a colour) still gives the
    line's local rank, and a hardware table's rows lose the same escapes."""
    got = attribute("\x1b[2K\x1b[32m[default3]:[rank5]:\x1b[0m Watchdog caught collective operation timeout")
    assert (got.rank, got.local_rank) == (5, 3)
    assert attribute("\x1b]0;train.py\x07[default3]:Traceback (most recent call last):").local_rank == 3
    assert clean_lines("\x1b]0;nvidia-smi\x07\x1b[1mGPU0\x1b[0m\tX\x1b[K") == ["GPU0\tX"]
