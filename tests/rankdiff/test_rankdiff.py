"""trainlog_debugger.tools.rankdiff.analyze: templates that only a few ranks printed, or that a few ranks did not print.

Throughput is measured by hand, not in a test: `python tests/rankdiff/test_rankdiff.py --bench [MiB]` writes 256 per-rank
files of realistic lines (PERF.md's mix: Megatron iteration lines, NCCL INFO, checkpoint/logging lines, memory
reports; ~205 bytes a line; rank 17 prints one extra error, rank 99 skips its checkpoints), the same lines again as
32 per-node SLURM files (8 ranks interleaved by `[rankN]:`), and times `diff_bundle` on both, warm page cache.

BENCH, 2-core project VM, 2026-11-22, 268 MB / 1.31 M lines, final build. Other sessions kept 1 to 2.5 of the 2 cores
busy during every run (load average 3-5; the script prints their CPU-seconds), so wall-clock figures are lower bounds:
  per-rank files: best 1.54 s = 174 MB/s (1 worker), 1.49-3.1 s = 88-180 MB/s (2 workers); cost 1.16-1.8 CPU-s
      = 150-230 MB/s per core, i.e. ~300-400 MB/s expected with both cores free
  per-node files: 2.3-5.4 s = 50-116 MB/s wall (2 workers); 1.8-2.8 CPU-s = ~110 MB/s per core (one label findall
      per buffer and (label, template) pairs cost ~50 % more than single-rank files)
Peak RSS: ~35 MB parent; a worker holds ~3-4 copies of its 32 MiB buffer (≤ 180 MB on one 64 MB interleaved file).
"""
from __future__ import annotations

import gzip
import os
import random
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from trainlog_debugger.agent.render.diff import render_diff
from trainlog_debugger.tools.rankdiff import analyze as rankdiff
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.bundle.parallel import batches
from trainlog_debugger.tools.rankdiff.analyze import DiffResult, diff_bundle, template_of

