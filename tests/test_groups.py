"""tools/groups.py: the range-set text of a rank list and its parser, line templates, the streaming Grouper (its
exemplars: first, last, outliers, focus) and the `--per-rank` context, on lines as a 16-rank NCCL cascade prints
them."""

from __future__ import annotations

import random
import threading

import pytest

from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.groups import (Grouper, group_evidence, parse_rank_set, per_rank, per_rank_listing,
                                            rank_set, template)
from trainlog_debugger.tools.lines.timestamps import parse_stamp


def watchdog(rank: int, op: str = "ALLREDUCE", micro: int = 0) -> str:
    return (f"[rank{rank}]:[E1105 03:13:52.{micro:06d}000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum=5231, OpType={op}, NumelIn=117440512, NumelOut=117440512, "
            f"Timeout(ms)=1800000) ran for 1800087 milliseconds before timing out.")


def ev(rank: int, text: str, line: int = 604) -> Evidence:
    return Evidence(file=f"node{rank // 8:02d}/rank_{rank}.log", line=line, text=text, time=parse_stamp(text),
                    rank=rank)


@pytest.mark.parametrize("ranks, text", [
    ([], "-"),
    ([7], "7"),
    ([0, 1, 2, 3, 7], "0-3,7"),
    ([3, 1, 2, 2, 0], "0-3"),                                  # unsorted, repeated: a set
    ([r for r in range(4096) if r != 1365], "0-4095 except 1365"),
    ([r for r in range(4096) if r not in (5, 6, 900)], "0-4095 except 5-6,900"),
    ([0, 2, 4, 6], "0,2,4,6"),                                 # half the span missing: listed, not "except"
])
def test_rank_set_text(ranks, text):
    assert rank_set(ranks) == text
    assert parse_rank_set(text) == sorted(set(ranks))


def test_rank_set_round_trips_any_set():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.choice([1, 8, 64, 1000, 10_000])
        ranks = {r for r in range(n) if rng.random() > rng.choice([0.001, 0.1, 0.5, 0.95])}
        assert parse_rank_set(rank_set(ranks)) == sorted(ranks)


def test_parse_rank_set_is_bounded_and_forgiving():
    assert parse_rank_set("") == parse_rank_set("-") == parse_rank_set("  ") == []
    assert parse_rank_set("0-3,x,7") == [0, 1, 2, 3, 7]           # a malformed part is dropped, the rest kept
    assert parse_rank_set("0-9 except 2-3", limit=100) == [0, 1, 4, 5, 6, 7, 8, 9]
    assert len(parse_rank_set("0-99999999", limit=1000)) <= 1000  # a huge span is refused, never expanded


def test_template_masks_what_differs_between_ranks():
    assert template(watchdog(3)) == template(watchdog(4095, micro=32428))
    assert template(watchdog(3)) != template(watchdog(3, op="BROADCAST"))
    assert "Watchdog caught collective operation timeout" in template(watchdog(3))
    assert template("a\nb") == template("a b")


def test_a_rank_that_printed_another_line_is_its_own_group():
    evs = [ev(r, watchdog(r, micro=r)) for r in range(16) if r != 11] + [ev(11, watchdog(11, op="BROADCAST"))]
    groups = group_evidence(evs, pattern="pytorch.watchdog_timeout")
    assert [(g.ranks, g.count) for g in groups] == [([r for r in range(16) if r != 11], 15), ([11], 1)]
    big, odd = groups
    assert rank_set(big.ranks) == "0-15 except 11" and "BROADCAST" in odd.key
    # the first and the last member by time are the exemplars, each a real line of its rank's file
    assert [e.rank for e in big.exemplars] == [0, 15] and big.exemplars[1].text == watchdog(15, micro=15)
    assert big.first_time.micro == 0 and big.last_time.micro == 15
    j = big.to_json()
    assert (j["ranks"], j["rank_count"], j["count"], j["pattern"]) == ("0-15 except 11", 15, 15,
                                                                       "pytorch.watchdog_timeout")
    assert [x["file"] for x in j["exemplars"]] == ["node00/rank_0.log", "node01/rank_15.log"]
    assert big.cites() == ["node00/rank_0.log:604", "node01/rank_15.log:604"]


def test_outliers_and_focus_ranks_bring_their_own_lines():
    g = Grouper(focus=[9])
    for r in range(16):
        for k in range(3 if r == 6 else 1):  # rank 6 printed the line three times, every other rank once
            g.add("wd", r, ev(r, watchdog(r, micro=r), line=604 + k))
    (grp,) = g.groups()
    assert grp.outliers == [6] and grp.count == 18
    assert [e.cite() for e in grp.exemplars] == ["node00/rank_0.log:604", "node01/rank_15.log:604",
                                                 "node00/rank_6.log:604", "node01/rank_9.log:604"]
    assert grp.to_json()["outliers"] == "6"


def test_lines_without_a_rank_are_counted_not_dropped():
    g = Grouper()
    g.add("launcher", None, Evidence(file="launcher.log", line=3, text="srun: error: task 5 exited"))
    g.add("launcher", None)
    (grp,) = g.groups()
    assert (grp.ranks, grp.count, grp.unranked) == ([], 2, 2) and grp.to_json()["ranks"] == "-"


def test_per_rank_listing_is_scoped_to_its_block_and_thread():
    assert per_rank() is False
    seen = []
    with per_rank_listing():
        assert per_rank() is True
        t = threading.Thread(target=lambda: seen.append(per_rank()))
        t.start()
        t.join()
        with per_rank_listing(False):
            assert per_rank() is False
        assert per_rank() is True
    assert per_rank() is False and seen == [False]  # another thread (the Slack bot's) is not affected
    with pytest.raises(RuntimeError), per_rank_listing():
        raise RuntimeError("a failed report")
    assert per_rank() is False


def test_template_zero_table_is_the_rank_diffs():
    """tools.groups keys its template cache on lines zeroed with its own table, so that the rank diff's module is
    imported only when a template is first made; the two tables must be the same or the cache would mix lines."""
    from trainlog_debugger.tools import groups
    from trainlog_debugger.tools.rankdiff.mask import ZERO
    assert groups._ZERO == ZERO
