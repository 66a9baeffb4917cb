"""tools/sources/ray.py: a Ray worker's lines get the rank its own process states (Ray Train's set-up line, a c10d
`[rankN]:` prefix under Ray's `(Cls pid=P, ip=I)` prefix), and the driver's report of a task that failed in that
process gets it too. Lines as Ray 2.x prints them (python/ray/_private/worker.py print_worker_logs; Ray Train
python/ray/train/torch/config.py; python/ray/exceptions.py RayTaskError)."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.scan.driver import scan_bundle

W = "(RayTrainWorker pid={pid}, ip={ip}) "
PIDS = {0: ("8810", "10.0.0.2"), 1: ("8811", "10.0.0.2"), 2: ("40224", "10.0.0.3"), 3: ("40225", "10.0.0.3")}


def _setup() -> list[str]:
    return [W.format(pid=p, ip=ip) + f"Setting up process group for: env:// [rank={r}, world_size=4]"
            for r, (p, ip) in PIDS.items()]


def _oom(rank: int) -> list[str]:
    p, ip = PIDS[rank]
    w = W.format(pid=p, ip=ip)
    return [w + "Error in training function:",
            w + "Traceback (most recent call last):",
            w + '  File "/home/ray/train.py", line 88, in train_func',
            w + "    loss = model(**batch).loss",
            w + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.83 GiB. GPU 0 has a total capacity "
                "of 79.10 GiB of which 5.12 GiB is free. Including non-PyTorch memory, this process has 73.97 GiB "
                "memory in use."]


def _scan(tmp_path, lines: list[str]):
    (tmp_path / "console.txt").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        return scan_bundle(b, workers=1)


def test_a_ray_train_workers_crash_names_the_rank_its_setup_line_states(tmp_path):
    lines = (["(TrainController pid=3311) Attempting to start training worker group of size 4 with the following "
              "resources: [{'GPU': 1}] * 4"] + _setup()
             + [W.format(pid="8810", ip="10.0.0.2") + "epoch 0 step 500 loss 3.1000"] + _oom(3))
    (tmp_path / "console.txt").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [3], d.headline


def test_without_the_setup_lines_the_crash_names_no_rank(tmp_path):
    """The same crash, the set-up lines cut from the paste: nothing states pid 40225's rank, so none is named."""
    (tmp_path / "console.txt").write_text("\n".join(_oom(3)) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [], d.headline


def test_a_c10d_rank_prefix_under_the_ray_prefix_states_the_rank(tmp_path):
    """verl's WorkerDict actors print no set-up line, but their c10d lines carry `[rankN]:`; the driver's
    RayTaskError names the failing task's pid and IP."""
    res = _scan(tmp_path, [
        "(WorkerDict pid=11874, ip=10.0.0.2) [rank2]: Traceback (most recent call last):",
        '(WorkerDict pid=11874, ip=10.0.0.2) [rank2]:   File "/workspace/verl/verl/workers/fsdp_workers.py", line 870, '
        "in generate_sequences",
        "(WorkerDict pid=11874, ip=10.0.0.2) [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.00 GiB.",
        "(WorkerDict pid=11874, ip=10.0.0.2) Exception raised in creation task: The actor died because of an error "
        "raised in its creation task",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences() "
        "(pid=11874, ip=10.0.0.2, actor_id=a4c123b1612dd272d1371c17149d4395, repr=<verl.single_controller.ray.base"
        ".WorkerDict object at 0x7f2c5c1b3e50>)",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences() "
        "(pid=11875, ip=10.0.0.2, actor_id=b4c123b1612dd272d1371c17149d4395, repr=<verl.single_controller.ray.base"
        ".WorkerDict object at 0x7f2c5c1b3e50>)",
    ])
    (f,) = res.files
    ranks = {(h.line, h.pattern): h.rank for h in f.hits}
    assert ranks[(3, "cuda.oom")] == 2  # the line's own prefix
    assert {r for (line, _p), r in ranks.items() if line == 5} == {2}, ranks  # the driver's report about pid 11874
    assert {r for (line, _p), r in ranks.items() if line == 6} == {None}, ranks  # pid 11875 states no rank
    assert any("Ray workers" in n for n in res.notes)


def test_a_pid_that_states_two_ranks_maps_to_none(tmp_path):
    """A restarted worker group can reuse a pid: two ranks stated for one (ip, pid) is no statement."""
    p, ip = PIDS[1]
    w = W.format(pid=p, ip=ip)
    res = _scan(tmp_path, [w + "Setting up process group for: env:// [rank=1, world_size=4]",
                           w + "Setting up process group for: env:// [rank=3, world_size=4]",
                           w + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    (f,) = res.files
    assert [h.rank for h in f.hits if "OutOfMemoryError" in h.text] == [None]


def test_the_same_pid_on_another_node_is_another_process(tmp_path):
    """Pids repeat across nodes: pid 8810 on 10.0.0.2 is rank 0; pid 8810 on 10.0.0.9 states nothing."""
    res = _scan(tmp_path, _setup()[:1] + [W.format(pid="8810", ip="10.0.0.9")
                                          + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    (f,) = res.files
    assert [h.rank for h in f.hits if "OutOfMemoryError" in h.text] == [None]


def test_the_trainers_worker_table_states_every_workers_rank(tmp_path):
    """Only rank 0 prints the set-up line; Ray Train's table of its workers (the trainer's own lines, with and
    without `node_id=`) states the others. The memory monitor's account of the worker it killed names its pid."""
    t = "(TorchTrainer pid=3012, ip=10.20.0.11) "
    res = _scan(tmp_path, [
        "(RayTrainWorker pid=4411, ip=10.20.0.11) Setting up process group for: env:// [rank=0, world_size=4]",
        t + "Started distributed worker processes: ",
        t + "- (node_id=f67b5f412a227b4c6b3ddd85d6f5b1eecd0bd0917efa8f9cd4b5e4da, ip=10.20.0.11, pid=4411) "
            "world_rank=0, local_rank=0, node_rank=0",
        t + "- (node_id=f67b5f412a227b4c6b3ddd85d6f5b1eecd0bd0917efa8f9cd4b5e4da, ip=10.20.0.11, pid=4413) "
            "world_rank=1, local_rank=1, node_rank=0",
        t + "- (ip=10.20.0.12, pid=5122) world_rank=2, local_rank=0, node_rank=1",
        "(RayTrainWorker pid=5122, ip=10.20.0.12) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
        "GiB.",
        "Memory on the node (IP: 10.20.0.11, ID: f67b5f412a227b4c6b3ddd85d6f5b1eecd0bd0917efa8f9cd4b5e4da) where the "
        "task (actor ID: 3f7e0c1a9b2d4e5f6a7b8c9d01000000, name=RayTrainWorker.__init__, pid=4413, memory used=61.37GB)"
        " was running was 477.91GB / 503.53GB (0.949129), which exceeds the memory usage threshold of 0.95. Ray killed "
        "this worker (ID: 3d5a4fd12aabfe228f219e9cb0eb53f16947ccf25ec84d8dbc742547) because it was the most recently "
        "scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip "
        "10.20.0.11`.",
    ])
    (f,) = res.files
    table = {h.fields["pid"]: h.fields["world_rank"] for h in f.hits if h.pattern == "ray.train_worker_table"}
    assert table == {"4411": 0, "4413": 1, "5122": 2}
    assert {h.rank for h in f.hits if h.line == 6} == {2}, [(h.line, h.pattern, h.rank) for h in f.hits]
    killed = [h for h in f.hits if h.line == 7]
    assert killed and {h.rank for h in killed} == {1}, [(h.line, h.pattern, h.rank) for h in f.hits]
    assert 1 not in f.ranks  # the monitor's line is about rank 1, not rank 1's own output


def test_a_single_node_run_without_ips_maps_by_pid(tmp_path):
    """One node: Ray's prefix has no `ip=` (`(RayTrainWorker pid=63669)`), and the worker table still names the
    IP; the pid alone finds the rank when every statement for it agrees."""
    res = _scan(tmp_path, [
        "(TorchTrainer pid=63280) - (node_id=9f2c34ea47fe405f3227e9168aa857f8, ip=100.83.111.228, pid=63668) "
        "world_rank=1, local_rank=1, node_rank=0",
        "(RayTrainWorker pid=63668) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    (f,) = res.files
    assert {h.rank for h in f.hits if "OutOfMemoryError" in h.text} == {1}


def _init(pid: str, rank: int, nranks: int = 4) -> str:
    return (f"(WorkerDict pid={pid}) gpu-node-01:{pid}:{int(pid) + 120} [{rank}] NCCL INFO ncclCommInitRank comm "
            f"0x55d005a0 rank {rank} nranks {nranks} cudaDev {rank} nvmlDev {rank} busId ab000 commId 0x6c1e3f0a9b2d4471"
            " - Init COMPLETE")


def test_nccls_init_line_of_the_world_communicator_states_the_rank_and_the_drivers_traceback_takes_it(tmp_path):
    """verl's WorkerDict actors print NCCL's init line under their Ray prefix: in the world communicator (the
    largest nranks) the rank is the global rank. The driver's `Unhandled error ... ray::WorkerDict.update_actor()
    (pid=.., ip=..)` report, and the remote traceback printed under it with no prefix down to its exception, are
    that rank's. A sub-communicator's rank (tensor parallel, nranks 2) states nothing."""
    res = _scan(tmp_path, [
        _init("22412", 2), _init("22415", 3), _init("22415", 1, nranks=2),
        "2025-03-04 10:31:55,118\tERROR worker.py:440 -- Unhandled error (suppress with "
        "'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_update_actor() (pid=22415, ip=10.20.0.11, "
        "actor_id=7e2d4c6a8b0f1e3d5c7a9b1d01000000, repr=<verl.single_controller.ray.base.WorkerDict object at "
        "0x7f2c5c1b3e50>)",
        '  File "/opt/verl/verl/workers/fsdp_workers.py", line 839, in update_actor',
        "    metrics = self.actor.update_policy(data=data)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB. GPU 3 has a total capacity of "
        "79.10 GiB of which 2.04 GiB is free.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. (a later report, not under it)"])
    (f,) = res.files
    oom = sorted((h.line, h.rank) for h in f.hits if h.pattern == "cuda.oom")
    assert oom[0] == (7, 3), oom  # under the report: pid 22415's world rank, not its sub-communicator rank 1
    assert oom[1][1] is None, oom  # the next exception is not part of the report's traceback


def test_a_ray_worker_log_file_is_its_process_s(tmp_path):
    """The session's logs/ folder holds each worker's stdout and stderr as worker-<id>-<job>-<pid>.out/.err, lines
    without Ray's prefix: the rank NCCL's init line states in the .out is the rank of the OOM in the .err (same pid);
    another worker's files (another pid) stay its own."""
    logs = tmp_path / "ray_logs"
    logs.mkdir()
    for rank, pid, wid in ((5, "58226", "f165c8ce36e2f24b43000de01b2ed40ed3addccb"),
                           (3, "58220", "8534f45738d048ec0f1099c6c3e1b258fd724452")):
        (logs / f"worker-{wid}-01000000-{pid}.out").write_text(
            f"h100-pod-07:{pid}:{pid} [0] NCCL INFO comm 0x793d0e40 rank {rank} nranks 8 cudaDev 0 nvmlDev {rank} "
            "busId ab000 commId 0x7c1f02a9d3be5518 - Init COMPLETE\n")
    oom = [x.split(") ", 1)[1] for x in _oom(3)]  # the same traceback, without Ray's echo prefix
    (logs / "worker-f165c8ce36e2f24b43000de01b2ed40ed3addccb-01000000-58226.err").write_text("\n".join(oom) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [5], d.headline


def test_a_pid_that_two_workers_share_is_no_link(tmp_path):
    """Two nodes' workers may share a pid; the worker id in the file name is the cluster-wide key: another worker's
    stated rank is not this worker's crash's."""
    (tmp_path / "nodeA").mkdir()
    (tmp_path / "nodeB").mkdir()
    (tmp_path / "nodeA" / "worker-f165c8ce36e2f24b43000de01b2ed40ed3addccb-01000000-4242.out").write_text(
        "h100-pod-07:4242:4242 [0] NCCL INFO comm 0x793d0e40 rank 5 nranks 8 cudaDev 0 nvmlDev 5 busId ab000 commId "
        "0x7c1f02a9d3be5518 - Init COMPLETE\n")
    oom = [x.split(") ", 1)[1] for x in _oom(3)]
    (tmp_path / "nodeB" / "worker-8534f45738d048ec0f1099c6c3e1b258fd724452-01000000-4242.err").write_text(
        "\n".join(oom) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [], d.headline