# -- template_of: real-format lines and their templates, side by side (Drain3 style) -----------------------------
TEMPLATES = [
    ("[rank3]:[I1105 12:00:03.123456789 train.py:10] step 3 loss 2.31",
     "[I<TS> train.py:<NUM>] step <NUM> loss <NUM>"),
    ("[rank368]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) Rank 368] "
     "First PG on this rank to signal dumping.",
     "[E<TS> ProcessGroupNCCL.cpp:<NUM>] [PG ID <NUM> PG GUID <NUM>(default_pg) Rank <NUM>] "
     "First PG on this rank to signal dumping."),
    (" 3: [rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
     "milliseconds before timing out.",
     "[E<TS> ProcessGroupNCCL.cpp:<NUM>] [Rank <NUM>] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=<NUM>, OpType=ALLREDUCE, NumelIn=<NUM>, NumelOut=<NUM>, Timeout(ms)=<NUM>) ran for <NUM> "
     "milliseconds before timing out."),
    ("[default2]:[rank2]: Traceback (most recent call last):", "Traceback (most recent call last):"),
    ('[rank3]:   File "/usr/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 79, in wrapper',
     'File "<PATH>", line <NUM>, in wrapper'),
    ("node23:12098:12141 [2] NCCL INFO comm 0x55d0c4a0 rank 3 nRanks 8 nNodes 1 localRanks 8 localRank 3 busId 1b000",
     "<HOST>:<NUM>:<NUM> [<NUM>] NCCL INFO comm <HEX> rank <NUM> nRanks <NUM> nNodes <NUM> localRanks <NUM> "
     "localRank <NUM> busId <HEX>"),
    ("H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)",
     "<HOST>:<NUM>:<NUM> [<NUM>] transport/net_ib.cc:<NUM> NCCL WARN NET/IB : Got completion from peer "
     "<IP><<NUM>> with error <NUM>, opcode <NUM>, len <NUM>, vendor err <NUM> (Send)"),
    ("2024-05-01 10:40:02.713 [rank17]: saving checkpoint at iteration 1000 to "
     "/lustre/ckpt/iter_0001000/mp_rank_00/model_optim_rng.pt",
     "<TS> saving checkpoint at iteration <NUM> to <PATH>"),
    ("[rank17]:[E1105 12:00:05.123456789 loader.py:77] Timeout while fetching batch result at index 42",
     "[E<TS> loader.py:<NUM>] Timeout while fetching batch result at index <NUM>"),
    ("Nov  5 12:00:01 node3 kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, GPU has fallen off the bus.",
     "<TS> node<NUM> kernel: NVRM: Xid (PCI:<HEX>): <NUM>, pid=<NUM>, GPU has fallen off the bus."),
    ("run 3f2b8c1e-9a7d-4e21-b5c3-0123456789ab rendezvous at 10.3.0.41:29500",
     "run <UUID> rendezvous at <IP>:<NUM>"),
    (" iteration       12/  100000 | consumed samples:         1536 | lm loss: 2.310521E+00 | grad norm: 1.234 |",
     "iteration <NUM>/ <NUM> | consumed samples: <NUM> | lm loss: <NUM> | grad norm: <NUM> |"),
    # tqdm: only what follows the last '\r' counts; the bar's glyphs are masked
    ("Epoch 1:  45%|████▌     | 450/1000 [00:10<00:12, 44.1it/s]\rEpoch 1:  46%|████▋     | 460/1000 "
     "[00:11<00:12, 44.1it/s]", "Epoch <NUM>: <NUM>%|<BAR>| <NUM>/<NUM> [<NUM>:<NUM><<NUM>:<NUM>, <NUM>it/s]"),
    ("\x1b[0;32m[rank0]:[I1105 12:00:00.000000001 x.py:1] ok\x1b[0m\r\n", "[I<TS> x.py:<NUM>] ok"),
    ("torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 4242 closing signal SIGTERM",
     "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process <NUM> closing signal SIGTERM"),
    # near-misses: not paths, not hex, not IPs
    ("via P2P/IPC/read", "via P<NUM>P/IPC/read"),
    ("dtype bf16 on A100-SXM4-80GB, added 5 layers", "dtype bf<NUM> on A<NUM>-SXM<NUM>-<NUM>GB, added <NUM> layers"),
    ("version 2.1.0", "version <NUM>"),
    ("", ""),
    ("   \t ", ""),
]


@pytest.mark.parametrize("line,expected", TEMPLATES)
def test_template_of(line, expected):
    assert template_of(line) == expected
    assert template_of(line.encode()) == expected


def test_template_of_merges_lines_that_differ_only_in_masked_tokens():
    a = "[rank0]:[I1105 12:00:01.000000001 train.py:10] step 5 loss 2.3 at 0x7f3a01 on node3"
    b = "[rank12]:[I1106 23:59:59.999999999 train.py:10] step 12345 loss 10.25 at 0xdeadbeef on node17"
    assert template_of(a) == template_of(b)
    assert template_of(a) != template_of(a.replace("loss 2.3", "loss nan"))


# -- bundles ------------------------------------------------------------------------------------------------------
def _rank_lines(r: int, steps: int, *, error_at: int | None = None, skip_ckpt: bool = False) -> list[str]:
    out = []
    for s in range(steps):
        ts = f"[I1105 12:00:0{s % 10}.123456789"
        out.append(f"[rank{r}]:{ts} train.py:10] step {s} loss {2.5 - s * 0.01 + r * 1e-4:.4f} lr 3.0e-04")
        if s % 3 == 2:
            out.append(f"[rank{r}]:{ts} data.py:55] batch {s * 8} fetched in {s % 7 + 1}.{r % 10} ms")
        if error_at == s:
            out.append(f"[rank{r}]:[E1105 12:00:0{s % 10}.223456789 loader.py:77] Timeout while fetching batch "
                       f"result at index {s * 8 + 3}")
    if not skip_ckpt:
        out.append(f"[rank{r}]:[I1105 12:00:09.000000001 checkpoint.py:30] saving checkpoint to "
                   f"/ckpt/run1/rank_{r}/step_{steps}.pt")
    out.append(f"[rank{r}]:[I1105 12:00:09.900000001 train.py:99] done, {steps} steps")
    return out


