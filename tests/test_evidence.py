"""Evidence and Coverage are plain classes (tools/evidence.py: a scan must not import pydantic) that behave as the
pydantic models they were: checked here against their pydantic twins on what a real scan makes, and on the uses the
code base has (construction, validation, copies, dumps, JSON round trips, fields of the models, the JSON schema,
pickling, redaction)."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest
from pydantic import ValidationError

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.evidence import Coverage, Evidence, _twin
from trainlog_debugger.tools.lines.timestamps import parse_stamp
from trainlog_debugger.tools.model import Diagnosis, Finding, Role, Status
from trainlog_debugger.tools.redact import redact_tree
from trainlog_debugger.tools.scan.driver import scan_bundle

CASE = Path(__file__).resolve().parents[1] / "cases" / "gen-slurm-8r-a"
LINE = "[rank3]:[E1105 12:34:10.579409000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout"


@pytest.fixture(scope="module")
def scanned():
    with open_bundle([str(CASE)]) as b:
        return scan_bundle(b, workers=1)


def _all_evidence(res) -> list[Evidence]:
    evs = [e for p in res.patterns for e in (p.first, p.last)]
    evs += [e for r in res.ranks.values() for e in (r.first_match, r.last_match, r.last_line)]
    evs += list(res.rank_nodes.values()) + list(res.coverage.expected_evidence)
    return [e for e in evs if e is not None]


def test_a_scans_evidence_and_coverage_dump_as_their_pydantic_twins(scanned):
    evs = _all_evidence(scanned)
    assert len(evs) > 50 and any(e.time is not None for e in evs) and any(e.node for e in evs)
    for e in evs:
        twin = _twin(Evidence).model_validate(e.model_dump())
        assert e.to_json() == twin.model_dump(mode="json", exclude_none=True) == e.model_dump(mode="json",
                                                                                            exclude_none=True)
        assert Evidence.model_validate_json(e.model_dump_json()) == e
    cov = scanned.coverage
    assert cov.expected_ranks == 8 and cov.expected_evidence and cov.skipped
    assert cov.to_json() == cov.model_dump(mode="json", exclude_none=True)
    assert Coverage.model_validate_json(cov.model_dump_json()) == cov


def test_values_of_the_declared_types_are_taken_as_pydantic_takes_them():
    st = parse_stamp(LINE)
    e = Evidence(file="a.log", line=3, text=LINE, time=st, rank=3, node="n1", kind="c10")
    assert e == Evidence.model_validate(_twin(Evidence)(file="a.log", line=3, text=LINE, time=st, rank=3, node="n1",
                                                        kind="c10").model_dump())
    assert e.time is st and e.cite() == "a.log:3"
    assert repr(e).startswith("Evidence(file='a.log', line=3, ") and str(e).startswith("file='a.log' line=3 ")
    assert dict(e)["rank"] == 3
    seen = [0, 1, 2]
    cov = Coverage(seen_ranks=seen, skipped=[{"file": "x", "reason": "binary"}])
    assert cov.seen_ranks == seen and cov.seen_ranks is not seen  # a copy, as pydantic's validation made
    assert cov.expected_evidence == [] and cov.files == 0


@pytest.mark.parametrize("kw, expected", [
    ({"line": "7"}, {"line": 7}),                       # coerced, as pydantic's lax mode does
    ({"line": 7.0}, {"line": 7}),
    ({"rank": "4"}, {"rank": 4}),
    ({"file": b"a.log"}, {"file": "a.log"}),
    ({"bogus": 1}, {}),                                 # unknown keywords ignored, as by the model
    ({"line": 0}, ValidationError),                     # line numbers are 1-based
    ({"file": 3}, ValidationError),
    ({"text": None}, ValidationError),
    ({"time": "yesterday"}, ValidationError),
])
def test_other_values_are_validated_by_pydantic_as_before(kw, expected):
    base = {"file": "a.log", "line": 1, "text": "x"}
    if expected is ValidationError:
        with pytest.raises(ValidationError):
            Evidence(**{**base, **kw})
        return
    e = Evidence(**{**base, **kw})
    assert {k: getattr(e, k) for k in expected} == expected
    assert e == Evidence.model_validate(_twin(Evidence)(**{**base, **kw}).model_dump())


def test_a_time_given_as_its_json_is_a_stamp_again():
    st = parse_stamp(LINE)
    assert Evidence(file="a", line=1, text="x", time=st.to_json()).time == st
    with pytest.raises(ValidationError):
        Evidence(file="a", line=1)  # no text
    assert Coverage(seen_ranks=("1", 2)).seen_ranks == [1, 2]
    with pytest.raises(ValidationError):
        Coverage(seen_ranks=["rank one"])


def test_evidence_is_frozen_and_hashable_coverage_is_mutable():
    e = Evidence(file="a", line=1, text="x")
    with pytest.raises(ValidationError):
        e.line = 2
    assert e.line == 1 and hash(e) == hash(Evidence(file="a", line=1, text="x")) and len({e, copy.copy(e)}) == 1
    assert e != Evidence(file="a", line=2, text="x")
    cov = Coverage()
    cov.expected_ranks = 4
    cov.notes.append("a note")
    assert (cov.expected_ranks, cov.notes) == (4, ["a note"])
    with pytest.raises(TypeError):
        hash(cov)
    with pytest.raises(ValueError):
        cov.no_such_field = 1


def test_copies_and_pickles():
    e = Evidence(file="a", line=1, text="x", time=parse_stamp(LINE), rank=3)
    moved = e.model_copy(update={"rank": 5, "text": "y"})
    assert (moved.rank, moved.text, moved.file, e.rank) == (5, "y", "a", 3)
    assert pickle.loads(pickle.dumps(e)) == e == copy.deepcopy(e)
    cov = Coverage(expected_evidence=[e], seen_ranks=[3], notes=["n"])
    again = pickle.loads(pickle.dumps(cov))
    assert again == cov and again.expected_evidence[0] == e
    shallow = cov.model_copy(update={"missing_ranks": [0, 1, 2]})
    assert shallow.missing_ranks == [0, 1, 2] and cov.missing_ranks == [] and shallow.seen_ranks is cov.seen_ranks


def test_as_fields_of_the_models():
    e = Evidence(file="a.log", line=3, text=LINE, time=parse_stamp(LINE), rank=3)
    f = Finding(id="pytorch.watchdog_timeout", summary="s", role=Role.cascade, evidence=[e])
    assert f.evidence[0] is e  # an instance is taken as it is
    g = Finding(id="x.y", summary="s", role="cascade", evidence=[{"file": "b.log", "line": 2, "text": "t"}])
    assert type(g.evidence[0]) is Evidence and g.evidence[0].cite() == "b.log:2"
    with pytest.raises(ValidationError):
        Finding(id="x.y", summary="s", role="cascade", evidence=[{"file": "b.log", "line": 0, "text": "t"}])
    cov = Coverage(expected_ranks=8, seen_ranks=list(range(7)), missing_ranks=[7], expected_evidence=[e])
    d = Diagnosis(status=Status.hung, category="network", chain=[f], coverage=cov)
    assert d.coverage is cov
    dumped = json.loads(d.model_dump_json(exclude_none=True))
    assert dumped["chain"][0]["evidence"][0] == e.to_json() and dumped["coverage"] == cov.to_json()
    back = Diagnosis.model_validate_json(d.model_dump_json())
    assert back == d and type(back.coverage) is Coverage and type(back.chain[0].evidence[0]) is Evidence


def test_the_json_schema_of_ask_is_the_models():
    defs = Diagnosis.model_json_schema()["$defs"]
    ev, cov = defs["Evidence"], defs["Coverage"]
    assert ev["required"] == ["file", "line", "text"] and ev["properties"]["line"]["minimum"] == 1
    assert ev["description"].startswith("A line we can re-read")
    assert list(ev["properties"]) == ["file", "line", "text", "offset", "time", "rank", "node", "kind"]
    assert cov["properties"]["expected_evidence"]["items"] == {"$ref": "#/$defs/Evidence"}
    assert defs["Finding"]["properties"]["evidence"]["items"] == {"$ref": "#/$defs/Evidence"}
    assert Evidence.model_json_schema() == _twin(Evidence).model_json_schema()


def test_redaction_reaches_their_text():
    secret = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"
    e = Evidence(file="a.log", line=1, text=f"export HF_TOKEN={secret}", rank=0)
    cov = Coverage(expected_evidence=[e], notes=[f"token {secret} seen"])
    shown = redact_tree({"ev": e, "cov": cov})
    assert secret not in json.dumps(shown["ev"].to_json()) and secret not in json.dumps(shown["cov"].to_json())
    assert type(shown["ev"]) is Evidence and shown["ev"].line == 1 and secret in e.text  # a copy is redacted


def test_coverage_json_names_ranks_as_range_sets_and_lists_them_per_rank():
    """schema_version 2: at 10,000 ranks a list of every rank seen was most of `ask --json`; a range set says the
    same exactly ('0-4095 except 1365'), with the counts, and reads back to the same ranks. `--per-rank` keeps the
    lists, and the JSON the plain class writes is the twin's (the one a Diagnosis dumps)."""
    import json

    from trainlog_debugger.tools.groups import per_rank_listing
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.model import Diagnosis

    seen = [r for r in range(4096) if r != 1365]
    cov = Coverage(expected_ranks=4096, seen_ranks=seen, missing_ranks=[1365])
    d = Diagnosis(status="hung", category="network", coverage=cov)
    got = json.loads(dumps(d))
    assert got["schema_version"] == 2
    assert got["coverage"]["seen_ranks"] == "0-4095 except 1365" and got["coverage"]["seen_count"] == 4095
    assert got["coverage"]["missing_ranks"] == "1365" and got["coverage"]["missing_count"] == 1
    assert got["coverage"] == cov.to_json()
    back = Diagnosis.model_validate(got)
    assert back.coverage.seen_ranks == seen and back.coverage.missing_ranks == [1365]
    with per_rank_listing():
        listed = json.loads(dumps(d))["coverage"]
    assert listed["seen_ranks"] == seen and listed["missing_ranks"] == [1365]
