"""Collective state of every rank on generated bundles (8, 128, 1024 ranks) and on the real incidents."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.eval.synth import generate as g
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.sources.pytorch.collectives import analyze
from trainlog_debugger.tools.scan.driver import scan_bundle

INCIDENTS = Path(__file__).resolve().parents[4] / "shared" / "incidents"


def _report(tmp_path, job, per_step=None):
    d = tmp_path / "bundle"
    g.write_case(d, job, {})
    with open_bundle(d) as b:
        return analyze(scan_bundle(b), collectives_per_step=per_step)


def _positions(n):
    return sorted({0, 1, n // 2, n - 1})


@pytest.mark.parametrize("ranks", [8, 128, 1024])
def test_data_loading_straggler_found_at_any_position(tmp_path, ranks):
    for culprit in _positions(ranks) if ranks < 1024 else [ranks - 1]:
        job, _ = g.data_loading_straggler(ranks=ranks, culprit=culprit, seed=culprit)
        rep = _report(tmp_path / str(culprit), job)
        assert (rep.verdict, rep.culprits) == ("straggler", [culprit])
        rs = rep.ranks[culprit]
        assert rs.role == "never_entered" and "stuck outside NCCL" in rs.reason
        waiting = [r for r, x in rep.ranks.items() if x.role == "waiting"]
        assert len(waiting) == ranks - 1
        assert rep.groups[0].stuck_seq == 4521 and rep.groups[0].start_time == "--11-05T12:04:10" or \
            rep.groups[0].start_time.startswith("--11-05T12:04")


@pytest.mark.parametrize("ranks", [8, 128])
def test_crash_before_collective(tmp_path, ranks):
    job, _ = g.crash_before_collective(ranks=ranks, culprit=ranks // 2)
    rep = _report(tmp_path, job)
    assert (rep.verdict, rep.culprits) == ("crash", [ranks // 2])
    assert "illegal memory access" in rep.ranks[ranks // 2].crash.text


@pytest.mark.parametrize("ranks", [8, 128])
def test_broadcast_root_ahead_by_one_step(tmp_path, ranks):
    job, _ = g.broadcast_root_ahead(ranks=ranks, culprit=ranks - 1)
    rep = _report(tmp_path, job, per_step=3)
    assert rep.culprits == [ranks - 1]
    assert rep.ranks[0].role == "ahead"
    assert "one training step" in rep.ranks[0].reason
    assert rep.groups[0].seq_gap == {0: 3}


@pytest.mark.parametrize("ranks", [8, 128])
def test_two_groups_stuck_at_different_points(tmp_path, ranks):
    job, _ = g.two_groups_stuck(ranks=ranks, culprit=2)
    rep = _report(tmp_path, job)
    assert rep.culprits == [2]
    by_pg = {x.pg: x for x in rep.groups}
    assert by_pg["1"].stuck_seq == 900 and by_pg["1"].desc == "tp"
    assert by_pg["0"].stuck_seq == 55
    assert rep.wavefront == "1"  # the tp collective started first


@pytest.mark.parametrize("ranks", [8, 128, 1024])
def test_fabric_failure_has_no_straggler(tmp_path, ranks):
    job, _ = g.fabric_failure(ranks=ranks)
    rep = _report(tmp_path, job)
    assert rep.verdict == "fabric" and rep.culprits == []
    assert rep.with_state == ranks


def test_one_ranks_timeout_is_no_fabric_hang(tmp_path):
    """One rank that entered the collective and timed out says nothing of the others (they may have crashed or been
    preempted, their logs are not here): "every rank entered" needs two ranks to say so."""
    d = tmp_path / "bundle"
    d.mkdir()
    line = ("[rank{0}]:[E1105 03:33:27.000023757 ProcessGroupNCCL.cpp:632] [Rank {0}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600009 milliseconds before timing out.\n")
    (d / "rank0.log").write_text(line.format(0))
    with open_bundle(d) as b:
        rep = analyze(scan_bundle(b))
    assert rep.verdict == "inconclusive" and "one rank's log" in rep.summary
    (d / "rank1.log").write_text(line.format(1))
    with open_bundle(d) as b:
        assert analyze(scan_bundle(b)).verdict == "fabric"


@pytest.mark.parametrize("ranks", [8, 128])
def test_missing_rank_file_is_inconclusive_and_names_the_gap(tmp_path, ranks):
    job, _ = g.missing_rank_file(ranks=ranks, culprit=5)
    rep = _report(tmp_path, job)
    assert rep.verdict == "inconclusive" and rep.culprits == []
    assert 5 in rep.missing_ranks and 5 in rep.suspects


@pytest.mark.slow
def test_1024_ranks_one_outlier_in_the_middle(tmp_path):
    job, _ = g.data_loading_straggler(ranks=1024, culprit=517, seed=9)
    rep = _report(tmp_path, job)
    assert rep.culprits == [517] and rep.found_ranks == 1024
    assert len(rep.rows) == 2  # identical rows collapsed: 1023 waiting ranks in one row


@pytest.mark.parametrize("ranks", [8, 128])
def test_gloo_straggler(tmp_path, ranks):
    job, _ = g.gloo_straggler(ranks=ranks, culprit=1)
    rep = _report(tmp_path, job)
    assert (rep.verdict, rep.culprits) == ("gloo_straggler", [1])


def test_old_torch_lines_without_counters(tmp_path):
    """torch 2.2: only `[Rank r] Watchdog caught ... SeqNum=` lines; the rank on an earlier SeqNum is behind."""
    d = tmp_path / "b"
    d.mkdir()
    for r in range(4):
        seq = 30 if r == 2 else 31
        (d / f"rank_{r}.log").write_text(
            f"[rank{r}]:[E ProcessGroupNCCL.cpp:523] [Rank {r}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) "
            f"ran for 600031 milliseconds before timing out.\n")
    with open_bundle(d) as b:
        rep = analyze(scan_bundle(b))
    assert rep.culprits == [2] and rep.ranks[2].role == "behind"


@pytest.mark.skipif(not INCIDENTS.is_dir(), reason="no shared incidents")
def test_real_incidents_read_without_error():
    seen = {}
    for d in sorted(p for p in INCIDENTS.iterdir() if (p / "truth.yaml").exists()):
        with open_bundle(d) as b:
            rep = analyze(scan_bundle(b))
        seen[d.name] = rep.verdict
    # the one incident with a watchdog line: a single rank's paste cannot name a culprit, and says so
    assert seen["megatron-ckpt-save-slow-io-timeout"] == "inconclusive"


def _analyze_text(tmp_path, lines: list[str]):
    d = tmp_path / "b"
    d.mkdir()
    (d / "console.txt").write_text("\n".join(lines) + "\n")
    with open_bundle(d) as b:
        return analyze(scan_bundle(b))


def _timed_out(r: int) -> list[str]:
    return [f"[rank{r}]:[E1105 21:40:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=7713, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
            f"ran for 1800083 milliseconds before timing out.",
            f"[rank{r}]:[E1105 21:40:00.100000000 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
            f"failure detected by watchdog at work sequence id: 7713 PG status: last enqueued work: 7713, last "
            f"completed work: 7712"]


def test_a_rank_with_its_own_nccl_error_is_not_a_straggler(tmp_path):
    """No watchdog state, but the rank's own NCCL error (its IB completion failed, its watchdog thread ended on an
    NCCL error): it was inside NCCL, not stuck outside it; a rank with neither is the straggler."""
    lines = [f"[rank{r}]: iter 22200 loss=2.0000" for r in range(8)]
    lines += ["[rank5]: gpu-t02:5101:5190 [5] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer "
              "10.1.0.7<4431> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_5",
              "[rank5]:[E1105 21:10:44.000000000 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
              "Process group watchdog thread terminated with exception: NCCL error: remote process exited or there "
              "was a network error, NCCL version 2.21.5"]
    for r in (0, 1, 2, 3, 4, 6):
        lines += _timed_out(r)
    rep = _analyze_text(tmp_path, lines)
    assert rep.ranks[5].role == "waiting" and "inside NCCL" in rep.ranks[5].reason
    assert rep.culprits == [7] and rep.ranks[7].role == "never_entered"


def test_many_ranks_without_state_are_a_partial_log_not_stragglers(tmp_path):
    """Half the ranks printed only their steps: a console that kept some ranks' ends, not eight stragglers."""
    lines = [f"[rank{r}]: iter 22200 loss=2.0000" for r in range(16)]
    for r in range(8):
        lines += _timed_out(r)
    rep = _analyze_text(tmp_path, lines)
    assert rep.verdict == "inconclusive" and rep.culprits == [], rep.summary
    assert "no collective state" in rep.summary


