"""trainlog_debugger.eval.score: the culprit, time and grounding edge cases, totals, and what counts as a regression."""

from __future__ import annotations

import pytest

from trainlog_debugger.eval.cases import Truth
from trainlog_debugger.eval.score import (
    beats,
    failed_scores,
    culprit_score,
    grounding,
    per_tag,
    regressions,
    score,
    time_delta,
    totals,
    trigger_time,
)
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Diagnosis, Evidence, Finding, Role, Status


# -- culprit ------------------------------------------------------------------------------------------------
def test_exact_culprit_scores_one():
    assert culprit_score([3], ["node-a"], [3], ["node-a"]) == 1.0


def test_missed_culprit_scores_zero_whatever_else_was_blamed():
    assert culprit_score([3], [], [4], []) == 0.0
    assert culprit_score([3, 5], [], [3], []) == 0.0          # one of two missed
    assert culprit_score([3], ["node-a"], [3], ["node-b"]) == 0.0  # the node missed
    assert culprit_score([3], [], [], []) == 0.0              # nothing blamed


def test_blaming_every_rank_scores_low():
    s = culprit_score([5], [], list(range(1024)), [])
    assert 0 < s < 0.01
    assert culprit_score([5], [], [4, 5], []) == 0.5


def test_empty_truth_is_skipped():
    assert culprit_score([], [], [1, 2], ["x"]) is None
    assert culprit_score([], [], [], []) is None


def test_node_names_compare_case_insensitively():
    assert culprit_score([], ["DGK713"], [], ["dgk713"]) == 1.0


def test_kinds_the_truth_does_not_state_are_not_counted():
    # the truth names a node only: naming the rank on it as well is more specific, not wrong
    assert culprit_score([], ["dgk713"], [3], ["dgk713"]) == 1.0
    # the truth names a rank only: the node of that rank is not a false blame
    assert culprit_score([5], [], [5], ["gpu-node-18"]) == 1.0
    # but blaming more nodes than the truth's lowers precision
    assert culprit_score([], ["a"], [], ["a", "b", "c", "d"]) == 0.25


# -- time ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("truth,got,delta", [
    ("2024-11-05T12:04:45", "--11-05T12:04:45.000000", 0.0),        # no year on one side: ignored
    ("2024-11-05T12:04:45", "--11-05T12:05:45.500000", 60.5),
    ("2024-11-05T12:04:45", "2023-11-05T12:04:45.000000", 0.0 + 366 * 86400),  # both have a year: it counts
    ("2024-11-05T12:04:45+00:00", "2024-11-05T13:04:50+01:00", 5.0),  # both zoned: compared in UTC
    ("2024-11-05T12:04:45", "2024-11-05T13:04:45+01:00", 3600.0),     # one zoned: wall clocks
    ("2024-11-05T23:59:50", "T00:00:10.000000", 20.0),                # no date: time of day, across midnight
    ("--02-29T00:00:00", "--02-29T00:00:30", 30.0),
])
def test_time_delta(truth, got, delta):
    assert time_delta(truth, got) == pytest.approx(delta)


def test_time_skipped_when_either_side_is_missing_or_unparseable():
    assert time_delta(None, "--11-05T12:04:45") is None
    assert time_delta("2024-11-05T12:04:45", None) is None
    assert time_delta("2024-11-05T12:04:45", "uptime+12.000000s") is None


# -- scoring one diagnosis ----------------------------------------------------------------------------------
LINES = ["[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",
         "[E1105 12:04:45.000000 1 ProcessGroupNCCL.cpp:1] watchdog timeout"]


def _ev(line: int, text: str | None = None, iso: str | None = None) -> Evidence:
    return Evidence(file="rank_3.log", line=line, text=LINES[line - 1] if text is None else text,
                    time={"iso": iso, "has_date": True} if iso else None)


def _diag(evs: list[Evidence], **kw) -> Diagnosis:
    f = Finding(id="x", summary="x", role=Role.root_candidate, evidence=evs)
    return Diagnosis(**({"status": Status.crashed, "category": "gpu_cuda", "culprit_ranks": [3], "chain": [f]} | kw))


