"""Issue 10, mechanisms 3-5 read from where each rank stops: what the one rank that never entered the collective was
doing decides the category (TAXONOMY edge case: evaluation on one rank → software, data reads → data_loading_stall);
a rank's last line is its last dated line across its files; the same error on every rank names no culprit; and a
rendezvous that never filled is judged by the agents' own launch settings."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate


def _write(root, files: dict[str, list[str]]):
    for name, lines in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n")


def _investigate(root, files):
    _write(root, files)
    with open_bundle(root) as b:
        return investigate(b)


GLOO_TIMEOUT = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] "
                "Timed out waiting 20000ms for send operation to complete")


def _gloo_hang(odd_rank_tail: list[str], odd: int = 0, world: int = 4) -> dict[str, list[str]]:
    """Per-rank stdout/stderr files: every rank trains to step 9; the odd rank then prints `odd_rank_tail` and stops
    (the launcher killed it) while the others wait in the step's all-reduce until gloo's timeout."""
    files = {}
    for r in range(world):
        d = f"out/rank_{r}"
        files[f"{d}.out"] = [f"rank {r}/{world} (local {r}) pid {3000 + r} backend gloo torch 2.13.0+cpu"]
        body = [f"2026-11-24 03:55:4{s // 5},{100 + 10 * s + r:03d} INFO train: step {s} loss 2.07 lr 0.05"
                for s in range(10)]
        if r == odd:
            body += odd_rank_tail
        else:
            body += ["[rank%d]: Traceback (most recent call last):" % r,
                     '[rank%d]:   File "/work/train.py", line 212, in <module>' % r,
                     "[rank%d]:     dist.all_reduce(loss)" % r,
                     f"[rank{r}]: {GLOO_TIMEOUT}"]
        files[f"{d}.err"] = body
    return files


@pytest.mark.parametrize("tail", [
    ["2026-11-24 03:55:54,612 INFO train: validation batch 40/200 acc 0.236 elapsed 6.0s",
     "2026-11-24 03:56:06,671 INFO train: validation batch 120/200 acc 0.253 elapsed 18.1s"],
    ["Validation DataLoader 0:  61%|██████    | 122/200 [00:18<00:11,  6.71it/s]"],
    ["2026-11-24 03:55:52,000 INFO eval: running evaluation on 5000 held-out samples",
     "2026-11-24 03:56:06,000 INFO eval: computing metrics (bleu, rouge)"],
])
def test_one_rank_evaluating_while_the_others_wait_is_software(tmp_path, tail):
    d = _investigate(tmp_path, _gloo_hang(tail, odd=0))
    assert (d.category, d.culprit_ranks) == ("software", [0]), d.headline
    assert d.restart == "fix first"


@pytest.mark.parametrize("tail", [
    "2026-11-24 03:55:50,002 INFO data: opening shard data/train/shard-00417.tar (records 1024-1279)",
    "2026-11-24 03:55:50,002 INFO data:  > building train, validation, and test datasets ...",  # not an evaluation
])
def test_one_rank_reading_data_while_the_others_wait_stays_a_loading_stall(tmp_path, tail):
    d = _investigate(tmp_path, _gloo_hang([tail], odd=2))
    assert (d.category, d.culprit_ranks) == ("data_loading_stall", [2]), d.headline


def test_a_rank_last_line_is_its_last_dated_line_not_an_undated_banner_in_another_file(tmp_path):
    """stdout.log holds one undated start-up banner; stderr.log's dated lines come later. The banner is not where
    the rank stopped (it would hide the validation loop it was in)."""
    d = _investigate(tmp_path, _gloo_hang(
        ["2026-11-24 03:56:06,671 INFO train: validation batch 120/200 acc 0.253"], odd=1))
    assert d.culprit_ranks == [1]
    assert any("validation batch 120/200" in e.text for f in d.chain for e in f.evidence), \
        [e.text for f in d.chain for e in f.evidence]


# -- the same error on every rank ------------------------------------------------------------------------------

def _traceback(r: int, call: str, error: str) -> list[str]:
    return [f"[rank{r}]: Traceback (most recent call last):", f'[rank{r}]:   File "/work/train.py", line 301, in <module>',
            f"[rank{r}]:     {call}", f"[rank{r}]: {error}"]


def _nan_on(ranks: list[int], times: dict[int, str] | None = None, world: int = 4) -> dict[str, list[str]]:
    out = {}
    for r in range(world):
        lines = [f"[rank{r}]: 2025-05-01 10:00:00,000 INFO train: step 99 loss 2.31"]
        if r in ranks:
            t = (times or {}).get(r)
            lines += ([f"[rank{r}]: {t} INFO train: step 100"] if t else []) + _traceback(
                r, "loss.backward()", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.")
        out[f"rank_{r}.log"] = lines
    return out


def test_the_same_error_on_every_rank_names_no_culprit(tmp_path):
    d = _investigate(tmp_path, _nan_on([0, 1, 2, 3]))
    assert d.category == "numerical", d.headline
    assert d.culprit_ranks == [] and d.culprit_nodes == []
    assert "every rank (4 of 4)" in d.headline


def test_the_same_error_on_one_rank_names_it(tmp_path):
    d = _investigate(tmp_path, _nan_on([2]))
    assert (d.category, d.culprit_ranks) == ("numerical", [2]), d.headline


def test_the_same_error_on_every_rank_but_one_rank_minutes_earlier_names_that_rank(tmp_path):
    times = {0: "2025-05-01 10:05:00,000", 1: "2025-05-01 10:05:00,500", 2: "2025-05-01 10:01:00,000",
             3: "2025-05-01 10:05:01,000"}
    d = _investigate(tmp_path, _nan_on([0, 1, 2, 3], times))
    assert d.culprit_ranks == [2], d.headline


def test_every_rank_of_a_partial_bundle_is_not_every_rank_of_the_job(tmp_path):
    """Four ranks' logs, and a stated world size of 8: the unseen four may not have failed."""
    files = _nan_on([0, 1, 2, 3])
    files["rank_0.log"].insert(0, "[rank0]: 2025-05-01 09:59:00,000 INFO train: world_size=8 global_batch=256")
    d = _investigate(tmp_path, files)
    assert d.culprit_ranks, d.headline


