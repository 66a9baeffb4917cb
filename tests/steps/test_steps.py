"""trainlog_debugger.tools.steps.analyze: stragglers, regressions and the compute/communication split from step-time lines.

The logs are written here by a small seeded generator in the shapes of FORMATS.md §7.2/§7.3 (Megatron iteration
lines printed by the last rank, `times across ranks` / `(min, max)` timer blocks, NeMo 2 progress lines, Lightning
progress bars, generic `step N ... time X` lines) with the launcher prefixes real bundles have.

Throughput (not a timed test): `python tests/steps/test_steps.py --bench [MiB]` times `scan_steps` on the bundle of
eval/bench/logs.py (256 per-rank files, 35 % Megatron iteration lines = 423,430 step points in 256 MiB: the
step-line-heavy worst case), interleaved with `cat` and a plain Python read, reporting wall and CPU time.

BENCH (2-core project VM, 2026-11-22, shared with other jobs at load 4-6, so CPU-seconds are the fair figure):
256 MiB → 1 worker 5.6 s wall / 2.9 CPU-s = 48 MB/s wall, 91 MB per CPU-second. In the same interleaved rounds
`scan_bundle` (Hyperscan) did 116 and `diff_bundle` 84 MB per CPU-second; 2 workers gave no wall-clock gain
only because both cores were busy. Where the time goes: the Megatron finditer loop about 60 % (half of it the
regex, half the per-match Python), rank-label counts 10 %, reading 10 %, analysis 15 %.
"""
from __future__ import annotations

import gzip
import math
import os
import random
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from trainlog_debugger.agent.render.steps import render_steps
from trainlog_debugger.tools.steps import evidence as steps_evidence
from trainlog_debugger.tools.steps import parse as steps_parse
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Finding
from trainlog_debugger.tools.steps.analyze import StepReport, change_points, robust_outliers, scan_steps

T0 = 1730808000  # 2024-11-05 12:00:00


def _stamp(t: float) -> str:
    s = time.gmtime(t)
    return time.strftime("%Y-%m-%d %H:%M:%S", s) + f".{int((t % 1) * 1e6):06d}"


