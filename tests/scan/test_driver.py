"""tools/scan/driver.py: readers that share the scan's pass (SharedReader, ripgrep's `Sink`). The scanner knows
none of them: it hands each one the bytes of every file it held whole, in the worker, and the results come back to
the caller by index in bundle.sources."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.scan.driver import SharedReader, scan_bundle

STEP = ("[rank{r}]: [2024-11-05 03:00:{s:02d}] iteration {it:>8}/  500000 | consumed samples: {cs:>10} | elapsed "
        "time per iteration (ms): 1234.5 | lm loss: 2.131E+00 |")


def count_iterations(idx: int, src, fs, whole: bytes):
    """A reader as a caller writes one: module-level (a cluster task pickles it by name), reads the bytes given."""
    return (src.rel, whole.count(b"] iteration "), sum(fs.counts.values()))


def nothing(idx, src, fs, whole):
    return None


@pytest.mark.parametrize("workers", [1, 2])
def test_a_shared_reader_reads_every_file_the_scan_held_whole(tmp_path, workers):
    for r in range(4):
        (tmp_path / f"rank_{r}.log").write_text("\n".join(STEP.format(r=r, s=i, it=i, cs=i * 512) for i in range(30))
                                                + "\n")
    # CR-only line ends are rewritten for the scan: those bytes are not the file's, so the reader does not get them
    (tmp_path / "rank_9.log").write_bytes(STEP.format(r=9, s=0, it=1, cs=512).encode() + b"\r" * 3)
    steps, quiet = SharedReader(count_iterations), SharedReader(nothing)
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=workers, readers=[steps, quiet])
        idx = {s.rel: i for i, s in enumerate(b.sources)}
    assert steps.got == {idx[f"rank_{r}.log"]: (f"rank_{r}.log", 30, 0) for r in range(4)}
    assert quiet.got == {}  # None is "nothing read": not kept
    assert len(res.files) == 5 and any("carriage return only" in n for n in res.notes)


def test_a_scan_without_readers_is_the_same_scan(tmp_path):
    (tmp_path / "rank_0.log").write_text("\n".join(STEP.format(r=0, s=i, it=i, cs=i) for i in range(10)) + "\n"
                                         "[rank0]: Traceback (most recent call last):\n"
                                         "[rank0]:   File \"train.py\", line 3, in <module>\n"
                                         "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    with open_bundle(tmp_path) as b:
        plain = scan_bundle(b, workers=1).to_json()
        shared = scan_bundle(b, workers=1, readers=[SharedReader(count_iterations)]).to_json()
    plain.pop("seconds"), shared.pop("seconds")
    assert plain == shared
