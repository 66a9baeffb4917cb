"""No single catalog trigger may dominate the engine's time on ordinary log lines (issue 16).

Why: Hyperscan scans all triggers at once; its cost on text that matches nothing comes from near-misses, where a
trigger's literal factor occurs and the rest must be confirmed. `numerical.nan_loss` (`[Ll]oss[ a-z_]*: nan`)
confirmed one on every Megatron `lm loss:` line and cost 35 % of the whole database's time. A trigger's cost here
is its marginal cost: the whole database's scan time minus the time without it, on a few thousand realistic
near-miss lines (Megatron iteration lines, NCCL INFO channel/tree lines, c10d warnings, memory reports: the
formats of FORMATS.md as the benchmark generates them). Robust to a slow or loaded machine: only ratios of times
taken in the same interleaved rounds, the minimum of several repetitions, a candidate over the limit re-measured
before it fails. Groups first: the catalog is left out ten triggers at a time, and only a group that costs more
than the limit is measured trigger by trigger (a group costs at least as much as any of its members; compiling
the catalog once per trigger would take a minute). A trigger's cost alone is no screen: a one-pattern database
uses another literal matcher and costs 20-40 % of the whole for most triggers.
"""

from __future__ import annotations

import re
import time

import pytest

from trainlog_debugger.eval.bench.logs import _hit_line, _ordinary, layout
from trainlog_debugger.tools.sources import patterns

hs = pytest.importorskip("hyperscan")

# of the whole database's time, per trigger. Not 15 %: numerical.nan_loss still checks `number of nan iterations: N`,
# a field of every Megatron iteration line (35 % of these lines): 15-18 % of the database. Its loss forms cost ~5 %;
# the rest is one literal confirm per iteration line (was 35 % with `[Ll]oss[ a-z_]*: nan`, 25 % with `: +[1-9]`;
# bounding the count's padding to Megatron's 1-3 spaces let Hyperscan keep the digit in its literals). A share
# grows as the rest of the database gets cheaper (python.stop_iteration's near-misses were 12-17 % of it).
SHARE_LIMIT = 0.25
GROUP = 10
ROUNDS = 5


def near_miss_buffer() -> bytes:
    """~8 MB of ordinary lines from 8 ranks (both prefix layouts), none of which any trigger may hit."""
    lines: list[str] = []
    for rank in (0, 1, 7, 15, 100, 255, 31, 64):
        _, prefix = layout(rank)
        for c in range(60):
            lines += _ordinary(rank, prefix, c, 3 * 3600 + c * 8, "IIIIIIINNNNNNLLLLMMM", f"node{rank // 8:02d}", 4242)
    return "".join(lines).encode() * 4


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


def marginal_shares(buf: bytes, groups: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """Per group of pattern ids: (whole database's time - time without them) / whole database's time."""
    pats = patterns()
    full = _db([p.trigger.encode() for p in pats])
    without = [_db([p.trigger.encode() for p in pats if p.id not in g]) for g in groups]
    t = _times([full, *without], buf)
    return {g: (t[0] - tw) / t[0] for g, tw in zip(groups, t[1:])}


@pytest.fixture(scope="module")
def buf() -> bytes:
    return near_miss_buffer()


def test_no_trigger_hits_an_ordinary_line(buf):
    """Near-misses must stay misses: a hit would cost Python work per line (the scan verifies every candidate)."""
    pats = patterns()
    hits: list[int] = []
    _db([p.trigger.encode() for p in pats]).scan(buf[: len(buf) // 4], match_event_handler=lambda i, *_: hits.append(i))
    assert sorted({pats[i].id for i in hits}) == []


@pytest.mark.slow
def test_no_trigger_costs_more_than_its_share(buf):
    ids = [p.id for p in patterns()]
    groups = [tuple(ids[i:i + GROUP]) for i in range(0, len(ids), GROUP)]
    costly = [g for g, share in marginal_shares(buf, groups).items() if share > SHARE_LIMIT]
    over = {g[0]: s for g, s in marginal_shares(buf, [(i,) for g in costly for i in g]).items() if s > SHARE_LIMIT}
    if over:  # re-measure before failing: one descheduled round must not fail the suite
        over = {g[0]: s for g, s in marginal_shares(buf, [(i,) for i in over]).items() if s > SHARE_LIMIT}
    assert over == {}, f"triggers over {SHARE_LIMIT:.0%} of the database's time on near-miss lines: {over}"


def test_the_groups_see_the_costly_group(buf):
    """The group step is not blind: the group holding numerical.nan_loss still costs a measurable share. Measured
    as the rest of this file is, over the whole catalog; the share shrinks as the database grows (issue 25 added the
    last resort and the table triggers), so "measurable" is 3 %, not the 5 % of a smaller database."""
    ids = [p.id for p in patterns()]
    g = tuple(ids[ids.index("numerical.nan_loss") // GROUP * GROUP:][:GROUP])
    # measured again before failing, as the slow check does: one descheduled round on a busy CI runner measured the
    # database without the group as slower than with it (a share of -0.8 % where it is 5.5 % on a quiet machine)
    shares = [marginal_shares(buf, [g])[g]]
    while shares[-1] <= 0.03 and len(shares) < 3:
        shares.append(marginal_shares(buf, [g])[g])
    assert max(shares) > 0.03, shares


def test_the_cost_check_sees_a_costly_trigger(buf):
    """The measurement is not blind: the old nan_loss trigger (a near-miss per `lm loss:` line) costs far more
    than the literal-anchored one that replaced it."""
    old = r"(?:[Ll]oss[ a-z_]*'?(?::|=) ?(?:tensor\()?-?(?:nan|NaN|NAN|inf|Inf|INF)\b)"
    # the same alternative in the current trigger (the loss-value forms, without the other two alternatives)
    new = patterns()[[p.id for p in patterns()].index("numerical.nan_loss")].trigger
    new = "(?:" + new.split("|", 1)[1].split("|number of nan iterations")[0] + ")"
    base = [p.trigger.encode() for p in patterns() if p.id != "numerical.nan_loss"]
    assert _costs_more(buf, base, old.encode(), new.encode())


def _costs_more(buf: bytes, base: list[bytes], costly: bytes, cheap: bytes, tries: int = 3) -> bool:
    """Whether adding `costly` to the database costs over twice what adding `cheap` does (and over 4 % of the
    database), in any of `tries` measurements: one descheduled round must not fail the suite."""
    dbs = [_db(base), _db(base + [costly]), _db(base + [cheap])]
    for _ in range(tries):
        t_base, t_costly, t_cheap = _times(dbs, buf)
        if t_costly - t_base > 2 * max(t_cheap - t_base, 0.02 * t_base):
            return True
    return False


@pytest.mark.slow
def test_a_literal_ending_like_common_words_costs_more_than_its_prefix(buf):
    """Hyperscan's literal matcher keys on a literal's last bytes: `StopIteration` ends as `iteration` does, three
    times in every Megatron iteration line, and each such spot is a near-miss to confirm; the prefix `StopIter`
    (python.stop_iteration's trigger, `verify` holds the word) has no such twin. The measurement sees it."""
    # against the hand-written catalog: the generated table triggers and the last resort dilute one literal's
    # increment below what a 2-core VM can time reliably (their own costs are bounded by the share test above)
    base = [p.trigger.encode() for p in patterns() if p.id != "python.stop_iteration"
            and not p.id.startswith("upstream.") and p.id != "generic.error_line"]
    assert _costs_more(buf, base, b"StopIteration", b"StopIter")


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