def meg_line(it: int, total: int, ms: float, t: float | None = None, prefix: str = "") -> str:
    """A Megatron training_log line, FORMATS.md §7.3 (core_v0.16: µs timestamp)."""
    ts = f" [{_stamp(t)}]" if t is not None else ""
    return (f"{prefix}{ts} iteration {it:8d}/{total:8d} | consumed samples: {it * 256:12d} | elapsed time per "
            f"iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {412.3 * 7000 / ms:.1f} | learning rate: "
            f"1.499999E-04 | global batch size:   256 | lm loss: 6.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def timers_all(per_rank: dict[str, list[float]], prefix: str = "") -> list[str]:
    """megatron/core/timers.py `--timing-log-option all`."""
    out = [f"{prefix}times across ranks (ms):\n"]
    for name, vals in per_rank.items():
        out.append(f"{prefix}  {name}:\n")
        out += [f"{prefix}     rank {r:2d}: {v:.2f}\n" for r, v in enumerate(vals)]
    return out


def timers_minmax(minmax: dict[str, tuple[float, float]], prefix: str = "") -> list[str]:
    out = [f"{prefix}(min, max) time across ranks (ms):\n"]
    out += [f"{prefix}    {(name + ' ').ljust(48, '.')}: ({a:.2f}, {b:.2f})\n" for name, (a, b) in minmax.items()]
    return out


def megatron_run(root: Path, *, ranks: int = 16, iters: int = 400, interval: int = 10, slow: dict[int, float] = None,
                 stage_factor: dict[int, float] = None, pp: int = 1, noise: float = 0.02, jump: tuple | None = None,
                 spikes: bool = False, timers: str | None = "all", comm: float = 800.0, prefix: bool = True,
                 seed: int = 1) -> Path:
    """A Megatron job: every rank has a file with NCCL init lines; the last rank also prints the arguments line,
    an iteration line every `interval` iterations and the timer block after it. Per-rank compute is 7000 ms
    (× slow[r], × stage_factor[stage], × lognormal noise); everyone waits for the slowest in all-grads-sync."""
    rng = random.Random(seed)
    slow, stage_factor = slow or {}, stage_factor or {}
    root.mkdir(parents=True, exist_ok=True)
    last = ranks - 1
    pfx = (lambda r: f"[rank{r}]:") if prefix else (lambda r: "")
    for r in range(last):
        (root / f"rank_{r}.log").write_text(
            f"{pfx(r)}node{r // 8:02d}:2301:2388 [{r % 8}] NCCL INFO comm 0x7f3a{r:04x} rank {r} nranks {ranks} "
            f"cudaDev {r % 8} busId {r % 8}b000 - Init COMPLETE\n")
    lines = [f"{pfx(last)} using world size: {ranks}, data-parallel size: {ranks // pp}, context-parallel size: 1, "
             f"tensor-model-parallel size: 1, pipeline-model-parallel size: {pp}\n"]
    t = T0
    stage = ranks // pp
    for it in range(interval, iters + 1, interval):
        base = 7000.0 * (jump[1] / jump[0] if jump and it >= jump[2] else 1.0) if jump else 7000.0
        comp = [base * 0.8 * slow.get(r, 1.0) * stage_factor.get(r // stage, 1.0) * math.exp(rng.gauss(0, noise))
                for r in range(ranks)]
        if spikes and it % 50 == 0:
            comp = [c * 2.5 for c in comp]          # e.g. a checkpoint every 50 iterations
        if spikes:
            k = rng.randrange(ranks)
            comp[k] *= 1.6                          # one rank hiccups in one interval
        step = max(comp) + comm * 0.1 + 200.0
        t += step * interval / 1000
        lines.append(meg_line(it, iters, step, t, pfx(last)))
        if timers == "all":
            lines += timers_all({
                "forward-backward": [c + comm * 0.05 for c in comp],
                "forward-compute": [c * 0.35 for c in comp],
                "backward-compute": [c * 0.65 for c in comp],
                "all-grads-sync": [comm * 0.1 + max(comp) - c for c in comp],
                "optimizer": [200.0 for _ in comp]}, pfx(last))
        elif timers == "minmax":
            lines += timers_minmax({
                "forward-backward": (min(comp), max(comp)),
                "forward-compute": (min(comp) * 0.35, max(comp) * 0.35),
                "backward-compute": (min(comp) * 0.65, max(comp) * 0.65),
                "all-grads-sync": (comm, comm + max(comp) - min(comp)),
                "optimizer": (190.0, 210.0)}, pfx(last))
    lines.append(f"{pfx(last)}[E1105 13:00:00.123456789 ProcessGroupNCCL.cpp:616] [Rank {last}] Watchdog caught "
                 f"collective operation timeout\n")
    (root / f"rank_{last}.log").write_text("".join(lines))
    return root


def scan(root) -> StepReport:
    with open_bundle(str(root)) as b:
        return scan_steps(b, workers=1)


def _check_evidence(rep: StepReport, root: Path) -> list[Finding]:
    """Every finding is cited, and every cited line is really there, verbatim, at that line number."""
    fs = rep.findings()
    for f in fs:
        assert f.evidence
        for ev in f.evidence:
            p = root / ev.file if (root / ev.file).exists() else root
            raw = gzip.open(p, "rb").read() if str(p).endswith(".gz") else p.read_bytes()
            assert raw.split(b"\n")[ev.line - 1].decode().rstrip("\r") == ev.text, (ev.file, ev.line)
    return fs


# -- stragglers from per-rank timers -------------------------------------------------------------------------------
@pytest.mark.parametrize("ranks", [16, 128])
def test_rank5_forty_percent_slower_is_the_only_outlier(tmp_path, ranks):
    root = megatron_run(tmp_path / "job", ranks=ranks, slow={5: 1.4}, seed=ranks)
    rep = scan(root)
    assert [(o.rank, o.metric) for o in rep.outliers] == [(5, "compute_ms")]
    o = rep.outliers[0]
    assert 0.3 < o.gap < 0.5 and o.z > 3.5 and o.group == "all ranks" and o.group_size == ranks
    assert o.slow_intervals == 1.0
    fs = _check_evidence(rep, root)
    st = [f for f in fs if f.id == "steps.straggler"]
    assert len(st) == 1 and st[0].ranks == [5]
    texts = [e.text for e in st[0].evidence]
    assert any("rank  5:" in t for t in texts) and any("rank  5:" not in t for t in texts)  # the slow rank + a peer
    assert rep.regression is None
    per_rank = {s.rank for s in rep.series if s.metric == "compute_ms"}
    assert per_rank == set(range(ranks))


def test_groups_from_pipeline_stages(tmp_path):
    """The last pipeline stage is 25 % slower by design (loss/embedding): compared within stages, only rank 5 is."""
    root = megatron_run(tmp_path / "job", ranks=128, pp=4, slow={5: 1.4}, stage_factor={3: 1.25}, seed=7)
    rep = scan(root)
    assert rep.world_size == 128 and rep.pipeline_size == 4 and "pipeline stages of 32" in rep.groups
    assert [o.rank for o in rep.outliers] == [5]
    assert rep.outliers[0].group == "pipeline stage 0 (ranks 0-31)"


def test_noisy_healthy_run_has_no_outlier_and_no_regression(tmp_path):
    root = megatron_run(tmp_path / "job", ranks=16, iters=1000, interval=5, noise=0.08, spikes=True, seed=3)
    rep = scan(root)
    assert rep.outliers == []
    assert rep.regressions == []
    assert {f.id for f in rep.findings()} == {"steps.bound"}


# -- regression in the job's step time -----------------------------------------------------------------------------
def test_iteration_time_jump_at_300(tmp_path):
    root = megatron_run(tmp_path / "job", ranks=8, iters=600, interval=1, timers=None, jump=(7000, 11200, 300),
                        comm=0.0, noise=0.01, seed=11)
    rep = scan(root)
    r = rep.regression
    assert r is not None and r.metric == "iteration_ms" and r.scope == "job"
    assert 290 <= r.iteration <= 310
    assert r.before == pytest.approx(7000 * 0.8 + 200, rel=0.05) and r.after == pytest.approx(11200 * 0.8 + 200, rel=0.05)
    assert r.time and r.time.startswith("2024-11-05T")
    assert r.ranks == [] and not r.all_ranks     # the last rank's iteration line says nothing about who
    fs = _check_evidence(rep, root)
    reg = next(f for f in fs if f.id == "steps.regression")
    last_fast, first_slow = reg.evidence
    assert f"iteration {r.iteration - 1:8d}/" in last_fast.text and f"iteration {r.iteration:8d}/" in first_slow.text
    assert first_slow.time.iso() == r.time
    assert rep.bound.kind == "unknown"
    assert any("last rank" in n for n in rep.notes)


def test_regression_names_the_ranks_that_slowed(tmp_path):
    """Rank 5's own compute jumps at iteration 300 (a throttled GPU): the job slows, the timers say who."""
    root = tmp_path / "job"
    rng = random.Random(5)
    lines = []
    t = T0
    for it in range(10, 601, 10):
        comp = [5600 * math.exp(rng.gauss(0, 0.01)) * (1.6 if r == 5 and it >= 300 else 1.0) for r in range(16)]
        step = max(comp) + 280
        t += step / 100
        lines.append(meg_line(it, 600, step, t, "[rank15]:"))
        lines += timers_all({"forward-compute": [c * 0.35 for c in comp], "backward-compute": [c * 0.65 for c in comp],
                             "all-grads-sync": [80 + max(comp) - c for c in comp]}, "[rank15]:")
    root.mkdir()
    (root / "rank_15.log").write_text("".join(lines))
    rep = scan(root)
    r = rep.regression
    assert r.metric == "iteration_ms" and 290 <= r.iteration <= 310 and r.ranks == [5] and not r.all_ranks
    rank_level = [x for x in rep.regressions if x.scope == "ranks"]
    assert rank_level == []          # the same shift is not reported twice


# -- NeMo / Lightning ----------------------------------------------------------------------------------------------
def test_nemo_progress_lines_per_rank(tmp_path):
    root = tmp_path / "nemo"
    root.mkdir()
    rng = random.Random(2)
    for r in range(8):
        rows = [f"[NeMo I 2025-04-11 14:46:18 nemo_logging:393] Rank {r} starting\n"]
        for i in range(100):
            s = 0.5 * (1.3 if r == 3 else 1.0) * (1.5 if i >= 60 else 1.0) * math.exp(rng.gauss(0, 0.02))
            rows.append(f"Training epoch 0, iteration {i}/99 | lr: 1e-05 | global_batch_size: 8 | global_step: {i} | "
                        f"reduced_train_loss: 9.47 | train_step_timing in s: {s:.4f}\n")
        (root / f"nemo_log_globalrank-{r}_localrank-{r}.txt").write_text("".join(rows))
    rep = scan(root)
    assert {s.metric for s in rep.series} == {"train_step_ms"} and len(rep.series) == 8
    assert [o.rank for o in rep.outliers] == [3]
    r = rep.regression
    assert r.metric == "train_step_ms" and 58 <= r.iteration <= 62 and r.all_ranks and r.ranks == list(range(8))
    assert r.before == pytest.approx(500, rel=0.05) and r.after == pytest.approx(750, rel=0.05)
    _check_evidence(rep, root)


def test_one_rank_slows_midway(tmp_path):
    """Rank 3 alone slows by 50 % from iteration 70: the job-level median does not move, rank 3's own series does;
    its median over the run is unchanged, so it is no straggler."""
    root = tmp_path / "nemo"
    root.mkdir()
    rng = random.Random(8)
    for r in range(8):
        rows = [f"Training epoch 0, iteration {i}/99 | global_step: {i} | train_step_timing in s: "
                f"{0.5 * (1.5 if r == 3 and i >= 70 else 1) * math.exp(rng.gauss(0, 0.02)):.4f}\n" for i in range(100)]
        (root / f"nemo_log_globalrank-{r}_localrank-{r}.txt").write_text("".join(rows))
    rep = scan(root)
    assert rep.outliers == []
    (r,) = rep.regressions
    assert (r.scope, r.ranks, r.iteration, r.all_ranks) == ("ranks", [3], 70, False)
    assert r.after == pytest.approx(750, rel=0.05)
    fs = _check_evidence(rep, root)
    assert [e.file for e in fs[0].evidence] == ["nemo_log_globalrank-3_localrank-3.txt"] * 2


def test_lightning_progress_bar_updates(tmp_path):
    root = tmp_path / "pl"
    root.mkdir()
    updates = "".join(f"\rEpoch 0:  {i}%|█| {i}/100 [00:05<00:00, 1.9it/s, v_num=0, reduced_train_loss=9.47, "
                      f"global_step={i - 1}.000, consumed_samples=80.0, train_step_timing in s={0.5 if i < 50 else 0.8}]"
                      for i in range(1, 101))
    (root / "rank_0.log").write_text("starting\n" + updates + "\n")
    rep = scan(root)
    (s,) = rep.series
    assert s.metric == "train_step_ms" and s.rank == 0 and len(s.ms) == 100 and list(s.iterations)[:3] == [0, 1, 2]
    assert rep.regression.iteration == 49 and rep.regression.after == pytest.approx(800)
    assert rep.findings()[0].evidence[0].line == 2


# -- generic ------------------------------------------------------------------------------------------------------
def test_generic_step_lines_in_a_per_node_file(tmp_path):
    """srun --label per-node file: ` 3: step 120 | loss 2.31 | time 0.523s`, ranks interleaved; step 200 slows all."""
    root = tmp_path / "gen"
    root.mkdir()
    rng = random.Random(4)
    rows = []
    for st in range(1, 401):
        for r in range(8):
            v = 0.5 * (1.6 if st >= 200 else 1.0) * (1.25 if r == 6 else 1.0) * math.exp(rng.gauss(0, 0.01))
            rows.append(f"{r}: 2024-05-01 10:{st // 60:02d}:{st % 60:02d} INFO step {st} | loss 2.31 | time {v:.3f}s\n")
            if st % 100 == 0:
                rows.append(f"{r}: 2024-05-01 10:00:00 INFO optimizer step took a while\n")   # no number: ignored
    (root / "slurm-4242.out").write_text("".join(rows))
    rep = scan(root)
    assert {s.rank for s in rep.series} == set(range(8)) and {s.metric for s in rep.series} == {"step_ms"}
    assert [o.rank for o in rep.outliers] == [6]
    r = rep.regression
    assert r.iteration == 200 and r.all_ranks and r.time.startswith("2024-05-01T10:03:20")
    assert r.before == pytest.approx(500, rel=0.05)
    _check_evidence(rep, root)


@pytest.mark.parametrize("line, metric, value", [
    ("[rank3]: step 120 | loss 2.31 | time 0.523s", "step_ms", 523.0),
    ("[rank3]: [step 40/1000] loss=2.1 1.93 s/it", "step_ms", 1930.0),
    ("[rank3]: Step 7: loss 2.1, step_time: 812.5ms", "step_ms", 812.5),
    ("[rank3]: step=9 loss=2.0 3.20it/s", "step_ms", 312.5),
    ("[rank3]: step:  10  loss:  7.9  memory: 30.5GiB(38.6%)  tps: 6,234  tflops: 120.3  mfu: 38.6%", "tokens_per_s", 6234.0),
    ("[rank3]: step 11 | tflops: 120.3 | mfu: 38.6%", "tflops", 120.3),
])
def test_generic_shapes(tmp_path, line, metric, value):
    root = tmp_path / "g"
    root.mkdir()
    (root / "train.log").write_text(line + "\n")
    (s,) = scan(root).series
    assert (s.rank, s.metric, s.ms[0]) == (3, metric, pytest.approx(value))


def test_words_that_are_not_steps(tmp_path):
    root = tmp_path / "g"
    root.mkdir()
    (root / "train.log").write_text("global_step=10 time 0.5s\nsteps 10 time 0.5s\ntrain_step_timing is off\n"
                                    "the first step is slow\n")
    assert scan(root).series == []


# -- compute vs communication --------------------------------------------------------------------------------------
def test_bound_compute_from_per_rank_timers(tmp_path):
    rep = scan(megatron_run(tmp_path / "job", ranks=16, comm=400.0))
    b = rep.bound
    assert b.kind == "compute" and b.source == "times across ranks" and b.comm_timers == ["all-grads-sync"]
    assert b.compute_ms > 5 * b.comm_ms
    f = next(f for f in rep.findings() if f.id == "steps.bound")
    assert f.evidence[0].text.endswith("times across ranks (ms):")


def test_bound_communication_from_minmax_timers(tmp_path):
    root = megatron_run(tmp_path / "job", ranks=16, comm=12000.0, timers="minmax", prefix=False)
    rep = scan(root)
    b = rep.bound
    assert b.kind == "communication" and b.source == "(min, max) time across ranks"
    assert "all-grads-sync" in b.reason
    fs = _check_evidence(rep, root)
    ev = next(f for f in fs if f.id == "steps.bound").evidence
    assert ev[0].text == "(min, max) time across ranks (ms):" and any("all-grads-sync ....." in e.text for e in ev)
    assert rep.outliers == []        # min/max blocks name no rank


def test_bound_unknown_without_comm_timers(tmp_path):
    root = tmp_path / "job"
    root.mkdir()
    (root / "rank_7.log").write_text(meg_line(10, 100, 7000.0, T0) + "".join(
        timers_minmax({"forward-backward": (6500.0, 6700.0), "optimizer": (200.0, 210.0)})))
    b = scan(root).bound
    assert b.kind == "unknown" and "no communication timer" in b.reason


# -- robustness ----------------------------------------------------------------------------------------------------
def test_timer_block_cut_by_the_buffer_end(tmp_path, monkeypatch):
    root = megatron_run(tmp_path / "job", ranks=16, slow={5: 1.4}, seed=16)
    want = scan(root)
    monkeypatch.setattr(steps_parse, "CHUNK", 4096)      # blocks are ~1 KiB: many straddle a buffer end
    monkeypatch.setattr(steps_evidence, "CHUNK", 4096)   # and the cited lines are re-read in small pieces too
    got = scan(root)
    assert [(o.rank, round(o.value, 3)) for o in got.outliers] == [(5, round(want.outliers[0].value, 3))]
    assert [len(s.ms) for s in got.series] == [len(s.ms) for s in want.series]


def test_gzip_and_interleaved_per_node_file(tmp_path):
    """The printing rank's block lines interleaved with another rank's lines in one per-node .gz file."""
    root = tmp_path / "job"
    root.mkdir()
    rng = random.Random(9)
    rows = []
    for it in range(10, 201, 10):
        comp = [5600 * math.exp(rng.gauss(0, 0.01)) * (1.4 if r == 5 else 1) for r in range(8)]
        rows.append(meg_line(it, 200, max(comp) + 280, T0 + it * 6, "[rank7]:"))
        block = timers_all({"forward-compute": [c * 0.35 for c in comp], "backward-compute": [c * 0.65 for c in comp],
                            "all-grads-sync": [80 + max(comp) - c for c in comp]}, "[rank7]:")
        block.insert(5, "[rank2]:[W1105 12:00:00.123456789 ProcessGroupNCCL.cpp:4561] [PG ID 0] barrier\n")
        rows += block
    with gzip.open(root / "node0.log.gz", "wt") as f:
        f.write("".join(rows))
    rep = scan(root)
    assert [o.rank for o in rep.outliers] == [5]
    assert len([s for s in rep.series if s.metric == "compute_ms"]) == 8
    _check_evidence(rep, root)


def test_no_step_lines(tmp_path):
    root = tmp_path / "x"
    root.mkdir()
    (root / "a.log").write_text("hello\n")
    rep = scan(root)
    assert rep.series == [] and rep.findings() == [] and rep.bound.kind == "unknown"
    assert "no step-time lines" in rep.notes[0]


# -- the statistics, side by side ----------------------------------------------------------------------------------
@pytest.mark.parametrize("values, want", [
    ({r: 100.0 for r in range(8)} | {5: 140.0}, [5]),                            # MAD 0: any gap ≥ 10 % counts
    ({r: 100.0 + r for r in range(8)} | {5: 108.0}, []),                         # z high-ish but only 3 % slower
    ({r: 100.0 * (1 + 0.05 * ((r * 7) % 5 - 2)) for r in range(16)} | {9: 160.0}, [9]),
    ({0: 100.0, 1: 200.0}, []),                                                  # too few to compare
])
def test_robust_outliers_table(values, want):
    assert [k for k, *_ in robust_outliers(values)] == want


def test_robust_outliers_throughput_is_slow_when_low():
    vals = {r: 1000.0 for r in range(8)} | {2: 600.0}
    assert [k for k, *_ in robust_outliers(vals, higher_is_slower=False)] == [2]
    assert robust_outliers(vals) == []


@pytest.mark.parametrize("series, want", [
    ([7000.0] * 300 + [11200.0] * 300, [(300, 7000.0, 11200.0)]),
    ([7000.0] * 100 + [9000.0] * 50 + [7000.0] * 100, [(100, 7000.0, 9000.0), (150, 9000.0, 7000.0)]),
    ([7000.0] * 100 + [7600.0] * 100, []),                                     # +8.6 %: below the 20 % bar
    ([7000.0] * 100 + [20000.0] * 3 + [7000.0] * 100, []),                     # a 3-point burst is not sustained
    ([30000.0] * 3 + [7000.0] * 100, []),                                      # warm-up: too short
])
def test_change_points_table(series, want):
    assert change_points(series) == want


def test_change_points_long_noisy_series():
    rng = random.Random(0)
    xs = [7000 * math.exp(rng.gauss(0, 0.05)) * (1.6 if i >= 31234 else 1) for i in range(50000)]
    (k, before, after), = change_points(xs)
    assert abs(k - 31234) <= 3 and before == pytest.approx(7000, rel=0.02) and after == pytest.approx(11200, rel=0.02)


# -- rendering and JSON --------------------------------------------------------------------------------------------
def test_render_and_json(tmp_path):
    root = megatron_run(tmp_path / "job", ranks=16, slow={5: 1.4}, jump=(7000, 9800, 200), seed=21)
    rep = scan(root)
    con = Console(record=True, width=200)
    render_steps(rep, con)
    text = con.export_text()
    assert "rank 5" in text or "│    5 │" in text
    assert "compute-bound" in text and "regression" in text.lower()
    import json

    from trainlog_debugger.tools.jsonable import dumps
    d = json.loads(dumps(rep.to_json()))
    assert d["outliers"][0]["rank"] == 5 and d["findings"] and "refs" not in d["outliers"][0]


# -- benchmark -----------------------------------------------------------------------------------------------------
def _bench(mib: int, rounds: int = 3) -> None:
    """Interleaved rounds (each runs every method once, medians reported): `cat` and a Python read of every file
    as the floor, then scan_steps with 1 and 2 workers, all on the same warm bundle."""
    import statistics
    import subprocess
    from trainlog_debugger.eval.bench.logs import generate
    data = Path(__file__).resolve().parents[2] / "bench-data"
    root, man = generate(data, mib / 1024)
    files = sorted(str(p) for p in root.rglob("*") if p.is_file())
    nbytes = sum(Path(f).stat().st_size for f in files)

    def cat():
        subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "cat", *files], check=True)

    def py_read():
        for f in files:
            with open(f, "rb") as fh:
                while fh.read(steps_parse.CHUNK):
                    pass

    def run(workers):
        def go():
            with open_bundle(str(root)) as b:
                go.rep = scan_steps(b, workers=workers)
        return go

    methods = {"cat": cat, "python read()": py_read, "scan_steps 1 worker": run(1), "scan_steps 2 workers": run(2)}
    cat()
    times: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(rounds):
        for k, f in methods.items():
            c0, t = sum(os.times()[:4]), time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
            cpu[k].append(sum(os.times()[:4]) - c0)     # this process and its (forked / cat) children
    rep = methods["scan_steps 2 workers"].rep
    print(f"{nbytes / 2**20:.0f} MiB / {len(files)} files / {man['lines']:,} lines / "
          f"{sum(rep.formats.values()):,} step points ({rep.formats}); median of {rounds} interleaved rounds")
    floor = statistics.median(times["cat"])
    for k, ts in times.items():
        dt, c = statistics.median(ts), statistics.median(cpu[k])
        print(f"  {k:22s} {dt:6.2f} s  {nbytes / dt / 1e6:6.0f} MB/s  {dt / floor:5.1f}x cat   CPU {c:5.2f} s "
              f"({nbytes / max(c, 1e-9) / 1e6:5.0f} MB per CPU-second)")
    print(f"  (load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__" and "--bench" in sys.argv:
    args = [a for a in sys.argv[1:] if a != "--bench"]
    _bench(int(args[0]) if args else 256)
