"""tools/pipeline.py and tools/investigation.py: the stage table (STAGES), each stage's `when` on real bundles, and
what the loop puts into the Investigation.

The bundles are the bundled cases and the real dumps the sources' own tests read: a flight-recorder run of torch 2.13
(tests/sources/flight_recorder/fixtures), py-spy dumps that `debugger collect` took of a hung gloo job
(cases/lab-hang-collect), hardware snapshots as the sample generator of tests/sources/hw writes them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import pytest

from trainlog_debugger.tools import pipeline
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.investigation import Context, Investigation, Stage
from trainlog_debugger.tools.model import Evidence, Status
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.sources.messages import catalog

TESTS = Path(__file__).parent
CASES = TESTS.parent / "cases"
HANG = CASES / "gen-slurm-8r-a"  # 8 ranks, rank 5 never entered the collective: a fault, decisive
FR_DUMPS = TESTS / "sources" / "flight_recorder" / "fixtures" / "gloo-2.13"
STACKS = CASES / "lab-hang-collect"  # `debugger collect` of a hung 4-rank gloo job: py-spy dumps per rank


def _stage(fills: str) -> Stage:
    return next(s for s in pipeline.stages() if s.fills == fills)


def _context(root: Path, **inv) -> Context:
    """The context a stage sees right after the scan (the investigation so far: `inv`). The bundle is closed on
    return: a `when` reads only its index (`sources`), never the files."""
    with open_bundle(root) as b:
        scan = scan_bundle(b, workers=1)
    got = Investigation(scan=scan, **inv)
    return Context(b, got, RuleInputs(got, messages=catalog), workers=1)


def _copy(*trees: Path, to: Path) -> Path:
    for t in trees:
        shutil.copytree(t, to, dirs_exist_ok=True, ignore=shutil.ignore_patterns("truth.yaml"))
    return to


def _hw_samples():
    """tests/sources/hw/hw_samples.py, the generator of realistic snapshots (nvidia-smi -q, ibstat, ...)."""
    spec = importlib.util.spec_from_file_location("hw_samples", TESTS / "sources" / "hw" / "hw_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- the table ---------------------------------------------------------------------------------------------------

def test_every_entry_is_a_stage_that_fills_an_investigation_field():
    fields = {f.name for f in dataclasses.fields(Investigation)}
    got = pipeline.stages()
    assert len(got) == len(pipeline.STAGES) and all(isinstance(s, Stage) for s in got)
    assert [s.fills for s in got] == ["fr", "nccl", "ais", "stacks", "hardware", "activity", "diagnosis", "steps", "tails",
                                      "diff"]
    assert {s.fills for s in got} <= fields and len({s.fills for s in got}) == len(got)


def test_order_is_the_data_flow():
    """The AIStore correlation reads `nccl`; the follow-ups read the first answer; only follow-ups redraw it."""
    order = [s.fills for s in pipeline.stages()]
    assert order.index("nccl") < order.index("ais")
    first = order.index("diagnosis")
    assert all(order.index(f) > first for f in ("steps", "tails", "diff"))
    redraw = {s.fills for s in pipeline.stages() if s.redraws is not Stage.__dataclass_fields__["redraws"].default}
    assert redraw == {"steps", "tails", "diff"}


def test_an_entry_that_is_not_a_stage_is_refused(monkeypatch):
    monkeypatch.setattr(pipeline, "STAGES", (*pipeline.STAGES, "trainlog_debugger.tools.pipeline:run"))
    with pytest.raises(TypeError, match="not a tools.investigation.Stage"):
        pipeline.stages()


# --- each stage's `when`, on real bundles ------------------------------------------------------------------------

def test_a_bundle_with_flight_recorder_dumps_runs_the_fr_stage_and_one_without_does_not(tmp_path):
    with_dumps = _copy(HANG, FR_DUMPS, to=tmp_path / "with")
    assert _stage("fr").when(_context(with_dumps))
    assert not _stage("fr").when(_context(HANG))
    with open_bundle(with_dumps) as b:
        inv = pipeline.run(b, workers=1)
    assert inv.fr is not None and sorted(inv.fr.dumps) == [0, 1, 2, 3]
    with open_bundle(HANG) as b:
        assert pipeline.run(b, workers=1).fr is None


def test_storage_runs_only_with_daemon_logs():
    assert _stage("ais").when(_context(CASES / "gen-ais-8r-a"))
    assert not _stage("ais").when(_context(HANG))


def test_collectives_always_run():
    assert _stage("nccl").when(_context(HANG))


@pytest.mark.parametrize("stage", ["steps", "tails", "diff"])
def test_follow_ups_wait_for_the_first_answer(stage):
    assert not _stage(stage).when(_context(HANG))


def test_follow_ups_run_under_their_conditions():
    """No fault found: steps run; nothing visibly failed and the answer is inconclusive: tails and, with at least
    MIN_RANKS ranks, the diff; a decisive answer: none of them."""
    with open_bundle(HANG) as b:
        decisive = pipeline.run(b, workers=1).diagnosis
    assert decisive.category != "none"
    nothing = decisive.model_copy(update={"category": "none", "status": Status.inconclusive})
    undecided = decisive.model_copy(update={"status": Status.inconclusive})
    assert [_stage(s).when(_context(HANG, diagnosis=decisive)) for s in ("steps", "tails", "diff")] == [False] * 3
    assert [_stage(s).when(_context(HANG, diagnosis=nothing)) for s in ("steps", "tails", "diff")] == [True] * 3
    assert [_stage(s).when(_context(HANG, diagnosis=undecided)) for s in ("steps", "tails", "diff")] == [
        False, False, True]


def test_stack_dumps_reach_the_investigation_ranked():
    assert _stage("stacks").when(_context(STACKS))
    assert not _stage("stacks").when(_context(HANG))
    with open_bundle(STACKS) as b:
        inv = pipeline.run(b, workers=1)
    assert sorted(s.rank for s in inv.stacks) == [0, 1, 2, 3]
    assert all(s.frames for s in inv.stacks)
    with open_bundle(HANG) as b:
        assert pipeline.run(b, workers=1).stacks == []


def test_hardware_snapshots_reach_the_investigation_with_their_nodes(tmp_path):
    names = _hw_samples().bundle(tmp_path, 2, bad="port_down", bad_node=1, tools=("ibstat", "nvsmi"))
    assert _stage("hardware").when(_context(tmp_path))
    assert not _stage("hardware").when(_context(HANG))
    with open_bundle(tmp_path) as b:
        inv = pipeline.run(b, workers=1)
    assert {r.node for r in inv.hardware} == set(names)
    assert inv.diagnosis.culprit_nodes == [names[1]]  # the rule read them through the view


# --- the loop ----------------------------------------------------------------------------------------------------

PASTE = '  File "/opt/train/loader.py", line 212, in __next__'
# a frame far from the end of the log: the pipeline's own tails stage (the last 40 lines) does not see it
LOG = PASTE + "\n" + "".join(f"[rank0]: step {i} loss 2.{i:02d}\n" for i in range(10, 60))


def _paste_tail(ctx: Context) -> tuple[object, list[str]]:
    """A stage of a new analysis, for the test: it finds a frame (in the field the software rule reads). Its line is
    in the file, as the answer's verification re-reads it."""
    f = ctx.inv.scan.files[0]
    return [Evidence(file=f.rel, line=1, text=PASTE, kind=f.kind)], ["the paste stage looked at 1 file"]


