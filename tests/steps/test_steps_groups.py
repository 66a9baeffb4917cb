"""`debugger steps --json` speaks in groups (schema_version 2): per metric the ranks within the band as one group
with its spread, each straggler as a group of its own with its sampled series and its own line, the ranks whose
own series shifted; the per-series listing only with --per-rank. On the bundled slow-rank cases and on generic
`step N | time X` lines where a few ranks slow down mid-run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from rich.console import Console

from trainlog_debugger.agent.render.steps import render_steps
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.groups import parse_rank_set, per_rank_listing
from trainlog_debugger.tools.jsonable import dumps
from trainlog_debugger.tools.steps.analyze import scan_steps
from trainlog_debugger.tools.steps.report import MAX_SAMPLE

CASES = Path(__file__).resolve().parents[2] / "cases"


def _steps(root):
    with open_bundle(str(root)) as b:
        return scan_steps(b, workers=1)


@pytest.mark.parametrize("case, slow, ranks", [("gen-slow-16r-a", 5, 16), ("gen-slow-128r-b", 77, 128)])
def test_straggler_stands_out_from_the_band(case, slow, ranks):
    rep = _steps(CASES / case)
    d = json.loads(dumps(rep.to_json()))
    assert d["schema_version"] == 2 and "series" not in d and d["series_count"] == len(rep.series)
    kinds = {(g["kind"], g["metric"]): g for g in d["series_groups"]}
    st = kinds[("straggler", "forward_backward_ms")]
    band = kinds[("band", "forward_backward_ms")]
    assert (st["ranks"], st["rank_count"]) == (str(slow), 1)
    assert st["median"] > 1.3 * band["median"] and st["gap"] == round(rep.outliers[0].gap, 4)
    assert 2 <= len(st["sample"]) <= MAX_SAMPLE and st["sample"][0][0] == st["first_iteration"]
    assert st["sample"][-1][0] == st["last_iteration"]
    assert st["exemplars"] and {e["rank"] for e in st["exemplars"]} == {slow}
    assert parse_rank_set(band["ranks"]) == [r for r in range(ranks) if r != slow]
    assert band["p10"] <= band["median"] <= band["p90"] and band["max"] < st["median"]
    assert all(e["rank"] != slow for e in band["exemplars"])     # the peer line the straggler's claim cites
    assert kinds[("unranked", "iteration_ms")]["rank_count"] == 0   # Megatron's iteration line: the last rank's


def test_per_rank_restores_the_series():
    rep = _steps(CASES / "gen-slow-16r-a")
    with per_rank_listing():
        d = json.loads(dumps(rep.to_json()))
    assert len(d["series"]) == len(rep.series) and "series_groups" in d
    s0 = d["series"][1]
    assert set(s0) == {"rank", "node", "metric", "fmt", "source", "points", "dropped", "median", "first_iteration",
                       "last_iteration"}
    assert s0["points"] == len(rep.series[1].ms)


def _generic_run(root: Path, ranks: int, shifted: set[int], at: int, steps: int = 120) -> None:
    """Per-rank files of `step N | loss L | time Xs` lines; the `shifted` ranks run 1.8× slower from step `at`."""
    rng = random.Random(3)
    root.mkdir(parents=True)
    for r in range(ranks):
        lines = []
        for st in range(steps):
            v = 0.5 * (1.8 if r in shifted and st >= at else 1.0) * (1 + rng.gauss(0, 0.01))
            lines.append(f"[rank{r}]: 2024-05-01 10:{st // 60:02d}:{st % 60:02d} INFO step {st} | loss 2.31 | "
                         f"time {v:.3f}s\n")
        (root / f"rank_{r}.log").write_text("".join(lines))


def test_ranks_that_shifted_are_a_group(tmp_path):
    _generic_run(tmp_path / "job", 32, {3, 4}, at=90)
    rep = _steps(tmp_path / "job")
    d = json.loads(dumps(rep.to_json()))
    reg = next(r for r in d["regressions"] if r["scope"] == "ranks")
    assert (reg["ranks"], reg["rank_count"]) == ("3-4", 2)
    groups = {g["kind"]: g for g in d["series_groups"]}
    assert groups["shifted"]["ranks"] == "3-4" and abs(groups["shifted"]["iteration"] - 90) <= 2
    assert groups["shifted"]["exemplars"] and {e["rank"] for e in groups["shifted"]["exemplars"]} <= {3, 4}
    assert groups["band"]["ranks"] == "0-31 except 3-4" and groups["band"]["rank_count"] == 30
    con = Console(record=True, width=80)
    render_steps(rep, con)
    text = con.export_text()
    assert "shifted at iteration" in text and "0-31 except 3-4 (30)" in text
