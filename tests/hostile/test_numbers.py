"""Issue 15, part B: numbers read from logs never size anything unbounded. A world size, an NCCL `nranks` of 10^9
and a 5,000-digit rank used to make `scan`/`ask` allocate until the kernel killed them (~6 GB) or exit 1 with
Python's int-conversion error; now each is an implausible claim, noted with its line, and the rest is analysed.
Inputs are real line shapes (FORMATS.md §1.1 c10 header, §3 NCCL init) with the numbers made hostile."""

import json

import pytest
from harness import assert_clean, run_cli, snapshot

from trainlog_debugger.tools.ranks import MAX_RANKS, bounded_int, parse_ranges
from trainlog_debugger.tools.sources import by_id

HUGE = "7" * 5000


def watchdog(r, seq="42") -> str:
    return (f"[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600016 milliseconds before timing out.\n")


def comm_init(r, nranks) -> str:
    return (f"node1:2345:2400 [{r}] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank {r} nranks {nranks} cudaDev {r} "
            "nvmlDev 0 busId 61000 commId 0x8c3f2a1b - Init COMPLETE\n")


@pytest.fixture
def hostile_bundle(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for r in range(2):
        (d / f"rank{r}.log").write_text(f"[2025-01-01 10:00:00] WORLD_SIZE=1000000000\n{comm_init(r, 10**9)}"
                                        f"{watchdog(r, seq='9' * 30)}")
    (d / "rank2.log").write_text(f"[rank{HUGE}]: started\n{watchdog(HUGE, seq=HUGE)}{watchdog(2)}")
    return d


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [["scan"], ["nccl", "--json"], ["ask", "--json", "--offline"]])
def test_huge_claims_end_in_seconds_with_a_note(hostile_bundle, cmd, cli_env):
    before = snapshot(hostile_bundle)
    res = run_cli([*cmd, hostile_bundle], env=cli_env, timeout=60)
    assert_clean(res, rc_in=(0,), max_rss_mb=600, max_s=30)
    assert snapshot(hostile_bundle) == before
    if cmd[0] == "scan":
        assert "rank0.log: line 1: implausible claim ignored (world_size=1000000000" in res.stdout
        assert "rank1.log: line 2: implausible claim ignored (nranks=1000000000" in res.stdout
    elif cmd[0] == "ask":
        d = json.loads(res.stdout)
        notes = " ".join(d["notes"])
        assert "implausible claim ignored (world_size=1000000000" in notes
        assert d["coverage"]["expected_ranks"] in (None, 3)  # never the claim
        assert len(d["coverage"]["missing_ranks"]) <= 3


def test_catalog_int_fields_are_bounded():
    init = by_id()["nccl.comm_init"]
    facts = init.extract(comm_init(3, 10**9))
    assert "nranks" not in facts and facts["comm_rank"] == 3 and facts["implausible"] == ["nranks=1000000000"]
    assert init.extract(comm_init(3, MAX_RANKS))["nranks"] == MAX_RANKS
    ws = by_id()["job.world_size"].extract("WORLD_SIZE=" + HUGE)
    assert "world_size" not in ws and "5000 digits" in ws["implausible"][0]


def test_the_catalog_reads_the_same_bounds():
    from trainlog_debugger.tools import ranks
    from trainlog_debugger.tools.sources import pattern
    assert (pattern.MAX_RANKS, pattern.MAX_DIGITS) == (ranks.MAX_RANKS, ranks.MAX_DIGITS)


def test_bounded_int_and_ranges():
    assert bounded_int("42") == 42 and bounded_int(HUGE) is None and bounded_int("1" * 21) is None
    assert bounded_int("1700000000123456789") == 1700000000123456789  # a ns timestamp is a number
    assert bounded_int("2000000", MAX_RANKS) is None and bounded_int("x1") is None
    assert parse_ranges("0-3,7") == [0, 1, 2, 3, 7]
    assert parse_ranges(f"0-{HUGE}") == [] and parse_ranges("0-999999999") == []
    assert len(parse_ranges(",".join(f"{i}-{i + 9}" for i in range(0, 10**6, 10)), limit=1000)) <= 1000


@pytest.fixture
def huge_metrics(tmp_path):
    """Issue 30: one 5,000-digit number in a Megatron iteration line, a NaN-loss line, a grad-norm line or a
    'lagging ranks' list ended the run with Python's int-conversion error."""
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank_0.log").write_text("\n".join([
        f" iteration {HUGE}/ 1000 | consumed samples: 100 | elapsed time per iteration (ms): 812.3 | lm loss: 2.31 |"
        f" grad norm: {HUGE}.5 | number of skipped iterations: 0 | number of nan iterations: 0 |",
        f" iteration 10/ 1000 | consumed samples: 100 | elapsed time per iteration (ms): {HUGE} | lm loss: nan |",
        f"[rank0]: found NaN in loss at step {HUGE}",
        f"[rank0]: lagging ranks: [{HUGE}, 3, 5]",
        watchdog(0).strip()]) + "\n")
    return d


@pytest.mark.parametrize("cmd", [["steps", "--json"], ["ask", "--json", "--offline"], ["scan", "--json"], ["diff"]])
def test_a_huge_number_in_a_metric_line_is_not_a_crash(huge_metrics, cmd, cli_env):
    res = run_cli([*cmd, huge_metrics], env=cli_env, timeout=60)
    assert_clean(res, rc_in=(0,), max_rss_mb=600, max_s=30)


def test_a_claimed_world_of_a_million_ranks_holds_no_state_per_missing_rank(tmp_path):
    """Issue 30: WORLD_SIZE=1000000 (the allowed maximum) with two logs made a state and a row per missing rank
    (`nccl` 38 s and 1.46 GB) and 999,998 named culprits (ask's JSON 15.8 MB)."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    from trainlog_debugger.tools.sources.pytorch.collectives import MISSING_STATES
    for r in range(2):
        (tmp_path / f"rank_{r}.log").write_text(
            f"[rank{r}]: using world size: 1000000, data-parallel size: 1000000\n" + watchdog(r))
    with open_bundle(tmp_path) as b:
        inv = run(b)
    rep, d = inv.nccl, inv.diagnosis
    assert len(rep.missing_ranks) == 999_998 and len(rep.ranks) <= MISSING_STATES + 2 and rep.found_ranks == 2
    missing = next(g for g in rep.rank_groups() if g.facts.get("role") == "missing")
    assert len(missing.ranks) == 999_998
    assert d.culprit_ranks == [] and d.status.value == "inconclusive"
    assert len(d.model_dump_json()) < 100_000


def test_a_hostlist_expands_within_its_bound():
    """Slurm's hostlist (`SLURM_JOB_NODELIST=gpu-h[031-032]`, sinfo's NODELIST) expands with its zero padding; a
    claimed range of 10^8 hosts, a reversed range or a malformed part expands to nothing, never sizes a list."""
    from trainlog_debugger.tools.ranks import MAX_HOSTS, expand_hostlist
    assert expand_hostlist("gpu-h[031-032],cpu7") == ["gpu-h031", "gpu-h032", "cpu7"]
    assert expand_hostlist("n[1,3-4]x") == ["n1x", "n3x", "n4x"]
    assert expand_hostlist("n[0-99999999]") == [] and expand_hostlist("a[9-1]") == []
    assert len(expand_hostlist(",".join(f"n[0-{MAX_HOSTS}]" for _ in range(3)) + ",m[1-9]")) <= MAX_HOSTS
