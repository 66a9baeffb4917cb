"""Issue 15, part B: lines that are not lines. One line of hundreds of MB without a newline (a binary blob, a
progress bar that never printed one) used to be kept whole in every hit: `grep` over a 2 GB line held 3 GB. A line
longer than 1 MiB is now matched in pieces and shown as its head, the text around the match and its length. A file
whose lines end in CR alone (classic Mac, progress redraws) used to be one line; each CR now ends a line."""

import json

import pytest

from harness import assert_clean, run_cli

from trainlog_debugger.tools.scan.engine import make_engine
from trainlog_debugger.tools.scan.filepass import LINE_CAP, SHOW, FileScanner
from trainlog_debugger.tools.sources import by_id

WATCHDOG = ("[rank0]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            "for 600016 milliseconds before timing out.")


@pytest.mark.slow
def test_grep_over_one_huge_line_stays_bounded(tmp_path, cli_env):
    """150 MB without a newline (more than two 64 MiB read chunks), a match in every piece."""
    d = tmp_path / "blob"
    d.mkdir()
    piece = (b"x" * (1 << 20) + b" NCCL WARN here ") * 8
    with open(d / "rank0.log", "wb") as f:
        f.write(b"[rank0]: start ")
        for _ in range(150 >> 3):
            f.write(piece)
    res = run_cli(["grep", "--json", "NCCL WARN", d], env=cli_env, timeout=90)
    assert_clean(res, rc_in=(0,), max_rss_mb=700, max_s=60)
    rep = json.loads(res.stdout)
    shown = [ev["text"] for g in rep["groups"] for ev in g["exemplars"]]  # schema_version 2: grouped
    assert shown and all(len(t) <= SHOW + 200 for t in shown)
    assert all("shown truncated]" in t and "NCCL WARN" in t for t in shown)
    assert any("matched in pieces" in n for n in rep["notes"])


def test_match_deep_in_a_long_line_is_found_and_cut():
    eng = make_engine([by_id()["pytorch.watchdog_timeout"]], "re")
    line = b"[rank0]: " + b"y" * (3 * LINE_CAP) + b" " + WATCHDOG.encode() + b" " + b"z" * LINE_CAP
    import io
    fs = FileScanner(eng).scan("rank0.log", "text", len(line) + 1, io.BytesIO(line + b"\n"))
    (h,) = fs.hits
    assert h.line == 1 and h.rank == 0 and "Watchdog caught collective" in h.text
    assert h.text.startswith("[rank0]: yyy") and f"[line of {len(line):,} bytes, shown truncated]" in h.text
    assert len(h.text) <= SHOW + 200


def test_cr_only_line_ends_are_lines(tmp_path, cli_env):
    d = tmp_path / "cr"
    d.mkdir()
    lines = ["[rank0]:I1105 12:34:50.000000 1 train.py:88] step 1", "[rank0]:I1105 12:34:51.000000 1 train.py:88] "
             "step 2", WATCHDOG, "[rank0]:I1105 12:34:57.000000 1 train.py:88] exiting"]
    (d / "rank0.log").write_bytes("\r".join(lines).encode() + b"\r")
    res = run_cli(["scan", "--json", d], env=cli_env, timeout=60)
    assert_clean(res, rc_in=(0,), max_rss_mb=600, max_s=30)
    rep = json.loads(res.stdout)
    (f,) = rep["file_groups"]
    assert f["files"] == 1 and f["lines"] == 4
    wd = next(p for p in rep["patterns"] if p["id"] == "pytorch.watchdog_timeout")
    assert wd["first"]["line"] == 3 and wd["first"]["text"] == WATCHDOG
    assert any("carriage return only" in n for n in f["notes"])


def test_a_cr_only_file_keeps_its_citations(tmp_path):
    """Issue 30: the scan reads CR as a line end in a CR-only file, the re-reading of citations did not, so every
    citation of such a file was dropped ('no such line') and its answer turned inconclusive."""
    from trainlog_debugger.tools.pipeline import investigate
    from trainlog_debugger.tools.bundle.open import open_bundle
    (tmp_path / "rank_0.log").write_bytes(b"[rank0]: iteration 1 loss 2.3\r[rank0]: iteration 2 loss 2.3\r"
                                          b"[rank0]: RuntimeError: CUDA error: an illegal memory access was "
                                          b"encountered\r[rank0]: done\r")
    (tmp_path / "rank_1.log").write_text("[rank1]: iteration 1 loss 2.3\n" + WATCHDOG.replace("rank0", "rank1")
                                         .replace("Rank 0", "Rank 1") + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.verified and d.status.value == "crashed" and d.culprit_ranks == [0], (d.status, d.notes)
    assert d.chain[0].evidence[0].cite() == "rank_0.log:3"