def test_a_notified_rank_with_older_work_in_flight_is_behind_not_waiting(tmp_path):
    """Rank 4 only received the dump signal, with work in flight (enqueued 7712 > completed 7711) that is older than
    the collective the others timed out in (7713): it never enqueued that one, it is behind, not one of the
    waiters (and not a fabric hang of all ranks)."""
    lines = []
    for r in (0, 1, 2, 3):
        lines += _timed_out(r)
    lines.append("[rank4]:[E1105 21:40:03.941744891 ProcessGroupNCCL.cpp:1597] [PG ID 0 PG GUID 0(default_pg) Rank 4] "
                 "Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the "
                 "debug info. Last enqueued NCCL work: 7712, last completed NCCL work: 7711.")
    rep = _analyze_text(tmp_path, lines)
    assert rep.ranks[4].role == "behind" and rep.culprits == [4] and rep.verdict == "straggler", rep.summary


def test_ranks_srun_says_exited_with_an_error_code_crashed_not_straggled(tmp_path):
    """srun's `tasks 4-7: Exited with exit code 127` (one task per GPU: a line names several tasks of one host) for
    ranks with no collective state: they died (a loader's symbol lookup error), they did not hang outside NCCL."""
    lines = [f"{r:2d}: iter 200 loss 2.1" for r in range(8)]
    for r in range(4):
        lines += [f"{r:2d}: " + x for x in _timed_out(r)]
    lines += ["srun: error: hpc-g012: tasks 4-7: Exited with exit code 127"]
    rep = _analyze_text(tmp_path, lines)
    assert {rep.ranks[r].role for r in range(4, 8)} == {"crashed"} and rep.verdict == "crash", rep.summary
    assert "exit code 127" in rep.ranks[4].crash.text


