"""`debugger ask` without an LLM: the right category, culprit and status on each failure type, controls that
stay quiet, the chain in causal order, and every cited line re-read from disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainlog_debugger.eval.synth import generate as g
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.model import Diagnosis, Role, Status
from trainlog_debugger.tools.verify import verified

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT.parent / "shared" / "incidents"


def _diag(tmp_path, job) -> Diagnosis:
    d = tmp_path / "bundle"
    g.write_case(d, job, {})
    with open_bundle(d) as b:
        return investigate(b)


CASES = [  # (scenario, kwargs, status, category, culprit ranks)
    (g.data_loading_straggler, {"culprit": 5}, "hung", "data_loading_stall", [5]),
    (g.crash_before_collective, {"culprit": 3}, "crashed", "gpu_cuda", [3]),
    (g.cuda_oom, {"culprit": 0}, "crashed", "oom", [0]),
    (g.nan_divergence, {}, "crashed", "numerical", []),
    (g.fabric_failure, {}, "hung", "network", []),
    (g.time_limit, {}, "cancelled", "infrastructure", []),
    (g.shm_exhaustion, {}, "crashed", "infrastructure", None),
    (g.port_in_use, {}, "crashed", "config", []),
    (g.clean_run, {}, "completed", "none", []),
    (g.two_groups_stuck, {"culprit": 2}, "hung", "data_loading_stall", [2]),
    (g.gloo_straggler, {"culprit": 1}, "hung", "data_loading_stall", [1]),
]


@pytest.mark.parametrize("fn,kw,status,category,culprits", CASES, ids=[c[0].__name__ for c in CASES])
def test_failure_types(tmp_path, fn, kw, status, category, culprits):
    job, _ = fn(ranks=8, **kw)
    d = _diag(tmp_path, job)
    assert (d.status.value, d.category) == (status, category), d.headline
    if culprits is not None:
        assert d.culprit_ranks == culprits
    assert d.verified


def test_chain_is_trigger_then_cascade(tmp_path):
    job, _ = g.data_loading_straggler(ranks=8, culprit=5)
    d = _diag(tmp_path, job)
    roles = [f.role for f in d.chain]
    assert roles[0] == Role.root_candidate
    assert roles.index(Role.cascade) > 0 and all(r == Role.cascade for r in roles[roles.index(Role.cascade):])
    assert d.chain[0].id == "collective.straggler"
    watchdog = next(f for f in d.chain if f.id == "pytorch.watchdog_timeout")
    assert "7 of 8 ranks" in watchdog.summary  # every "all ranks" claim says how many it covered
    noise = [a for a in d.alternatives if "noise" in a.rejected_because]
    assert noise and noise[0].evidence


def test_missing_file_is_inconclusive_and_names_what_is_needed(tmp_path):
    job, _ = g.missing_rank_file(ranks=8, culprit=5)
    d = _diag(tmp_path, job)
    assert d.status == Status.inconclusive and d.confidence == "low"
    assert any("not in the bundle" in m for m in d.missing)
    assert 5 in d.culprit_ranks


def test_tampered_citation_is_dropped(tmp_path):
    job, _ = g.cuda_oom(ranks=8, culprit=0)
    d = tmp_path / "bundle"
    g.write_case(d, job, {})
    with open_bundle(d) as b:
        diag = investigate(b)
        ev = diag.chain[0].evidence[0]
        bad = ev.model_copy(update={"text": ev.text + " (edited)"})
        chain = [diag.chain[0].model_copy(update={"evidence": [bad]})] + diag.chain[1:]
        out = verified(diag.model_copy(update={"chain": chain, "verified": False}), b)
    assert not out.verified
    assert out.status == Status.inconclusive  # the trigger lost its proof
    assert any("differs from the file" in n for n in out.notes)


def _all_cases():
    dirs = sorted(p.parent for p in (ROOT / "cases").glob("*/truth.yaml"))
    if INCIDENTS.is_dir():
        dirs += sorted(p.parent for p in INCIDENTS.glob("*/truth.yaml"))
    return dirs


@pytest.mark.slow
def test_every_cited_line_exists_verbatim_in_every_case():
    """Over all cases: each Evidence is re-read independently of tools/verify.py and must match."""
    for case in _all_cases():
        with open_bundle(case) as b:
            diag = investigate(b)
            by_rel = {s.rel: s for s in b.sources}
            for ev in diag.evidence():
                with by_rel[ev.file].open() as fh:
                    lines = fh.read().split(b"\n")
                assert lines[ev.line - 1].decode("utf-8", "replace").rstrip("\r") == ev.text, (case.name, ev.cite())
        assert diag.verified, case.name


def _incidents():
    if not INCIDENTS.is_dir():
        return []
    return [pytest.param(p.parent, id=p.parent.name) for p in sorted(INCIDENTS.glob("*/truth.yaml"))]


@pytest.mark.skipif(not INCIDENTS.is_dir(), reason="no shared incidents")
@pytest.mark.parametrize("case", _incidents())
def test_real_incidents_get_an_honest_answer(case):
    """Right, or honestly unsure: never a false all-clear (`completed`) on a job that failed."""
    truth = yaml.safe_load((case / "truth.yaml").read_text())
    with open_bundle(case) as b:
        d = investigate(b)
    assert d.category == truth["category"] or d.status == Status.inconclusive, (case.name, d.headline)
    assert d.status != Status.completed or truth["category"] == "none", (case.name, d.headline)
    assert d.missing, case.name  # partial pastes: the answer says what is missing


def _steps_generator():
    """tests/steps/test_steps.py's Megatron generator, minus the stray watchdog line it appends (a near-miss for the
    step parser; here it would make a healthy run look failed)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("steps_gen", ROOT / "tests" / "steps" / "test_steps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def run(root, **kw):
        out = mod.megatron_run(root, **kw)
        for p in out.glob("rank_*.log"):
            p.write_text("".join(ln for ln in p.read_text().splitlines(True) if "Watchdog caught" not in ln))
        return out
    return run


def test_slow_rank_is_slow_not_completed(tmp_path):
    """No crash, no hang: a rank 40% slower than its group makes the job `slow`, with that rank as culprit."""
    root = _steps_generator()(tmp_path / "b", ranks=16, slow={5: 1.4})
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == Status.slow and d.culprit_ranks == [5], d.headline
    assert d.verified


def test_healthy_run_without_an_end_line_is_not_an_all_clear(tmp_path):
    """Steady step times and no fault, but the logs just stop: nothing proves the job ended, so `inconclusive`, with
    where each rank stops and what would decide it."""
    root = _steps_generator()(tmp_path / "b", ranks=16, noise=0.05, spikes=True)
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == Status.inconclusive and d.category == "none", d.headline
    stops = next(f for f in d.chain if f.id == "logs.last_lines")
    assert len({e.rank for e in stops.evidence}) == len(stops.evidence) > 1 and d.verified
    assert any("normal end" in m for m in d.missing)


def test_healthy_run_with_the_trainers_end_line_is_completed(tmp_path):
    root = _steps_generator()(tmp_path / "b", ranks=16, noise=0.05, spikes=True)
    last = sorted(root.rglob("*.log"))[0]
    with open(last, "a") as fh:
        fh.write("`Trainer.fit` stopped: `max_steps=200` reached.\n")
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == Status.completed and d.category == "none" and d.chain[0].id == "job.finished", d.headline


@pytest.mark.parametrize("lines, status", [
    # one rank above 0 says its loop is over, then waits in a final barrier: the job's end is not shown
    (["2022-05-30 15:54:31 INFO     trainer Training completed for rank 6. Do not forget to share your model on "
      "huggingface.co/models =)", "2022-05-30 15:54:58 INFO     trainer Before barrier for rank 6"], Status.inconclusive),
    (["[rank3]: Training completed. Do not forget to share your model on huggingface.co/models =)"], Status.inconclusive),
    # the main process's end line (the HF Trainer logs on rank 0), unlabelled or labelled: the trainer's end of fit
    (["Training completed. Do not forget to share your model on huggingface.co/models =)"], Status.completed),
    (["[rank0]: Training completed. Do not forget to share your model on huggingface.co/models =)"], Status.completed),
    # a rank's end and the launcher's: every local worker exited 0
    (["[rank3]: Training completed. Do not forget to share your model on huggingface.co/models =)",
      "I1105 14:00:09.000000 2585 torch/distributed/elastic/agent/server/api.py:862] [default] worker group "
      "successfully finished. Waiting 300 seconds for other agents to finish."], Status.completed),
])
def test_an_end_line_of_a_rank_above_0_alone_is_no_proof_of_the_jobs_end(tmp_path, lines, status):
    """The trainers print their end-of-training line from the main process; a rank above 0 that says it finished
    (and then waits at a barrier while the others still train) proves its own loop's end, not the job's."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == status and d.category == "none", d.headline
    if status == Status.inconclusive:
        assert d.chain[0].id == "job.finished" and "reports the end of training" in d.chain[0].summary
        assert "rank 0" in d.chain[0].summary and d.verified


_DS = "[2025-02-03 09:{m:02d}:05,10{i}] [INFO] [launch.py:{n}:main] "


def _ds_launcher_log(spawned: int, ok: int, failed: bool = False) -> str:
    """A DeepSpeed launcher's node log: the processes it spawned, a run with a recovered fp16 overflow and a
    warnings-module UserWarning that says "raise an exception", and the per-process exit lines of its poll loop."""
    lines = [_DS.format(m=0, i=i, n=256) + f"process {61200 + i} spawned with command: ['/usr/bin/python', '-u', "
             f"'train.py', '--local_rank={i}']" for i in range(spawned)]
    lines += ["/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
              "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will "
              "raise an exception if use_reentrant is not passed.", "  warnings.warn(",
              "[2025-02-03 09:01:02,101] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 "
              "Skipping step. Attempted loss scale: 65536, reducing to 32768",
              "[2025-02-03 09:12:11,510] [INFO] [logging.py:128:log_dist] [Rank 0] step=400, skipped=1, lr=[6e-05]"]
    lines += [_DS.format(m=31, i=i, n=351) + f"Process {61200 + i} exits successfully." for i in range(ok)]
    if failed:
        lines.append(_DS.format(m=31, i=9, n=325) + "['/usr/bin/python', '-u', 'train.py', '--local_rank=7'] exits "
                     "with return code = 1")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("spawned, ok, failed, status", [
    (8, 8, False, Status.completed),  # every spawned process returned 0: the node's normal end
    (0, 8, False, Status.inconclusive),  # a paste that starts after the spawn lines: which processes ran is unknown
    (8, 1, False, Status.inconclusive),  # one local rank returned, seven did not: they may hang in a final barrier
    (8, 7, True, Status.inconclusive),  # the launcher's failure line: no proof of a normal end
])
def test_deepspeeds_launcher_exits_prove_a_nodes_end_only_all_together(tmp_path, spawned, ok, failed, status):
    """DeepSpeed's launcher prints `Process <pid> exits successfully.` per local rank that returned 0 (launch.py
    main's poll loop): the end of a node when every process it spawned did, as torchrun's `worker group successfully
    finished` is. A UserWarning of the warnings module that says a later version "will raise an exception" is no
    error line either way."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "output.txt").write_text(_ds_launcher_log(spawned, ok, failed))
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == status, d.headline
    if not failed:
        assert d.category == "none", d.headline
    if status == Status.completed:
        assert "exits successfully" in d.chain[0].evidence[0].text and d.verified


@pytest.mark.parametrize("after, status", [
    ("", Status.inconclusive),  # the log stops at Megatron's marker: the final save, evaluation and exit are not shown
    ("I1105 14:00:09.000000 2585 torch/distributed/elastic/agent/server/api.py:862] [default] worker group "
     "successfully finished. Waiting 300 seconds for other agents to finish.\n", Status.completed),  # the exit is
])
def test_megatrons_after_training_marker_is_no_proof_of_a_normal_end(tmp_path, after, status):
    """Megatron's `[after training is done]` is a phase marker printed before pretrain()'s final checkpoint and
    evaluation: a job that then hung in its teardown leaves exactly these logs. Only an end line proves the end."""
    root = _steps_generator()(tmp_path / "b", ranks=16, noise=0.05, spikes=True)
    last = sorted(root.rglob("*.log"))[0]
    with open(last, "a") as fh:
        fh.write("[after training is done] datetime: 2024-11-05 14:00:00\n" + after)
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == status and d.category == "none", d.headline
    if status == Status.inconclusive:
        assert d.chain[0].id == "job.training_done" and "training finished" in d.headline
        assert any("exit code" in m for m in d.missing) and d.verified


@pytest.mark.parametrize("event, category", [
    # NCCL's IB async event, read by the lexicon's words only: the loop ran on to its end after it
    ("dgx-h100-17:1288:1412 [3] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_3:1 Got async event : GID table change",
     "none"),
    # a decisive fault before the marker still decides (it is no weak reading)
    ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 3 has a total capacity of "
     "79.15 GiB of which 1.02 GiB is free.", "oom"),
])
def test_a_weak_reading_before_the_end_of_the_training_loop_did_not_stop_it(tmp_path, event, category):
    root = _steps_generator()(tmp_path / "b", ranks=8, noise=0.05, spikes=False)
    last = sorted(root.rglob("*.log"))[0]
    text = last.read_text().splitlines()
    text.insert(len(text) // 2, event)
    last.write_text("\n".join(text + ["[after training is done] datetime: 2024-11-05 14:00:00"]) + "\n")
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.category == category, d.headline
    if category == "none":
        assert d.status == Status.inconclusive and d.alternatives
        assert d.alternatives[0].category == "network" and "did not stop the training" in d.alternatives[0].rejected_because


@pytest.mark.parametrize("quoted, status", [
    ("driver shutting down", Status.completed),  # cudaErrorCudartUnloading at interpreter exit: noise
    ("an illegal memory access was encountered", Status.crashed),  # a real fault, end line or not
])
def test_a_cuda_error_nccl_quotes_at_exit_after_a_normal_end(tmp_path, quoted, status):
    """Two ranks' NCCL prints `Cuda failure 'driver shutting down'` while their processes exit after the run ended
    normally: the CUDA table's noise, not a GPU fault."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "stdout.txt").write_text("\n".join([
        "[rank0]:[titan] 2026-11-30 05:12:40,254 - root - INFO - Training completed",
        f"[rank3]:[2026-11-30 05:12:44] a100-22:7103:7103 [3] init.cc:234 NCCL WARN Cuda failure '{quoted}'",
        "I1130 05:12:49.002000 7098 torch/distributed/elastic/agent/server/api.py:879] [default] worker group "
        "successfully finished. Waiting 300 seconds for other agents to finish."]) + "\n")
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status == status, d.headline