def _write_per_rank(root: Path, n: int, *, odd: int, lacking: int, steps: int = 12, name: str = "rank_{r}.log"):
    root.mkdir(parents=True, exist_ok=True)
    for r in range(n):
        lines = _rank_lines(r, steps, error_at=7 if r == odd else None, skip_ckpt=r == lacking)
        (root / name.format(r=r)).write_text("\n".join(lines) + "\n")


def _line(root: Path, rel: str, n: int) -> str:
    return (root / rel).read_bytes().split(b"\n")[n - 1].decode().rstrip("\r")


def _check_cited(root: Path, res: DiffResult):
    for d in res.only + res.missing:
        for ev in (d.example, d.missing_example):
            if ev is not None:
                assert _line(root, ev.file, ev.line) == ev.text, ev
                assert template_of(ev.text) == d.template or ev is d.missing_example


@pytest.mark.parametrize("n,odd,lacking", [(8, 5, 3), (128, 17, 99)])
def test_per_rank_files(tmp_path, n, odd, lacking):
    _write_per_rank(tmp_path, n, odd=odd, lacking=lacking)
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(n))
    assert res.unattributed_files == []
    assert [d.template for d in res.only] == [
        "[E<TS> loader.py:<NUM>] Timeout while fetching batch result at index <NUM>"]
    only = res.only[0]
    assert (only.ranks, only.kind, only.present_in, only.count) == ([odd], "only", 1, 1)
    assert only.example.file == f"rank_{odd}.log" and only.example.rank == odd
    # steps 0..7 → 8 step lines + 2 batch lines (s=2,5) before it: line 11
    assert only.example.line == 11
    assert only.example.text.startswith(f"[rank{odd}]:[E1105 12:00:07.223456789 loader.py:77] Timeout")
    assert [d.template for d in res.missing] == [
        "[I<TS> checkpoint.py:<NUM>] saving checkpoint to <PATH>"]
    miss = res.missing[0]
    assert (miss.ranks, miss.kind, miss.present_in, miss.count) == ([lacking], "missing", n - 1, n - 1)
    assert miss.example.rank != lacking
    assert miss.missing_example.rank == lacking
    assert miss.missing_example.file == f"rank_{lacking}.log"
    assert miss.missing_example.text == f"[rank{lacking}]:[I1105 12:00:09.900000001 train.py:99] done, 12 steps"
    assert miss.missing_example.line == len(_rank_lines(lacking, 12, skip_ckpt=True))
    _check_cited(tmp_path, res)
    assert res.lines == sum(len(_rank_lines(r, 12, error_at=7 if r == odd else None, skip_ckpt=r == lacking))
                            for r in range(n))


def test_rank_from_the_single_label_when_the_path_says_nothing(tmp_path):
    _write_per_rank(tmp_path, 8, odd=6, lacking=1, name="worker-{r}.txt")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(8))
    assert [(d.kind, d.ranks) for d in res.only + res.missing] == [("only", [6]), ("missing", [1])]


def test_interleaved_node_file_with_rank_labels(tmp_path):
    """A per-node SLURM file: 8 ranks interleaved by '[rankN]:', plus launcher lines with no rank."""
    per = {r: _rank_lines(r, 9, error_at=4 if r == 2 else None, skip_ckpt=r == 6) for r in range(8)}
    lines = ["srun: job 4242 queued and waiting for resources", "Starting training on 8 GPUs"]
    for i in range(max(len(v) for v in per.values())):
        for r in range(8):
            if i < len(per[r]):
                lines.append(per[r][i])
    lines.append("srun: error: node3: task 6: Exited with exit code 1")
    (tmp_path / "slurm-4242.out").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(8))
    assert [(d.kind, d.ranks, d.template) for d in res.only] == [
        ("only", [2], "[E<TS> loader.py:<NUM>] Timeout while fetching batch result at index <NUM>")]
    assert [(d.kind, d.ranks) for d in res.missing] == [("missing", [6])]
    ex = res.only[0].example
    assert ex.text == next(x for x in per[2] if "Timeout" in x)
    assert ex.line == lines.index(ex.text) + 1
    assert res.missing[0].missing_example.text == per[6][-1]
    assert res.missing[0].missing_example.line == len(lines) - lines[::-1].index(per[6][-1])
    assert any("3 lines in 1 file(s)" in n and "no rank label" in n for n in res.notes), res.notes
    _check_cited(tmp_path, res)


