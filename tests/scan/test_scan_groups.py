"""`debugger scan` in groups (schema_version 2, tools/scan/grouped.py): on a cascade where every rank but one ends in
the NCCL watchdog's lines and the culprit in data-read retries, the culprit is its own rank group (listed first),
the 15 others one group with `file:line` proof; files alike are one group and a file with a note stands out;
`--per-rank` brings back today's per-rank keys; the JSON stays bounded as ranks grow."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.tools.groups import parse_rank_set

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "cases" / "gen-1024r-027"   # rank 2 never entered the collective; 1,023 ranks time out
runner = CliRunner()
SEQ = 5231


def _rank_lines(rank: int, world: int, culprit: int) -> list[str]:
    """One rank's log as eval/bench/logs.py writes a cascade: NCCL init, steps, then the watchdog's lines (the
    culprit: retries of a data read, then the dump signal another rank sent it)."""
    P, node, pid = f"[rank{rank}]:", f"node{rank // 8:02d}", 40000 + rank
    e = f"{P}[E1105 03:13:52.{rank * 7919 % 1000000:06d}000 ProcessGroupNCCL.cpp"
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    out = [f"{P}{node}:{pid}:{pid + 57} [{rank % 8}] NCCL INFO comm 0x7f3a{rank:04x} rank {rank} nranks {world} "
           f"cudaDev {rank % 8} nvmlDev {rank % 8} busId {rank % 8}b000 commId 0x5e1f2a9c - Init COMPLETE"]
    out += [f"{P} 2024-11-05 03:{m:02d}:00,000 - INFO - iteration {m * 10} | lm loss 2.3{m}" for m in range(5)]
    wd = (f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, "
          f"NumelIn=117440512, NumelOut=117440512, Timeout(ms)=1800000) ran for 1800087 milliseconds before timing out.")
    if rank == culprit:
        out += [f"{P} 2024-11-05 03:{10 + k}:00,000 - WARNING - megatron.core.datasets.object_storage - GET "
                f"s3://datasets/pile/shard-{rank * 7:06d}.tar failed: Read timed out. (read timeout=60); retrying {k}/5 "
                f"in 2.0 s" for k in range(1, 6)]
        out += [f"{e}:1982] {pg} Observed flight recorder dump signal from another rank via TCPStore.",
                f"{e}:1671] {pg} Received a dump signal due to a collective timeout from  rank {(rank + 1) % world} "
                f"and we will try our best to dump the debug info. Last enqueued NCCL work: {SEQ - 1}, last completed "
                f"NCCL work: {SEQ - 1}.This is most likely caused by incorrect usages of collectives. "]
        return out
    return out + [
        f"{e}:616] {wd}",
        f"{e}:2168] {pg}  failure detected by watchdog at work sequence id: {SEQ} PG status: last enqueued work: "
        f"{SEQ}, last completed work: {SEQ - 1}",
        f"{e}:1975] {pg} First PG on this rank to signal dumping.",
        f"{e}:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
        f"kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"{e}:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
        f"{e}:1595] {pg} Process group watchdog thread terminated with exception: {wd}",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {pg} Process group watchdog thread terminated with exception: {wd}",
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x476 (0x7f3a2c92c446 in /usr/local/lib/python3.10/"
        "dist-packages/torch/lib/libtorch_cuda.so)"]


def cascade(root: Path, world: int = 16, culprit: int = 5, cr_only: int | None = None) -> Path:
    """A bundle of per-rank files under node directories; `cr_only`: that rank's file ends its lines with a bare
    carriage return (the scan notes it)."""
    for r in range(world):
        d = root / f"node{r // 8:02d}"
        d.mkdir(parents=True, exist_ok=True)
        end = "\r" if r == cr_only else "\n"
        (d / f"rank_{r}.log").write_text(end.join(_rank_lines(r, world, culprit)) + end)
    return root


def scan_json(path: Path, *extra: str) -> dict:
    r = runner.invoke(app, ["scan", str(path), "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def line_at(root: Path, ev: dict) -> str:
    return (root / ev["file"]).read_text().splitlines()[ev["line"] - 1]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return cascade(tmp_path_factory.mktemp("cascade") / "b16", cr_only=9)


def test_the_culprit_is_its_own_rank_group_and_leads(bundle):
    d = scan_json(bundle)
    assert d["schema_version"] == 2
    assert not {"ranks", "files", "rank_nodes"} & set(d)          # no per-rank listing without --per-rank
    groups = d["rank_groups"]
    assert groups[0]["ranks"] == "5" and groups[0]["rank_count"] == 1
    assert sorted(r for g in groups for r in parse_rank_set(g["ranks"])) == list(range(16))  # each rank once
    big = max(groups, key=lambda g: g["rank_count"])
    assert big["ranks"] == "0-15 except 5" and big["counts"]["pytorch.watchdog_timeout"] == 3
    assert "pytorch.watchdog_timeout" not in groups[0]["counts"] and "io.retrying" in groups[0]["counts"]
    # proof: the first and the last rank of the group, each line as it stands in its file
    ex = big["exemplars"]
    assert [x["rank"] for x in ex] == [0, 15]
    for x in ex:
        for k in ("first_match", "last_match", "last_line"):
            assert line_at(bundle, x[k]) == x[k]["text"]
    assert big["last_line_template"].startswith("frame #<NUM>: c<NUM>d::ProcessGroupNCCL::watchdogHandler()")


def test_patterns_speak_in_range_sets_and_line_templates(bundle):
    d = scan_json(bundle)
    wd = next(p for p in d["patterns"] if p["id"] == "pytorch.watchdog_timeout")
    assert (wd["ranks"], wd["rank_count"], wd["missing_ranks"], wd["missing_rank_count"]) == (
        "0-15 except 5", 15, "5", 1)
    assert wd["ranks_by_count"] == {"3": "0-15 except 5"} and "rank_counts" not in wd
    # the watchdog's own line and the two `terminated with exception` lines that quote it: three templates
    assert sorted(g["count"] for g in wd["groups"]) == [15, 15, 15]
    assert all(g["ranks"] == "0-15 except 5" for g in wd["groups"])
    for g in wd["groups"]:
        assert all(line_at(bundle, x) == x["text"] for x in g["exemplars"])
    dump = next(p for p in d["patterns"] if p["id"] == "pytorch.dump_observed")
    assert (dump["ranks"], dump["only_ranks"], dump["only_rank_count"]) == ("5", "5", 1)


def test_files_alike_are_one_group_and_a_noted_file_stands_out(bundle):
    d = scan_json(bundle)
    fg = d["file_groups"]
    assert fg[0]["notes"] and "carriage return" in fg[0]["notes"][0] and fg[0]["exemplars"] == ["node01/rank_9.log"]
    assert sum(g["files"] for g in fg) == 16
    big = max(fg, key=lambda g: g["files"])
    assert big["files"] == 14 and big["ranks"] == "0-15 except 5,9" and big["ranks_per_file"] == 1
    assert big["exemplars"] == ["node00/rank_0.log", "node01/rank_15.log"]
    assert d["nodes"] == {"node00": "0-7", "node01": "8-15"}
    assert [g["ranks"] for g in d["node_lines"]] == ["0-15"]


def test_per_rank_brings_back_every_rank_beside_the_groups(bundle):
    grouped, full = scan_json(bundle), scan_json(bundle, "--per-rank")
    assert set(full) == set(grouped) | {"ranks", "files", "rank_nodes"}
    assert sorted(map(int, full["ranks"])) == list(range(16)) and len(full["files"]) == 16
    assert full["ranks"]["5"]["counts"]["io.retrying"] == 5 and full["rank_nodes"]["5"]["node"] == "node00"
    wd = next(p for p in full["patterns"] if p["id"] == "pytorch.watchdog_timeout")
    assert wd["rank_counts"] == {str(r): 3 for r in range(16) if r != 5}
    assert full["rank_groups"] == grouped["rank_groups"]


def test_the_json_does_not_grow_with_the_ranks(tmp_path):
    small = len(json.dumps(scan_json(cascade(tmp_path / "s", world=32, culprit=5))))
    large = len(json.dumps(scan_json(cascade(tmp_path / "l", world=512, culprit=300))))
    assert large < small * 1.25, (small, large)


def test_a_generated_1024_rank_case_in_groups():
    d = scan_json(CASE)
    assert len(json.dumps(d)) < 200_000
    first = d["rank_groups"][0]
    assert first["ranks"] == "2" and first["exemplars"][0]["last_line"]["file"].startswith("error-")
    wd = next(p for p in d["patterns"] if p["id"] == "pytorch.watchdog_timeout")
    assert wd["missing_ranks"] == "2" and wd["rank_count"] == 1023


def test_the_text_fits_80_columns_and_names_the_culprit_group(bundle):
    # a terminal of 80 columns (TTY_COMPATIBLE: rich's way to say the stream is a terminal); piped output is whole
    env = dict(os.environ, COLUMNS="80", NO_COLOR="1", TTY_COMPATIBLE="1")
    r = subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "scan", str(bundle)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout).splitlines()
    assert max(len(x) for x in lines) <= 80
    culprit = next(x for x in lines if x.startswith("  ranks 5 (1 rank): "))
    assert "node00/rank_5.log:" in culprit and "+io.retrying" in culprit
    assert any(x.startswith("  ranks 0-15 except 5 (15 ranks): node00/rank_0.log:") for x in lines)


@pytest.mark.slow
def test_per_rank_on_the_fast_path_is_the_typer_commands(bundle):
    from trainlog_debugger.agent.cli.fast import parse
    assert parse(["scan", "a", "--per-rank", "--json"]).keywords == {"per_rank": True, "json_": True}
    assert parse(["scan", "a", "--per-rank", "--per-rank"]) is None   # repeated: Typer's to judge
    outs = []
    for args in (["scan", str(bundle), "--json", "--per-rank"], ["scan", "--json", "--per-rank", "--", str(bundle)]):
        r = subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", *args], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append({**json.loads(r.stdout), "seconds": 0, "generated_at": ""})
    assert outs[0] == outs[1] and "rank_nodes" in outs[0]