# -- the same error on every rank of one node --------------------------------------------------------------------

def _node_fails(on: dict[int, str], world: int = 16) -> dict[str, list[str]]:
    """16 ranks on two nodes (srun's task exits say which); the ranks in `on` raise a build's missing-kernel error,
    untimed, after a dated line (its time is only the line before it)."""
    out = {"slurm-77123.out": ["srun: error: gpu-b07: tasks 8-15: Exited with exit code 1",
                               "srun: error: gpu-h03: tasks 0-7: Terminated"]}
    for r in range(world):
        lines = [f"[rank{r}]: [2025-06-11 14:02:31,500][INFO][pretrain] dataset: 412 shards"]
        if r in on:
            lines += [f"[rank{r}]: [2025-06-11 14:02:33,{on[r]}][INFO][pretrain] wrapping with DDP"] + _traceback(
                r, "model = DDP(model, device_ids=[local_rank])",
                "RuntimeError: CUDA error: no kernel image is available for execution on the device")
        out[f"rank_{r}.log"] = lines
    return out


def test_the_same_error_on_every_rank_of_one_node_names_all_of_them(tmp_path):
    """A build without this GPU's kernels fails every rank of that node alike: the culprit is the node and its eight
    ranks, not the three whose untimed lines come after the earliest dated ones."""
    d = _investigate(tmp_path, _node_fails({r: f"{900 - 100 * (r - 8):03d}" for r in range(8, 16)}))
    assert d.culprit_nodes == ["gpu-b07"], d.headline
    assert d.culprit_ranks == list(range(8, 16)), d.headline


def test_the_same_error_on_some_ranks_of_a_node_names_those_only(tmp_path):
    d = _investigate(tmp_path, _node_fails({9: "100", 12: "200"}))
    assert d.culprit_ranks == [9, 12] and d.culprit_nodes == ["gpu-b07"], d.headline