@pytest.fixture
def bundle(tmp_path):
    (tmp_path / "rank_3.log").write_text("\n".join(LINES) + "\n")
    with open_bundle(tmp_path) as b:
        yield b


def test_grounding_counts_lines_that_exist_verbatim(bundle):
    assert grounding(_diag([_ev(1), _ev(2)]), bundle)[:2] == (1.0, 2)
    g, n, problems = grounding(_diag([_ev(1), _ev(2, "watchdog timeout (paraphrased)"), _ev(9, "x")]), bundle)
    assert (round(g, 3), n) == (0.333, 3) and len(problems) == 2
    wrong_file = _diag([Evidence(file="other.log", line=1, text=LINES[0])])
    assert grounding(wrong_file, bundle)[0] == 0.0


def test_score_of_one_case(bundle):
    t = Truth(category="gpu_cuda", culprit_ranks=(3,), first_failure_time="2024-11-05T12:05:30")
    s = score(t, _diag([_ev(1, iso="--11-05T12:04:45.000000")]), bundle)
    assert s["category"] is True and s["culprit"] == 1.0 and s["time"] is True and s["time_delta_s"] == 45.0
    assert s["grounding"] == 1.0 and s["control"] is None
    late = _diag([_ev(2, iso="--11-05T12:34:45.000000")])
    assert score(t, late, bundle)["time"] is False
    assert trigger_time(_diag([_ev(1)])) is None
    untimed = score(t, _diag([_ev(1)]), bundle)
    assert untimed["time"] is None and untimed["time_skipped"] == "no trigger time"  # skipped, and said why
    assert score(Truth(category="gpu_cuda"), late, bundle)["time_skipped"] == "no truth time"


def test_control_false_alarm(bundle):
    control = Truth(category="none", tags=("control",))
    assert control.is_control
    assert score(control, _diag([_ev(1)]), bundle)["control"] is False
    assert score(control, Diagnosis(status=Status.completed, category="none"), bundle)["control"] is True
    cancel = Truth(category="infrastructure", tags=("control", "scheduler"))
    ok = Diagnosis(status=Status.cancelled, category="infrastructure")
    assert score(cancel, ok, bundle)["control"] is True


# -- totals and regressions ---------------------------------------------------------------------------------
def _row(cid, cat=True, cul=None, tim=None, gro=1.0, ctl=None, tags=(), err=None):
    return {"id": cid, "tags": list(tags), "runtime_s": 0.5, "error": err,
            "scores": {"category": cat, "culprit": cul, "time": tim, "grounding": gro, "cited": 1, "control": ctl}}