def test_a_rank_torchrun_says_exited_with_code_1_crashed_not_straggled(tmp_path):
    """torchrun's failure entry for rank 5 (exitcode 1), whose own exception is not in the bundle: it died."""
    lines = [f"[rank{r}]: iter 200 loss 2.1" for r in range(6)]
    for r in range(4):
        lines += _timed_out(r)
    lines += ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "Root Cause (first observed failure):",
              "[0]:", "  time      : 2024-11-05_21:20:01", "  host      : gpu-node-01", "  rank      : 5 (local_rank: 1)",
              "  exitcode  : 1 (pid: 41005)", "  error_file: <N/A>",
              "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    rep = _analyze_text(tmp_path, lines)
    assert rep.ranks[5].role == "crashed" and 5 in rep.culprits and rep.verdict == "crash", rep.summary


def test_blocking_wait_timeouts_are_the_ranks_own_waits(tmp_path):
    """Under TORCH_NCCL_BLOCKING_WAIT=1 the caller's wait times out (`Work WorkNCCL(SeqNum=4412, ...) timed out in
    blocking wait.`), not the watchdog: those ranks entered collective 4412; the one that printed none is the
    straggler."""
    lines = [f"[rank{r}]: iter 9000 loss 2.1" for r in range(8)]
    for r in (0, 1, 2, 3, 4, 5, 7):
        lines.append(f"[rank{r}]:[E1129 12:41:55.655969870 ProcessGroupNCCL.cpp:1385] [PG ID 0 PG GUID 0(default_pg) "
                     f"Rank {r}] Work WorkNCCL(SeqNum=4412, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
                     f"Timeout(ms)=1800000) timed out in blocking wait.")
    rep = _analyze_text(tmp_path, lines)
    assert rep.verdict == "straggler" and rep.culprits == [6], rep.summary
    assert rep.groups[0].stuck_seq == 4412


@pytest.mark.parametrize("code", [1, 137])
def test_srun_exit_codes_a_teardown_gives_prove_no_death(tmp_path, code):
    """Guard: exit 1 (a rank raising on its peers' closed sockets) and 128 + a signal (a wrapper reporting its python
    killed in the teardown) are what stragglers get too: they stay stragglers."""
    lines = [f"{r:2d}: iter 200 loss 2.1" for r in range(8)]
    for r in range(7):
        lines += [f"{r:2d}: " + x for x in _timed_out(r)]
    lines += [f"srun: error: hpc-g012: tasks 4-7: Exited with exit code {code}"]
    rep = _analyze_text(tmp_path, lines)
    assert rep.ranks[7].role == "never_entered" and rep.culprits == [7], rep.summary
