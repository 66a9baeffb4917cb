"""No single catalog trigger may dominate the engine's time on ordinary log lines (issue 16).

Why: Hyperscan scans all triggers at once; its cost on text that matches nothing comes from near-misses, where a
trigger's literal factor occurs and the rest must be confirmed. `numerical.nan_loss` (`[Ll]oss[ a-z_]*: nan`)
confirmed one on every Megatron `lm loss:` line and cost 35 % of the whole database's time. A trigger's cost here
is its marginal cost: the whole database's scan time minus the time without it, on a few thousand realistic
near-miss lines (Megatron iteration lines, NCCL INFO channel/tree lines, c10d warnings, memory reports: the
formats of FORMATS.md as the benchmark generates them). Robust to a slow or loaded machine: only ratios of times
taken in the same interleaved rounds, the minimum of several repetitions, a candidate over the limit re-measured
before it fails, and only triggers whose cost alone (over an empty database's) is notable are measured in the
whole database (compiling the catalog once per trigger would take minutes).
"""

from __future__ import annotations

import re
import time

import pytest

from trainlog_debugger.eval.bench.logs import _hit_line, _ordinary, layout
from trainlog_debugger.tools.sources import patterns

hs = pytest.importorskip("hyperscan")

# of the whole database's time, per trigger. Not 15 %: numerical.nan_loss still checks `number of nan iterations: N`,
# a field of every Megatron iteration line (35 % of these lines), and measures 12-19 % here (was 35 %).
SHARE_LIMIT = 0.20
SCREEN = 0.05  # a trigger whose cost alone is below this share of the whole database's time is not re-measured
ROUNDS = 5


def near_miss_buffer() -> bytes:
    """~8 MB of ordinary lines from 8 ranks (both prefix layouts), none of which any trigger may hit."""
    lines: list[str] = []
    for rank in (0, 1, 7, 15, 100, 255, 31, 64):
        _, prefix = layout(rank)
        for c in range(60):
            lines += _ordinary(rank, prefix, c, 3 * 3600 + c * 8, "IIIIIIINNNNNNLLLLMMM", f"node{rank // 8:02d}", 4242)
    return "".join(lines).encode() * 12


def _db(exprs: list[bytes]):
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=[0] * len(exprs))
    return db


def _times(dbs: list, buf: bytes, rounds: int = ROUNDS) -> list[float]:
    """The minimum scan time of each database over interleaved rounds."""
    best = [float("inf")] * len(dbs)
    for _ in range(rounds):
        for i, db in enumerate(dbs):
            t0 = time.perf_counter()
            db.scan(buf, match_event_handler=lambda *_: None)
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def marginal_shares(buf: bytes, ids: list[str]) -> dict[str, float]:
    """Per pattern id: (whole database's time - time without that trigger) / whole database's time."""
    pats = patterns()
    full = _db([p.trigger.encode() for p in pats])
    without = [_db([p.trigger.encode() for p in pats if p.id != i]) for i in ids]
    t = _times([full, *without], buf)
    return {i: (t[0] - tw) / t[0] for i, tw in zip(ids, t[1:])}


@pytest.fixture(scope="module")
def buf() -> bytes:
    return near_miss_buffer()


def test_no_trigger_hits_an_ordinary_line(buf):
    """Near-misses must stay misses: a hit would cost Python work per line (the scan verifies every candidate)."""
    pats = patterns()
    hits: list[int] = []
    _db([p.trigger.encode() for p in pats]).scan(buf[: len(buf) // 12], match_event_handler=lambda i, *_: hits.append(i))
    assert sorted({pats[i].id for i in hits}) == []


def test_no_trigger_costs_more_than_its_share(buf):
    pats = patterns()
    floor, *alone = _times([_db([b"qzxjqzxjqzxj"])] + [_db([p.trigger.encode()]) for p in pats], buf, rounds=2)
    full = _times([_db([p.trigger.encode() for p in pats])], buf)[0]
    suspects = [p.id for p, t in zip(pats, alone) if (t - floor) / full > SCREEN]
    assert len(suspects) < len(pats) // 2, "the screen measured nothing: the buffer is too small to time"
    over = {i: s for i, s in marginal_shares(buf, suspects).items() if s > SHARE_LIMIT}
    if over:  # re-measure before failing: one descheduled round must not fail the suite
        over = {i: s for i, s in marginal_shares(buf, list(over)).items() if s > SHARE_LIMIT}
    assert over == {}, f"triggers over {SHARE_LIMIT:.0%} of the database's time on near-miss lines: {over}"


def test_the_cost_check_sees_a_costly_trigger(buf):
    """The measurement is not blind: the old nan_loss trigger (a near-miss per `lm loss:` line) costs far more
    than the literal-anchored one that replaced it."""
    old = r"(?:[Ll]oss[ a-z_]*'?(?::|=) ?(?:tensor\()?-?(?:nan|NaN|NAN|inf|Inf|INF)\b)"
    # the same alternative in the current trigger (the loss-value forms, without the other two alternatives)
    new = patterns()[[p.id for p in patterns()].index("numerical.nan_loss")].trigger
    new = "(?:" + new.split("|", 1)[1].split("|number of nan iterations")[0] + ")"
    base = [p.trigger.encode() for p in patterns() if p.id != "numerical.nan_loss"]
    t_base, t_old, t_new = _times([_db(base), _db(base + [old.encode()]), _db(base + [new.encode()])], buf)
    assert t_old - t_base > 2 * max(t_new - t_base, 0.02 * t_base)


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
