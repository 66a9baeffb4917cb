"""The catalog's triggers on ordinary log lines (issue 16), without a clock.

What a trigger COSTS is a time, and times are measured by eval/bench/triggers.py on a quiet machine (a time taken on
a busy 2-core CI runner is noise: it once measured a database without a group as slower than with it). What does
not depend on the clock is tested here: no trigger hits an ordinary line (each hit is Python work per line: the scan
verifies every candidate), every `verify` narrows its trigger, the benchmark's hit lines are real hits, and the
benchmark's own measure runs.
"""

from __future__ import annotations

import math
import re

import pytest

from trainlog_debugger.eval.bench.logs import _hit_line
from trainlog_debugger.eval.bench.triggers import compile_db, marginal_shares, near_miss_buffer
from trainlog_debugger.tools.sources import patterns

pytest.importorskip("hyperscan")


@pytest.fixture(scope="module")
def buf() -> bytes:
    return near_miss_buffer()


def test_no_trigger_hits_an_ordinary_line(buf):
    """Near-misses must stay misses: a hit would cost Python work per line (the scan verifies every candidate)."""
    pats = patterns()
    hits: list[int] = []
    compile_db([p.trigger.encode() for p in pats]).scan(buf[: len(buf) // 4],
                                                        match_event_handler=lambda i, *_: hits.append(i))
    assert sorted({pats[i].id for i in hits}) == []


def test_the_benchmark_measures_every_group_it_is_given(buf):
    """eval/bench/triggers.py's measure runs on this catalog: a share per group, each a finite fraction of the whole
    database's time (what the share is, is the benchmark's to print, not a test's to assert)."""
    ids = [p.id for p in patterns()]
    groups = [tuple(ids[:10]), tuple(ids[-10:])]
    shares = marginal_shares(buf[: len(buf) // 8], groups, rounds=1)
    # finite, not bounded: one round on a loaded machine (CI beside other jobs) can time a share past 1.0 by noise
    assert set(shares) == set(groups) and all(math.isfinite(v) for v in shares.values())


@pytest.mark.parametrize("p", [p for p in patterns() if p.verify], ids=lambda p: p.id)
def test_a_verified_line_is_an_engine_candidate(p):
    """`verify` narrows the trigger, never widens it: its example and its near-relatives match the trigger too."""
    trig, ver = re.compile(p.trigger), re.compile(p.verify)
    lines = [p.example] + [p.example.replace(a, a.upper()) for a in ("nan", "inf")]
    for line in lines:
        if ver.search(line):
            assert trig.search(line), line
    assert ver.search(p.example)


def test_hit_lines_hit(buf):
    """The benchmark's hit lines are real catalog hits (else its hit-rate cases time nothing)."""
    line = _hit_line(3, "[rank3]:", "node00", 4242, 17)
    assert [p.id for p in patterns() if p.match(line)] == ["nccl.comm_init"]
