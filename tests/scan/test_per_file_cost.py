"""What makes each rank file and each kept hit cheaper must not change what the scan reads (issue 28): a c10 line's
time read by its body whatever its rank, the file's first time and srun labels read line by line from the head, one
scanner reused over the files of a batch, and the memos of stamps and attributions (frozen values, shared)."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.lines import attribution
from trainlog_debugger.tools.lines.attribution import attribute_line
from trainlog_debugger.tools.lines.timestamps import parse_stamp
from trainlog_debugger.tools.scan import driver, nearby
from trainlog_debugger.tools.scan.engine import make_engine
from trainlog_debugger.tools.scan.filepass import FileScanner
from trainlog_debugger.tools.sources import patterns

# bodies that follow a c10 `[rankN]:` prefix, one per stamp format and a few that start right at the prefix's `:`
BODIES = [
    "[E1105 03:13:52.000039595 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout",
    " [2024-11-05 03:00:00.928678] iteration        1/  500000 | lm loss: 2.1E+00 |",
    "[I1105 03:13:52.123456 140 torch/distributed/elastic/agent/server/api.py:873] [default] worker group failed",
    "2024-11-05_03:13:52.123456 torchelastic restart",
    "2024-11-05 03:13:52,123 - INFO - saving checkpoint",
    "2024-11-05T03:13:52.5Z rank 5 ready",
    "Nov  5 03:13:52 gpu-node-17 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
    "Tue Nov  5 03:13:52 2024 nvidia-smi",
    "[ 1234.567890] NVRM: Xid 79",
    "12.123456] after the prefix",
    "03:13:52 right after the prefix",
    "I 03:13:52.123456 ais target up",
    "E1340 03:13:52.000000000 an invalid c10 date",
    "no time at all",
    "",
]


@pytest.mark.parametrize("body", BODIES)
def test_a_c10_line_has_the_same_time_whatever_its_rank(body):
    nearby.forget_lines()
    for rank in (0, 7, 5, 1234567, 12):  # the first computes, the others come from the memo of the body
        line = f"[rank{rank}]:{body}"
        assert nearby.stamp(line) == parse_stamp(line) == parse_stamp(f"[rank3]:{body}")
    nearby.forget_lines()


def test_a_repeated_c10_stamp_parses_the_same_each_time():
    a = parse_stamp("[rank1]:[E1105 03:13:52.000039595 ProcessGroupNCCL.cpp:616] [Rank 1] x")
    b = parse_stamp("[rank2]:[E1105 03:13:52.000039595 ProcessGroupNCCL.cpp:2168] [Rank 2] y")
    assert a == b and a is not None and (a.month, a.day, a.nanos) == (11, 5, 39595)
    # a stamp that is no valid date is no c10 stamp, the first and the second time
    assert parse_stamp("[E1340 03:13:52.000000000 x") == parse_stamp("[E1340 03:13:52.000000000 y") is None


def test_attributions_are_shared_only_between_equal_lines():
    lines = [f"[rank{r}]:[E1105 03:13:52.0 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) Rank {r}] x"
             for r in range(attribution.MADE_MAX + 50)]  # past the memo's bound: it is emptied and refilled
    got = [attribute_line(line) for line in lines]
    assert [a.rank for a in got] == list(range(len(lines)))
    assert all(a.pg_rank == a.rank and a.body == len(f"[rank{a.rank}]:") for a in got)
    assert attribute_line(lines[3]) == got[3]
    assert attribute_line("[default1]:[rank9]: x").local_rank == 1 and attribute_line("[rank9]: x").local_rank is None


def _scan_one(path, text: str):
    path.write_text(text)
    with open_bundle(path) as b:
        (src,) = b.sources
        with src.open() as fh:
            return FileScanner(make_engine(list(patterns()))).scan(src.rel, src.kind, src.size, fh)


@pytest.mark.parametrize("first_timed, found", [(1, True), (200, True), (201, False)])
def test_the_first_time_is_looked_for_in_the_first_200_lines(tmp_path, first_timed, found):
    lines = [f"[rank0]: loading shard {i}" for i in range(1, first_timed)]
    lines += ["[rank0]: [2024-11-05 03:00:00.928678] iteration 1/ 500000 | lm loss: 2.1E+00 |", "[rank0]: done"]
    fs = _scan_one(tmp_path / "rank_0.log", "\n".join(lines) + "\n")
    assert (fs.first_time_line, fs.first_time is not None) == ((first_timed, True) if found else (None, False))


def test_the_first_time_is_looked_for_in_the_first_64_kib(tmp_path):
    lines = [f"[rank0]: config {'x' * 1000} {i}" for i in range(70)]  # 70 lines of 1 KiB: line 70 is past 64 KiB
    lines.append("[rank0]: [2024-11-05 03:00:00.928678] iteration 1/ 500000 |")
    assert _scan_one(tmp_path / "rank_0.log", "\n".join(lines) + "\n").first_time is None


@pytest.mark.parametrize("unlabelled, srun", [(0, True), (30, False)])
def test_srun_labels_are_read_from_the_first_50_lines(tmp_path, unlabelled, srun):
    """srun --label: ranks come from the task ids when most of the first 50 lines carry one."""
    lines = [f"loading shard {i}" for i in range(unlabelled)]
    lines += [f"{i % 4}: [2024-11-05 03:00:0{i % 10}] step {i}" for i in range(60)]
    fs = _scan_one(tmp_path / "combined.out", "\n".join(lines) + "\n")
    assert (fs.ranks == {0, 1, 2, 3}) is srun


def test_one_scanner_over_a_batch_reads_each_file_as_a_fresh_one_would(tmp_path):
    """The scanner a batch reuses (driver._scanner) carries nothing from one file into the next."""
    (tmp_path / "rank_0.log").write_text(
        "[rank0]:[E1105 03:13:52.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5231, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800087 milliseconds before "
        "timing out.\nterminate called after throwing an instance of 'c10::DistBackendError'\n")
    (tmp_path / "rank_1.log").write_text(
        "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"train.py\", line 3, in <module>\n"
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    (tmp_path / "node_gpu-7.log").write_text(
        "Connection reset by peer. Retrying (attempt 3/10)\nConnection reset by peer. Retrying (attempt 4/10)\n")
    eng = make_engine(list(patterns()))
    with open_bundle(tmp_path) as b:
        together = driver._scan_with(eng, list(b.sources))
        alone = []
        for src in b.sources:
            with src.open() as fh:
                alone.append(FileScanner(eng).scan(src.rel, src.kind, src.size, fh))
    driver._SCANNER.last = None
    assert together == alone and any(f.hits for f in together)