def test_the_same_error_on_two_nodes_keeps_the_rule_s_culprit(tmp_path):
    """Ranks of the other node raised it too: it is no one node's failure, and the rule's first ranks stay."""
    d = _investigate(tmp_path, _node_fails({r: f"{100 + r * 10:03d}" for r in (3, *range(8, 16))}))
    assert len(d.culprit_ranks) <= 3, d.headline


# -- rendezvous that never filled -------------------------------------------------------------------------------

def _agent(pid: int, run_id: str, endpoint: str = "10.0.0.1:29400", min_nodes: int = 2) -> list[str]:
    h = f"I1124 03:54:48.120000 {pid} torch/distributed/launcher/api.py:254]"
    return [f"{h} Starting elastic_operator with launch configs:",
            f"{h}   entrypoint               : train.py",
            f"{h}   min_nodes                : {min_nodes}",
            f"{h}   max_nodes                : {min_nodes}",
            f"{h}   nproc_per_node           : 8",
            f"{h}   run_id                   : {run_id}",
            f"{h}   rdzv_backend             : c10d",
            f"{h}   rdzv_endpoint            : {endpoint}",
            f"I1124 03:54:48.124000 {pid} torch/distributed/elastic/agent/server/api.py:707] [default] Rendezvous'ing "
            f"worker group",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", '
            'line 680, in run',
            "    raise RendezvousTimeoutError",
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"]


def test_agents_with_different_run_ids_are_a_config_mistake(tmp_path):
    d = _investigate(tmp_path, {"node0/torchrun.out": _agent(111, "job-7"), "node1/torchrun.out": _agent(222, "job-8")})
    assert d.category == "config", d.headline
    assert "run_id" in d.headline and "job-7" in d.headline


def test_agents_with_different_endpoints_in_one_file_are_a_config_mistake(tmp_path):
    """srun on two nodes into one output: the agents' pids tell them apart."""
    d = _investigate(tmp_path, {"slurm-4242.out": _agent(111, "4242", "10.0.0.1:29400")
                                + _agent(222, "4242", "10.0.0.2:29400")})
    assert d.category == "config" and "rdzv_endpoint" in d.headline, d.headline


def test_one_agent_of_two_nodes_is_a_node_that_never_came_up(tmp_path):
    d = _investigate(tmp_path, {"node0/torchrun.out": _agent(111, "4242")})
    assert d.category == "infrastructure", d.headline
    assert any(a.category == "config" for a in d.alternatives)


def test_a_launch_asking_for_more_nodes_than_slurm_allocated_is_a_setting(tmp_path):
    """The batch script's environment says Slurm allocated one node; torchrun waits for two (min_nodes 2): no node
    failed to come up, the launch asked for more than there are. With an allocation as large as the launch, the
    missing agent stays a node that never came up."""
    d = _investigate(tmp_path, {"slurm-4242.out": ["SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=1 SLURM_NODELIST=gpu-g-001"]
                                + _agent(111, "4242")})
    assert d.category == "config" and "allocated 1" in d.headline, d.headline
    (tmp_path / "fits").mkdir()
    d = _investigate(tmp_path / "fits", {"slurm-4242.out": ["SLURM_NNODES=2"] + _agent(111, "4242")})
    assert d.category == "infrastructure", d.headline


def test_an_agent_that_never_reached_the_store_is_the_endpoint_not_a_missing_node(tmp_path):
    """The same lone agent, but its store client could not even connect to the endpoint (c10d socket.cpp's connect
    timeout, torchelastic's RendezvousConnectionError): nothing served the store there. A wrong endpoint (or a host
    that did not take it for its own) before a node that never came up, which the summary still names."""
    lines = _agent(111, "4242")[:9] + [
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (10.0.0.1, "
        "29400).",
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
        "failed. See inner exception for details."]
    d = _investigate(tmp_path, {"node1/torchrun.out": lines})
    assert d.category == "config" and "could not be reached" in d.headline and "not up" in d.headline, d.headline


def test_every_agent_present_and_agreeing_stays_a_rendezvous_setting(tmp_path):
    d = _investigate(tmp_path, {"node0/torchrun.out": _agent(111, "4242"), "node1/torchrun.out": _agent(222, "4242")})
    assert d.category == "config", d.headline