def test_torchrun_role_lines_take_the_rank_the_file_states(tmp_path):
    """'[default1]:' alone is a local rank; the same file's '[default1]:[rank9]:' lines say it is global rank 9."""
    for node in range(2):
        lines = []
        for lr in range(4):
            r = node * 4 + lr
            lines.append(f"[default{lr}]:gpu-node-{node}:{2000 + lr}:{2000 + lr} [{lr}] NCCL INFO NCCL version 2.21.5")
            if r != 6:
                lines.append(f"[default{lr}]:gpu-node-{node}:{2000 + lr}:{2100 + lr} [{lr}] NCCL INFO "
                             f"ncclCommInitRank comm 0x55d0c8a000{lr} rank {r} nranks 8 - Init COMPLETE")
        for lr in range(4):
            lines.append(f"[default{lr}]:[rank{node * 4 + lr}]:[I1105 12:00:00.000000001 train.py:5] start")
        (tmp_path / f"error-4242-{node}.out").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(8)) and res.only == []
    assert [(d.ranks, d.missing_example.text) for d in res.missing] == [
        ([6], "[default2]:[rank6]:[I1105 12:00:00.000000001 train.py:5] start")]
    assert res.missing[0].template.startswith("<HOST>:<NUM>:<NUM> [<NUM>] NCCL INFO ncclCommInitRank comm <HEX>")
    assert not any("no rank label" in n for n in res.notes)
    _check_cited(tmp_path, res)


def test_srun_labelled_file(tmp_path):
    """srun --label: ' 3: ' task ids, space-padded to the widest id; the label is the rank."""
    lines = []
    for s in range(6):
        for r in range(12):
            lines.append(f"{r:2d}: step {s} loss {1.5 + r / 100:.3f}")
            if r == 11 and s == 3:
                lines.append(f"{r:2d}: CUDA error: an illegal memory access was encountered")
    for r in range(12):
        if r != 4:
            lines.append(f"{r:2d}: barrier passed after {r * 3} ms")
    (tmp_path / "train.out").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(12))
    assert [(d.template, d.ranks) for d in res.only] == [("CUDA error: an illegal memory access was encountered", [11])]
    assert [(d.template, d.ranks) for d in res.missing] == [("barrier passed after <NUM> ms", [4])]
    assert res.missing[0].missing_example.text == " 4: step 5 loss 1.540"
    _check_cited(tmp_path, res)


