"""By-hand benchmark of the catalog's triggers (issue 16): no single trigger may dominate Hyperscan's time on ordinary
log lines. `python -m trainlog_debugger.eval.bench.triggers [--limit 0.25] [--strict]`.

Why a benchmark and not a test: the measure is a time, and a time taken on a busy 2-core CI runner is noise (a
descheduled round once measured the database without a group as slower than with it). Tests keep what does not
depend on the clock (tests/sources/test_trigger_cost.py: no trigger hits an ordinary line; every `verify` narrows its
trigger); this script times, on a quiet machine, what a new trigger costs.

How: Hyperscan scans all triggers at once; its cost on text that matches nothing comes from near-misses, where a
trigger's literal factor occurs and the rest must be confirmed (`numerical.nan_loss` as `[Ll]oss[ a-z_]*: nan`
confirmed one on every Megatron `lm loss:` line: 35 % of the database's time). A trigger's cost is its marginal
cost: the whole database's scan time minus the time without it, on ~8 MB of realistic near-miss lines (the
formats of FORMATS.md as eval/bench/logs.py generates them), the minimum of ROUNDS interleaved repetitions. Groups
first: the catalog is left out GROUP triggers at a time, and only a group over the limit is measured trigger by
trigger (a group costs at least as much as any member; compiling the catalog once per trigger takes a minute). A
trigger's cost alone is no screen: a one-pattern database uses another literal matcher.

The run also shows that the measure is not blind: the group holding numerical.nan_loss costs a visible share, and
the old nan_loss trigger costs more than the literal-anchored one that replaced it, and `StopIteration` (which ends
as `iteration` does, three times per Megatron line) more than its prefix `StopIter`.
"""

from __future__ import annotations

import argparse
import sys
import time

from trainlog_debugger.eval.bench.logs import _ordinary, layout
from trainlog_debugger.tools.sources import patterns

# of the whole database's time, per trigger. numerical.nan_loss still checks `number of nan iterations: N`, a field
# of every Megatron iteration line: 15-18 % of the database on a quiet machine.
SHARE_LIMIT = 0.25
GROUP = 10
ROUNDS = 5
OLD_NAN = r"(?:[Ll]oss[ a-z_]*'?(?::|=) ?(?:tensor\()?-?(?:nan|NaN|NAN|inf|Inf|INF)\b)"


def near_miss_buffer(repeat: int = 4) -> bytes:
    """~2 MB x `repeat` of ordinary lines from 8 ranks (both prefix layouts), none of which any trigger may hit."""
    lines: list[str] = []
    for rank in (0, 1, 7, 15, 100, 255, 31, 64):
        _, prefix = layout(rank)
        for c in range(60):
            lines += _ordinary(rank, prefix, c, 3 * 3600 + c * 8, "IIIIIIINNNNNNLLLLMMM", f"node{rank // 8:02d}", 4242)
    return "".join(lines).encode() * repeat


def compile_db(exprs: list[bytes]):
    import hyperscan as hs
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=[0] * len(exprs))
    return db


def best_times(dbs: list, buf: bytes, rounds: int = ROUNDS) -> list[float]:
    """The minimum scan time of each database over interleaved rounds."""
    best = [float("inf")] * len(dbs)
    for _ in range(rounds):
        for i, db in enumerate(dbs):
            t0 = time.perf_counter()
            db.scan(buf, match_event_handler=lambda *_: None)
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def marginal_shares(buf: bytes, groups: list[tuple[str, ...]], rounds: int = ROUNDS) -> dict[tuple[str, ...], float]:
    """Per group of pattern ids: (whole database's time - time without them) / whole database's time."""
    pats = patterns()
    full = compile_db([p.trigger.encode() for p in pats])
    without = [compile_db([p.trigger.encode() for p in pats if p.id not in g]) for g in groups]
    t = best_times([full, *without], buf, rounds)
    return {g: (t[0] - tw) / t[0] for g, tw in zip(groups, t[1:])}


def costly_triggers(buf: bytes, limit: float = SHARE_LIMIT) -> dict[str, float]:
    """The triggers over `limit` of the database's time: groups, then the members of costly groups, re-measured."""
    ids = [p.id for p in patterns()]
    groups = [tuple(ids[i:i + GROUP]) for i in range(0, len(ids), GROUP)]
    costly = [g for g, share in marginal_shares(buf, groups).items() if share > limit]
    over = {g[0]: s for g, s in marginal_shares(buf, [(i,) for g in costly for i in g]).items() if s > limit}
    if over:  # measured again: one descheduled round must not name a trigger
        over = {g[0]: s for g, s in marginal_shares(buf, [(i,) for i in over]).items() if s > limit}
    return over


def added_cost(buf: bytes, base: list[bytes], extra: bytes) -> float:
    """What adding `extra` to `base` costs, as a share of `base`'s time."""
    t_base, t_extra = best_times([compile_db(base), compile_db(base + [extra])], buf)
    return (t_extra - t_base) / t_base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=float, default=SHARE_LIMIT, help="largest share of the database's time a "
                                                                       "trigger may take (default %(default)s)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a trigger is over the limit or a self-check "
                                                          "does not see what it should")
    a = ap.parse_args(argv)
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        print("hyperscan is not installed here: nothing to time", file=sys.stderr)
        return 2
    buf = near_miss_buffer()
    pats = patterns()
    ids = [p.id for p in pats]
    print(f"{len(pats)} triggers, {len(buf) / 1e6:.1f} MB of near-miss lines, min of {ROUNDS} rounds")
    over = costly_triggers(buf, a.limit)
    for pid, share in sorted(over.items(), key=lambda x: -x[1]):
        print(f"  OVER  {pid}: {share:.1%} of the database's time (limit {a.limit:.0%})")
    if not over:
        print(f"  no trigger over {a.limit:.0%} of the database's time")
    # the measure is not blind
    g = tuple(ids[ids.index("numerical.nan_loss") // GROUP * GROUP:][:GROUP])
    share = marginal_shares(buf, [g])[g]
    new = pats[ids.index("numerical.nan_loss")].trigger
    new = "(?:" + new.split("|", 1)[1].split("|number of nan iterations")[0] + ")"
    base = [p.trigger.encode() for p in pats if p.id != "numerical.nan_loss"]
    old_x, new_x = added_cost(buf, base, OLD_NAN.encode()), added_cost(buf, base, new.encode())
    hand = [p.trigger.encode() for p in pats if p.id != "python.stop_iteration" and not p.id.startswith("upstream.")
            and p.id != "generic.error_line"]
    stop_x, prefix_x = added_cost(buf, hand, b"StopIteration"), added_cost(buf, hand, b"StopIter")
    checks = [(share > 0.03, f"the group of numerical.nan_loss costs {share:.1%} (visible: > 3 %)"),
              (old_x > 2 * max(new_x, 0.02), f"the old nan_loss trigger adds {old_x:.1%}, the current {new_x:.1%}"),
              (stop_x > 2 * max(prefix_x, 0.02), f"`StopIteration` adds {stop_x:.1%}, `StopIter` {prefix_x:.1%}")]
    for ok, line in checks:
        print(f"  {'ok  ' if ok else 'MISS'}  {line}")
    return 1 if a.strict and (over or not all(ok for ok, _ in checks)) else 0


if __name__ == "__main__":
    sys.exit(main())