def test_totals_skip_unscored_dimensions():
    rows = [_row("a", True, 1.0, True, tags=["x"]), _row("b", False, 0.0, None, 0.5, tags=["x", "y"]),
            _row("c", True, None, False, ctl=True)]
    t = totals(rows)
    assert t["cases"] == 3 and t["category_accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert (t["culprit_mean"], t["culprit_scored"], t["culprit_skipped"]) == (0.5, 2, 1)
    assert (t["time_accuracy"], t["time_scored"], t["time_skipped"]) == (0.5, 2, 1)
    assert (t["time_skipped_no_truth"], t["time_skipped_no_trigger"]) == (1, 0)
    assert (t["grounding_min"], t["control_pass_rate"], t["controls"]) == (0.5, 1.0, 1)
    tags = per_tag(rows)
    assert list(tags) == ["x", "y", "(untagged)"] and tags["x"]["cases"] == 2


def test_beats():
    b = beats({"category_accuracy": 0.9, "culprit_mean": 0.5, "grounding_min": 1.0},
              {"category_accuracy": 0.2, "culprit_mean": 0.6, "grounding_min": 1.0})
    assert (b["category_accuracy"], b["culprit_mean"], b["grounding_min"], b["time_accuracy"]) == (
        "better", "worse", "tie", None)


def test_regressions_every_dimension_and_missing_cases():
    old = {"cases": [_row("a", True, 1.0, True, 1.0, True), _row("b"), _row("gone", tags=["t"])]}
    new = {"cases": [_row("a", False, 0.5, False, 0.9, False), _row("b"), _row("new", False)]}
    regs = regressions(old, new)
    assert {(r["id"], r["dimension"]) for r in regs} == {
        ("a", "category"), ("a", "culprit"), ("a", "time"), ("a", "grounding"), ("a", "control"), ("gone", "case")}
    assert regressions(old, old) == []
    better = {"cases": [_row("a", True, 1.0, True, 1.0, True), _row("b"), _row("gone")]}
    assert regressions({"cases": [_row("a", False, 0.0, False, 0.5, False), _row("b"), _row("gone")]}, better) == []
    # with a tag filter, only stored cases with that tag are expected in the run
    assert [r["id"] for r in regressions(old, {"cases": []}, ["t"])] == ["gone"]
    crashed = {"cases": [_row("a", True, 1.0, True, 1.0, True), _row("b", err="boom"), _row("gone")]}
    assert [(r["id"], r["dimension"]) for r in regressions(old, crashed)] == [("b", "error")]


def test_origin_comes_from_the_tags_and_real_is_listed_first():
    from trainlog_debugger.eval.score import origin, per_origin
    assert origin(["hang", "generated"]) == "generated" and origin(["lab"]) == "lab" and origin([]) == "real"
    rows = [{"tags": ["generated"], "control": False, "error": None,
             "scores": {"category": True, "culprit": None, "time": None, "grounding": 1.0, "control": None}},
            {"tags": [], "control": False, "error": None,
             "scores": {"category": False, "culprit": None, "time": None, "grounding": 1.0, "control": None}}]
    got = per_origin(rows)
    assert list(got) == ["real", "generated"]
    assert got["real"]["category_accuracy"] == 0.0 and got["generated"]["category_accuracy"] == 1.0


def test_a_second_defensible_label_counts_and_the_all_clears_are_counted_apart(bundle):
    t = Truth(category="oom", category_accept=("infrastructure",), split="dev")
    assert score(t, _diag([_ev(1)], category="infrastructure"), bundle)["category"] is True
    assert score(t, _diag([_ev(1)], category="software"), bundle)["category"] is False
    done = score(t, Diagnosis(status=Status.completed, category="none"), bundle)
    assert done["all_clear"] is True and done["no_fault"] is False
    nothing = score(t, Diagnosis(status=Status.inconclusive, category="none"), bundle)
    assert nothing["all_clear"] is False and nothing["no_fault"] is True
    assert score(Truth(category="none"), Diagnosis(status=Status.completed, category="none"), bundle)["all_clear"] is None
    refused = failed_scores(t, "BundleError: no training-job logs recognised in /x")
    assert refused["refused"] is True and failed_scores(t, "ValueError: bug")["refused"] is False
    # a refusal cites nothing: no grounding to score (it fails category and is counted); a crash fails grounding
    assert refused["grounding"] is None and refused["category"] is False
    assert failed_scores(t, "ValueError: bug")["grounding"] == 0.0
    rows = [{"scores": refused, "error": "BundleError: x"}, {"scores": score(t, _diag([_ev(1)]), bundle)}]
    tot = totals(rows)
    assert tot["grounding_min"] == 1.0 and tot["refused"] == 1 and tot["errors"] == 1


def test_real_incidents_are_split_into_test_then_dev():
    from trainlog_debugger.eval.score import per_origin
    row = {"tags": [], "control": False, "error": None,
           "scores": {"category": True, "culprit": None, "time": None, "grounding": 1.0, "control": None,
                      "all_clear": False, "no_fault": True, "refused": False}}
    got = per_origin([row | {"split": "dev"}, row | {"split": "test"}, row | {"tags": ["lab"]}])
    assert list(got) == ["real test", "real dev", "lab"]
    assert got["real test"]["no_fault_found"] == 1 and got["real test"]["false_all_clear"] == 0