PASTE_STAGE = Stage("tails", when=lambda ctx: True, run=_paste_tail)


def test_adding_a_stage_is_one_entry(monkeypatch, tmp_path):
    """One "module:attribute" entry before the first answer: its report reaches the rules, its notes the answer."""
    (tmp_path / "rank0.log").write_text(LOG)
    with open_bundle(tmp_path) as b:
        before = pipeline.run(b, workers=1).diagnosis
    first = pipeline.STAGES.index(pipeline.FIRST_ANSWER)
    monkeypatch.setattr(pipeline, "STAGES", (*pipeline.STAGES[:first], f"{__name__}:PASTE_STAGE",
                                             *pipeline.STAGES[first:]))
    with open_bundle(tmp_path) as b:
        inv = pipeline.run(b, workers=1)
    assert before.chain == [] or before.chain[0].id != "software.traceback_cut"
    assert inv.tails[0].text == PASTE
    assert inv.diagnosis.chain[0].id == "software.traceback_cut"
    assert "the paste stage looked at 1 file" in inv.notes and "the paste stage looked at 1 file" in inv.diagnosis.notes


def test_a_follow_up_that_finds_something_redraws_the_answer(monkeypatch):
    """A stage after the first answer whose `redraws` holds: the answer is drawn again with its report."""
    drawn = []
    real = pipeline.diagnose
    monkeypatch.setattr(pipeline, "diagnose", lambda rules: drawn.append(1) or real(rules))
    late = Stage("tails", when=lambda ctx: True, run=_paste_tail, redraws=bool)
    monkeypatch.setattr(pipeline, "STAGES", (*pipeline.STAGES, late))
    with open_bundle(HANG) as b:
        inv = pipeline.run(b, workers=1)
    assert len(drawn) == 2 and inv.tails and inv.diagnosis.category != "none"


def test_without_the_first_answer_the_run_fails_loudly(monkeypatch):
    monkeypatch.setattr(pipeline, "STAGES", tuple(s for s in pipeline.STAGES if s is not pipeline.FIRST_ANSWER))
    with open_bundle(HANG) as b, pytest.raises(RuntimeError, match="drew no diagnosis"):
        pipeline.run(b, workers=1)
