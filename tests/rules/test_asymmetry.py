"""The rank that differs feeds the answer (issue 10, mechanism 4): when nothing decisive is found, an error-looking
line that only one or a few ranks printed names the culprit rank, even in a wording no catalog pattern knows."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate, run


def _job(tmp_path, odd: dict[int, str], ranks: int = 8):
    for r in range(ranks):
        lines = [f"[rank{r}]: 2025-06-01 04:0{s}:00,000 INFO trainer: step {100 + s} loss {2.0 - s / 10:.2f}"
                 for s in range(5)]
        if r in odd:
            lines.insert(3, f"[rank{r}]: 2025-06-01 04:03:30,000 {odd[r]}")
        (tmp_path / f"rank_{r}.log").write_text("\n".join(lines) + "\n")


def test_an_unknown_error_wording_on_one_rank_names_that_rank(tmp_path):
    _job(tmp_path, {5: "ERROR shardreader: Timeout while fetching batch result at index 88 from the prefetch pool"})
    with open_bundle(tmp_path) as b:
        inv = run(b)
    d = inv.diagnosis
    assert d.status == Status.inconclusive and d.culprit_ranks == [5], d.headline
    assert "fetching batch result" in d.chain[0].evidence[0].text and d.verified
    assert inv.diff is not None


def test_a_classified_outlier_line_also_names_the_category(tmp_path):
    _job(tmp_path, {2: "ERROR loader: sample 88 of shard 17 failed: audio tokens and features do not match (12 vs 13)"})
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "data" and d.culprit_ranks == [2], d.headline
    assert d.chain[0].id == "asymmetry.outlier_lines"


def test_an_outlier_line_an_upstream_table_documents_reads_as_the_table_says(tmp_path):
    """Pillow's own message (tools/sources/messages/pillow.yaml) on one rank: the table's reading, with its meaning
    and action, leads; the rank is still the one that stands out."""
    _job(tmp_path, {2: "ERROR loader: sample 88 of shard 17 failed: cannot identify image file 'img/88.jpg'"})
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "data" and d.culprit_ranks == [2], d.headline
    assert d.chain[0].id == "table.pillow"


def test_lines_every_rank_prints_or_harmless_outliers_name_nobody(tmp_path):
    _job(tmp_path, {0: "INFO checkpoint: saving checkpoint to /ckpt/step_103",
                    3: "WARNING loader: timed out reading shard 17, retrying 1/3"})
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [] and d.category == "none", d.headline


def test_two_ranks_are_not_compared_for_an_outlier(tmp_path):
    _job(tmp_path, {1: "ERROR shardreader: Timeout while fetching batch result at index 88"}, ranks=2)
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [], d.headline


def _watchdog(r: int, op: str, numel: int) -> str:
    return (f"[rank{r}]:[E601 04:33:10.{100 + r}000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            f"Timeout(ms)=600000) ran for 600011 milliseconds before timing out.")


def test_ranks_stuck_in_different_collectives_at_one_sequence_number_are_a_code_path_split(tmp_path):
    for r in range(4):
        op, n = ("ALLGATHER", 4096) if r == 2 else ("ALLREDUCE", 1)
        (tmp_path / f"rank_{r}.log").write_text(f"[rank{r}]: 2025-06-01 04:23:09,000 INFO step 811\n" +
                                                _watchdog(r, op, n) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "software" and d.culprit_ranks == [2], d.headline
    assert "ALLGATHER" in d.headline and d.verified


def test_the_same_collective_on_every_rank_is_not_a_split(tmp_path):
    for r in range(4):
        (tmp_path / f"rank_{r}.log").write_text(_watchdog(r, "ALLREDUCE", 1) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert "collective.op_differs" not in {f.id for f in d.chain}, d.headline