def test_one_rank_is_a_note_not_a_crash(tmp_path):
    (tmp_path / "rank_0.log").write_text("\n".join(_rank_lines(0, 5)) + "\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == [0] and res.only == [] and res.missing == []
    assert "at least 2 ranks" in res.notes[0]
    assert res.lines == len(_rank_lines(0, 5))


def test_files_without_rank_are_listed(tmp_path):
    _write_per_rank(tmp_path, 4, odd=1, lacking=2)
    (tmp_path / "dmesg.txt").write_text("[  12.000000] NVRM: Xid (PCI:0000:1b:00): 79\n")
    (tmp_path / "empty.log").write_text("")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.unattributed_files == ["dmesg.txt"]
    assert res.ranks == [0, 1, 2, 3]


def test_no_rank_at_all(tmp_path):
    (tmp_path / "combined.log").write_text("hello\nworld\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == [] and res.unattributed_files == ["combined.log"]
    assert "at least 2 ranks; saw 0" in res.notes[0]


def test_noise_is_not_reported(tmp_path):
    """Progress bars, CRLF, blank lines and numbers that differ per rank make no difference."""
    for r in range(6):
        bar = "\r".join(f"[rank{r}]: {p}%|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p}/100 [00:0{r}<00:10]"
                        for p in range(0, 100, 7 + r))
        text = "\r\n".join([f"[rank{r}]: host node{r * 7} has {r * 1000 + 5} MiB free at 0x{r * 4099:x}0000",
                            "", bar, "   ", f"[rank{r}]: id {r:08x}-aaaa-bbbb-cccc-{r:012x} done"]) + "\r\n"
        (tmp_path / f"rank_{r}.log").write_bytes(text.encode())
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert res.ranks == list(range(6))
    assert res.only == [] and res.missing == [], (res.only, res.missing)


def test_order_caps_and_minority(tmp_path):
    n = 10
    for r in range(n):
        lines = [f"[rank{r}]: common line {r}"]
        if r == 0:   # the usual chatty logging rank: many lines nobody else prints, one of them error-looking
            lines += [f"[rank0]: config key_{chr(97 + i)} = {i}" for i in range(5)] + ["[rank0]: eval loss 2.1"] * 9
            lines.append("[rank0]: dataloader warning: slow disk")
        if r == 7:   # the odd rank: few lines of its own
            lines.append("[rank7]: ECC error detected")
            lines += ["[rank7]: retrying"] * 3
            lines.append("[rank7]: entering barrier")
        if r in (2, 3):
            lines.append("[rank{r}]: straggler warning".replace("{r}", str(r)))
        if r not in (4, 5):
            lines.append(f"[rank{r}]: shutdown ok")
        (tmp_path / f"rank_{r}.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b, max_report=3)
        full = diff_bundle(b)
        strict = diff_bundle(b, minority=0.15)
    # fewest ranks first; among them error-looking templates first, the odd rank 7 (3 templates of its own) before
    # chatty rank 0 (7), then by count; then the rest in the same order
    assert [(d.template, d.ranks) for d in full.only] == [
        ("retrying", [7]), ("ECC error detected", [7]), ("dataloader warning: slow disk", [0]),
        ("entering barrier", [7]), ("eval loss <NUM>", [0])] + [(f"config key_{c} = <NUM>", [0]) for c in "abcde"] + [
        ("straggler warning", [2, 3])]
    assert [d.template for d in res.only] == [d.template for d in full.only][:3]
    assert "showing 3 of 11 minority templates" in res.notes
    assert [(d.template, d.ranks, d.present_in) for d in full.missing] == [("shutdown ok", [4, 5], 8)]
    assert all(d.present_in == 1 for d in strict.only) and len(strict.only) == 10


def test_chunk_size_and_workers_do_not_change_the_result(tmp_path, monkeypatch):
    _write_per_rank(tmp_path / "a", 16, odd=9, lacking=4, steps=40)
    per = {r: _rank_lines(r, 30, error_at=11 if r == 19 else None) for r in range(16, 24)}
    lines = [per[r][i] for i in range(max(map(len, per.values()))) for r in per if i < len(per[r])]
    (tmp_path / "slurm-77.out").write_text("\n".join(lines) + "\n")
    with gzip.open(tmp_path / "a" / "rank_2.log.gz", "wt") as f:   # a .gz one too (replaces nothing: rank 2 twice)
        f.write("[rank2]:[I1105 12:00:00.1 x.py:1] extra gz line\n")

    def run(**kw):
        with open_bundle(tmp_path) as b:
            r = diff_bundle(b, **kw)
        return ([(d.kind, d.template, d.ranks, d.count, d.example, d.missing_example) for d in r.only + r.missing],
                r.ranks, r.lines, r.bytes, r.templates)

    base = run(workers=1)
    monkeypatch.setattr(rankdiff, "CHUNK", 997)
    assert run(workers=1) == base
    monkeypatch.setattr(rankdiff._Firsts, "HOPS", 0)      # the exact per-pair path
    assert run(workers=1) == base
    monkeypatch.setattr(rankdiff, "PARALLEL_MIN_FILES", 2)      # forked workers, several small batches
    with open_bundle(tmp_path) as b:
        assert len(batches(list(enumerate(b.sources)), 2)) > 2
    assert run(workers=2) == base
    kinds = {(k, tuple(rs)) for k, _, rs, *_ in base[0]}
    assert kinds == {("only", (9, 19)), ("only", (2,)), ("missing", (4,))}


def test_sequential_rank_blocks_in_one_file(tmp_path, monkeypatch):
    """One file holding rank 3's lines, then rank 4's, then rank 5's: each buffer alone may look single-rank."""
    lines = []
    for r in (3, 4, 5):
        lines += _rank_lines(r, 20, error_at=9 if r == 5 else None, skip_ckpt=r == 4)
    (tmp_path / "combined.log").write_text("\n".join(lines) + "\n")

    def run():
        with open_bundle(tmp_path) as b:
            res = diff_bundle(b)
        _check_cited(tmp_path, res)
        return [(d.kind, d.ranks, d.template, d.count, d.example.line) for d in res.only + res.missing], res.ranks

    base = run()
    assert base[1] == [3, 4, 5]
    assert [x[:2] for x in base[0]] == [("only", [5]), ("missing", [4])]
    monkeypatch.setattr(rankdiff, "CHUNK", 1500)
    assert run() == base


def test_json(tmp_path):
    from trainlog_debugger.tools.jsonable import dumps
    _write_per_rank(tmp_path, 4, odd=1, lacking=2)
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    import json
    j = json.loads(dumps(res))
    assert j["only"][0]["example"]["file"] == "rank_1.log" and j["missing"][0]["ranks"] == "2"
    assert j["missing"][0]["rank_count"] == 1 and (j["ranks"], j["rank_count"], j["schema_version"]) == ("0-3", 4, 2)
    assert set(j) >= {"root", "ranks", "templates", "bytes", "lines", "seconds", "only", "missing",
                      "unattributed_files", "notes"}


_VOCAB = ["step {n} loss {f}", "saving checkpoint to /ckpt/{n}/x.pt", "Timeout at index {n}", "barrier {n} done",
          "NCCL WARN peer 10.0.{n}.1 gone", "", "   ", "comm 0x{h} ready", "tqdm {n}%|##  |\r{n}%|### |"]


def _naive(files: dict[str, list[str]], n_ranks_hint: dict[str, int | None]):
    """Per-line reference: template_of each line, rank from its own '[rankN]:' label or the file's rank."""
    import re as _re
    have: dict[str, set[int]] = {}
    ranks: set[int] = set()
    for rel, lines in files.items():
        labels = [_re.search(r"\[rank(\d+)\]:", x) for x in lines]
        named = {int(m.group(1)) for m in labels if m}
        default = n_ranks_hint[rel]
        if default is None and len(named) == 1:
            default = next(iter(named))
        for x, m in zip(lines, labels):
            t = template_of(x)
            r = int(m.group(1)) if m else default
            if t and r is not None:
                have.setdefault(t, set()).add(r)
                ranks.add(r)
    return have, ranks


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_matches_a_per_line_reference(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("b")
    files: dict[str, list[str]] = {}
    hints: dict[str, int | None] = {}
    for fi in range(data.draw(st.integers(2, 5))):
        mixed = data.draw(st.booleans())
        rel = f"node-{fi}.log" if mixed else f"rank_{fi}.log"
        hints[rel] = None if mixed else fi
        lines = []
        for _ in range(data.draw(st.integers(1, 40))):
            r = data.draw(st.integers(10, 14)) if mixed else fi
            body = data.draw(st.sampled_from(_VOCAB)).format(n=data.draw(st.integers(0, 10 ** 6)),
                                                              f=data.draw(st.floats(0, 100)), h="7f3a0c")
            label = data.draw(st.sampled_from([f"[rank{r}]:", f"[rank{r}]: ", ""])) if mixed else f"[rank{r}]:"
            lines.append(label + body)
        files[rel] = lines
        eol = data.draw(st.sampled_from(["\n", "\r\n"]))
        (root / rel).write_bytes((eol.join(lines) + data.draw(st.sampled_from([eol, ""]))).encode())
    chunk = data.draw(st.sampled_from([64, 200, 1 << 20]))
    have, ranks = _naive(files, hints)
    old = rankdiff.CHUNK
    rankdiff.CHUNK = chunk
    try:
        with open_bundle(root) as b:
            res = diff_bundle(b, max_report=10 ** 6)
    finally:
        rankdiff.CHUNK = old
    assert res.ranks == sorted(ranks), (files, res)
    n = len(ranks)
    if n < 2:
        assert res.only == [] and res.missing == []
        return
    want_only = {t: sorted(rs) for t, rs in have.items() if len(rs) < n / 2}
    want_missing = {t: sorted(ranks - rs) for t, rs in have.items() if len(rs) * 2 >= n and len(rs) < n}
    assert {d.template: d.ranks for d in res.only} == want_only
    assert {d.template: d.ranks for d in res.missing} == want_missing
    _check_cited(root, res)


def test_file_template_cap_is_said(tmp_path, monkeypatch):
    monkeypatch.setattr(rankdiff, "MAX_FILE_TEMPLATES", 5)
    for r in range(2):
        (tmp_path / f"rank_{r}.log").write_text("".join(f"word{chr(97 + i)}x\n" for i in range(8)))
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
    assert any("more than 5 distinct templates" in n for n in res.notes)


def test_render_diff(tmp_path):
    _write_per_rank(tmp_path, 8, odd=5, lacking=3)
    with open_bundle(tmp_path) as b:
        res = diff_bundle(b)
        cut = diff_bundle(b, max_report=0)
    con = Console(record=True, width=200)
    render_diff(res, con)
    text = con.export_text()
    assert "Timeout while fetching batch result at index <NUM>" in text
    assert "rank_5.log:11" in text and "1/8" in text and "7/8" in text
    con = Console(record=True, width=200)
    render_diff(cut, con)
    assert "showing 0 of 1" in con.export_text()
    con = Console(record=True, width=200)
    render_diff(DiffResult(root="x", ranks=[0], templates=3, bytes=10, lines=2, seconds=0.01,
                           notes=["rank diff needs at least 2 ranks; saw 1 (rank 0); nothing compared"]), con)
    assert "at least 2 ranks" in con.export_text()


# -- throughput (run by hand, not a test) -------------------------------------------------------------------------
def write_bench_bundle(root: Path, mib: int = 256, ranks: int = 256, seed: int = 0) -> int:
    """Per-rank files of realistic lines (PERF.md's mix), with one rank printing an extra error and one lacking a
    checkpoint line. Returns the bytes written."""
    root.mkdir(parents=True, exist_ok=True)
    per_file = (mib << 20) // ranks
    total = 0
    for r in range(ranks):
        rnd = random.Random(seed * 100003 + r)
        comm, bus = f"0x{rnd.randrange(1 << 44):x}", rnd.choice(["1b000", "3d000", "4c000", "5d000", "9b000"])
        out, size, i = [], 0, 0
        while size < per_file:
            k = rnd.random()
            t = (f"[rank{r}]:[I1105 {10 + i // 3600 % 14:02d}:{i // 60 % 60:02d}:{i % 60:02d}."
                 f"{rnd.randrange(10 ** 9):09d} ")
            if k < .35:
                s = (f"{t}training.py:412] iteration {i:8d}/ 1000000 | consumed samples: {i * 512:12d} | elapsed time "
                     f"per iteration (ms): {rnd.uniform(6000, 9000):.1f} | learning rate: "
                     f"{rnd.uniform(1e-5, 3e-4):.6E} | "
                     f"global batch size:   512 | lm loss: {rnd.uniform(1, 3):.6E} | loss scale: 1.0 | grad norm: "
                     f"{rnd.uniform(0.1, 3):.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |")
            elif k < .65:
                s = (f"node{r // 8}:{40000 + r}:{40100 + r} [{r % 8}] NCCL INFO Channel {rnd.randrange(32):02d}/0 : "
                     f"{r}[{r % 8}] -> {(r + 1) % ranks}[{(r + 1) % 8}] via P2P/IPC/read comm {comm} busId {bus}")
            elif k < .85:
                s = rnd.choice([
                    f"{t}checkpointing.py:{rnd.randrange(100, 120)}] saving checkpoint at iteration {i:7d} to "
                    f"/lustre/ckpt/run-7/iter_{i:07d}/mp_rank_{r % 8:02d}/model_optim_rng.pt",
                    f"{t}data.py:88] dataloader worker {rnd.randrange(8)} prefetched {rnd.randrange(1, 64)} batches "
                    f"in {rnd.uniform(0, 50):.2f} ms",
                    f"[rank{r}]:[W1105 10:00:00.000000000 ProcessGroupNCCL.cpp:{rnd.randrange(900, 999)}] Warning: "
                    f"TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is ignored"])
            else:
                s = (f"{t}memory.py:88] [Rank {r}] memory (MB) | allocated: {rnd.uniform(1e3, 8e4):.1f} | max "
                     f"allocated: {rnd.uniform(1e3, 8e4):.1f} | reserved: {rnd.uniform(1e3, 8e4):.0f} | max reserved: "
                     f"{rnd.uniform(1e3, 8e4):.0f}")
            if r == 17 and i == 5000:
                out.append(f"{t}loader.py:77] Timeout while fetching batch result at index {i * 8}")
            if r == 99 and "saving checkpoint" in s:
                s = s.replace("saving checkpoint", "skipping checkpoint")
            out.append(s)
            size += len(s) + 1
            i += 1
        data = ("\n".join(out) + "\n").encode()
        (root / f"rank_{r}.log").write_bytes(data)
        total += len(data)
    return total


def _node_files(root: Path, out: Path, per_node: int = 8) -> None:
    """The same lines as per-node SLURM files: `per_node` ranks interleaved line by line."""
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(root.glob("rank_*.log"), key=lambda p: int(p.stem.split("_")[1]))
    for node in range(0, len(files), per_node):
        per = [f.read_bytes().split(b"\n")[:-1] for f in files[node:node + per_node]]
        lines = [p[i] for i in range(max(map(len, per))) for p in per if i < len(p)]
        (out / f"slurm-4242-{node // per_node}.out").write_bytes(b"\n".join(lines) + b"\n")


def _busy() -> float:
    """CPU-seconds used by the whole machine so far (to tell how much other load shared a run)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _bench(mib: int, runs: int = 3) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "per-rank"
        t0 = time.perf_counter()
        n = write_bench_bundle(root, mib)
        _node_files(root, Path(d) / "per-node")
        print(f"wrote {n / 1e6:.0f} MB twice (256 per-rank files; 32 per-node files) "
              f"in {time.perf_counter() - t0:.1f}s")
        for layout in ("per-rank", "per-node"):
            for p in (Path(d) / layout).iterdir():       # warm the page cache
                p.read_bytes()
            for workers in (2, 1):
                best = None
                for _ in range(runs):
                    c0, s0 = _busy(), os.times()
                    with open_bundle(Path(d) / layout) as b:
                        res = diff_bundle(b, workers=workers)
                    c1, s1 = _busy(), os.times()
                    mine = sum(s1[:4]) - sum(s0[:4])
                    if best is None or res.seconds < best[0].seconds:
                        best = (res, c1 - c0 - mine, mine)
                res, others, mine = best
                print(f"{layout} workers={workers}: {res.bytes / 1e6:.0f} MB, {res.lines:,} lines, {res.templates:,} "
                      f"templates, best of {runs}: {res.seconds:.2f}s → {res.bytes / res.seconds / 1e6:.0f} MB/s "
                      f"({mine:.2f} CPU-s ours, {max(others, 0):.2f} CPU-s other processes during the run)")
                print("  only:", [(d.template, d.ranks) for d in res.only[:3]])
                print("  missing:", [(d.template, d.ranks) for d in res.missing[:3]])


if __name__ == "__main__":
    if "--bench" in sys.argv:
        rest = [a for a in sys.argv[1:] if a != "--bench"]
        _bench(int(rest[0]) if rest else 256)
