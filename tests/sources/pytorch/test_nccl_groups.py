"""`debugger nccl` speaks in groups (schema_version 2): ranks grouped by their NCCL state, the rank that never
entered the collective as a group of its own with its own line, rank lists as exact range sets, the per-rank map
only with --per-rank. On the bench's cascade (the exact PyTorch lines of eval/bench/logs.py, generated small in
tmp_path) and on a bundled case whose culprit has no collective state at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from trainlog_debugger.agent.render.text import render_nccl
from trainlog_debugger.eval.bench.logs import generate
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.groups import SCHEMA_VERSION, parse_rank_set, per_rank_listing
from trainlog_debugger.tools.jsonable import dumps, fields_jsonable
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.sources.pytorch.collectives import analyze

CASES = Path(__file__).resolve().parents[3] / "cases"


def _cascade(tmp_path: Path, ranks: int):
    root, man = generate(tmp_path, 0.001, seed=7, ranks=ranks, scenario="cascade")
    with open_bundle(root) as b:
        return analyze(scan_bundle(b)), man["plan"]["culprit"]


def _json(rep) -> dict:
    return json.loads(dumps(rep.to_json()))


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [64, 512])
def test_cascade_groups_the_waiting_ranks_and_isolates_the_culprit(tmp_path, ranks):
    rep, culprit = _cascade(tmp_path, ranks)
    d = _json(rep)
    assert d["schema_version"] == SCHEMA_VERSION == 2 and "ranks" not in d
    assert (d["verdict"], d["culprits"], d["culprit_count"]) == ("straggler", str(culprit), 1)
    own, rest = d["rank_groups"]
    # the rank that never entered: alone, enqueued == completed, its own line as the exemplar
    assert (own["ranks"], own["rank_count"], own["facts"]["role"]) == (str(culprit), 1, "never_entered")
    pg = own["facts"]["pgs"][0]
    assert pg["enqueued"] == pg["completed"] and pg["notified"] and not pg["self_detected"]
    assert own["exemplars"] and {e["rank"] for e in own["exemplars"]} == {culprit}
    assert "Observed flight recorder dump signal" in own["exemplars"][0]["text"]
    # every other rank: one group, the exact set, first and last exemplars from different ranks
    assert parse_rank_set(rest["ranks"]) == [r for r in range(ranks) if r != culprit]
    assert rest["rank_count"] == ranks - 1 and rest["facts"]["role"] == "waiting"
    assert rest["facts"]["pgs"][0]["enqueued"] == rest["facts"]["pgs"][0]["completed"] + 1
    assert len({e["rank"] for e in rest["exemplars"]}) == 2 and culprit not in {e["rank"] for e in rest["exemplars"]}
    assert rest["first_time"] <= rest["last_time"]
    # the process group's roles and the rows are range sets; the culprit keeps its cited lines
    assert d["groups"][0]["roles"] == {"waiting": rest["ranks"], "never_entered": str(culprit)}
    assert d["groups"][0]["role_counts"] == {"waiting": ranks - 1, "never_entered": 1}
    assert [(r["ranks"], r["rank_count"]) for r in d["rows"]] == [(str(culprit), 1), (rest["ranks"], ranks - 1)]
    assert d["culprit_ranks"][0]["rank"] == culprit and all(e["rank"] == culprit for e in d["culprit_ranks"][0]["evidence"])


def test_cascade_json_does_not_grow_with_ranks(tmp_path):
    sizes = [len(dumps(_cascade(tmp_path / str(n), n)[0].to_json())) for n in (64, 512)]
    assert sizes[1] < 1.1 * sizes[0] and sizes[1] < 20_000


def test_per_rank_restores_the_rank_map(tmp_path):
    rep, culprit = _cascade(tmp_path, 64)
    with per_rank_listing():
        d = _json(rep)
    old = json.loads(dumps(fields_jsonable(rep)))     # what `nccl --json` printed before schema_version 2
    assert d["ranks"] == old["ranks"] and len(d["ranks"]) == 64
    assert d["ranks"][str(culprit)]["role"] == "never_entered"
    assert "rank_groups" in d and d["schema_version"] == 2


def test_case_rank_without_any_state_is_its_own_group():
    """gen-128r-026: rank 2 never entered the tp group's collective and logged no collective state at all; the
    tp group's other ranks and the data-parallel ranks wait in two different process groups."""
    with open_bundle(CASES / "gen-128r-026") as b:
        rep = analyze(scan_bundle(b))
    d = _json(rep)
    by = {g["ranks"]: g for g in d["rank_groups"]}
    assert set(by) == {"2", "0-7 except 2", "8-127"}
    two = by["2"]
    assert two["facts"]["role"] == "never_entered" and two["facts"]["pgs"] == []
    assert [e["rank"] for e in two["exemplars"]] == [2] and "no collective state" in two["template"]
    assert by["0-7 except 2"]["facts"]["pgs"][0]["desc"] == "tp"
    assert by["8-127"]["facts"]["pgs"][0]["desc"] == "default_pg"
    assert d["culprits"] == "2" and d["missing_ranks"] == "-" and d["missing_count"] == 0


def test_text_fits_a_screen_at_80_columns(tmp_path):
    rep, culprit = _cascade(tmp_path, 512)
    con = Console(record=True, width=80)
    render_nccl(rep, con)
    text = con.export_text()
    assert len(text.splitlines()) <= 25
    assert f"0-511 except {culprit}" in text and f"culprit rank {culprit}" in text
    assert f"node{culprit // 8:02d}/rank_{culprit}.log:" in text  # the culprit's own line, cited
