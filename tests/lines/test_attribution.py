"""Tests for tools.lines.attribution: verbatim real-format prefixes (FORMATS.md §0–§8, shared/incidents)."""
from __future__ import annotations

import timeit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainlog_debugger.tools.lines.attribution import Attribution, attribute_line, strip_prefixes
from trainlog_debugger.tools.sources.paths import PathHint, attribute_path

# (line, rank, local_rank, node, pg_rank)
LINES = [
    # c10 logger (no space) and Python excepthook (space)
    ("[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800439 milliseconds before timing out.",
     1, None, None, 1),
    ("[rank368]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) Rank 368] "
     "First PG on this rank to signal dumping.", 368, None, None, 368),
    ("[rank5]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 5] Process group "
     "watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=67, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
     "milliseconds before timing out.", 5, None, None, 5),
    ('[rank3]:   File "train.py", line 9, in <module>', 3, None, None, None),
    ("[rank3]: Traceback (most recent call last):", 3, None, None, None),
    ("[rank0]:[W1105 12:00:00.000000000 ProcessGroupNCCL.cpp:1250] Warning: x", 0, None, None, None),
    # torchrun --tee, stacked
    ("[default2]:[rank2]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) "
     "Rank 368] First PG on this rank to signal dumping.", 2, 2, None, 368),
    ("[default3]:Traceback (most recent call last):", None, 3, None, None),
    ("[trainer12]:[rank44]: RuntimeError: boom", 44, 12, None, None),
    # TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE '[${rank}]:'
    ("[12]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] boom", 12, None, None, None),
    # srun --label, incl. het job
    (" 3: [rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
     "operation timeout", 3, None, None, 3),
    ("15: Traceback (most recent call last):", 15, None, None, None),
    (" 0: hello", 0, None, None, None),
    ("P1  3: hello", 3, None, None, None),
    # srun launches one torchrun per node: the label is a node index, not the rank
    (" 1: [default3]:hello", None, 3, None, None),
    (" 1: [default3]:[rank11]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] x", 11, 3, None, None),
    # pdsh / DeepSpeed
    ("10.3.0.41: [rank22]: Traceback (most recent call last):", 22, None, "10.3.0.41", None),
    ("node2: RuntimeError: NCCL error", None, None, "node2", None),
    ("worker-1: [2024-05-01 10:00:00,000] [INFO] [launch.py:138:main] 0 NCCL_IB_DISABLE=1",
     None, None, "worker-1", None),
    ("slurmstepd-gpu-node-17: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 ***",
     None, None, "gpu-node-17", None),
    # Ray
    ("(RayWorkerWrapper pid=270291, ip=10.175.94.190) INFO 05-01 10:00:00 worker.py:12] hi",
     None, None, "10.175.94.190", None),
    ("(Worker[rank=8] pid=123, ip=10.0.0.5) RuntimeError: x", 8, None, "10.0.0.5", None),
    ("(TrainWorker pid=77, ip=10.0.0.6) [rank8]: Traceback (most recent call last):", 8, None, "10.0.0.6", None),
    ("(pid=4242) hello", None, None, None, None),
    # NCCL host prefix (real, shared/incidents); cudaDev is NOT a rank
    ("node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
     None, None, "node23", None),
    ("H100-5:68738:69060 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe80::966d:ae03:9c:f5f8%ib0<39391> with error 4, opcode 32639, len 32639, vendor err 81 (Send)",
     None, None, "H100-5", None),
    ("dgxa100:1050:1315 [0] NCCL INFO Channel 03/0 : 0[90000] -> 1[1000] [send] via NET/Socket/3",
     None, None, "dgxa100", None),
    ("[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got "
     "completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send)",
     None, None, "tpgds-aihub0007", None),
    ("node1:100:200 [0] NCCL INFO [Rank 4] ncclCommInitRankConfig comm 0x1 rank 4 nranks 8 - Init START",
     None, None, "node1", 4),
    ("node1:100:200 NCCL CALL ncclAllReduce(0x1)", None, None, "node1", None),
    # PG prefixes: rank only for legacy '[Rank r]' or the default PG
    ("[E ProcessGroupNCCL.cpp:455] [PG 0 Rank 25] boom", 25, None, None, 25),
    ("[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception", 1, None, None, 1),
    ("[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 0]  failure detected",
     None, None, None, 0),
    ("[E ProcessGroupNCCL.cpp:1] [PG ID 2 PG GUID 3 Rank 3] boom", None, None, None, 3),
    ("[rank7]:[E ProcessGroupNCCL.cpp:1] [PG ID 2 PG GUID 3(mesh_dp) Rank 3] boom", 7, None, None, 3),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE)", 3, None, None, 3),
    ("[Rank 2] (after 10 iterations) memory (MB) | allocated: 1.00 | max allocated: 2.00", 2, None, None, 2),
    # NeMo DebugNeMoFormatter
    ("[NeMo I 2025-04-11 14:46:18 mod:12 rank:3] msg", 3, None, None, None),
    ("\x1b[1;32m[NeMo W 2025-04-11 14:46:18 nemo_logging:393 rank:7]\x1b[0m careful", 7, None, None, None),
    # tqdm / ANSI
    ("Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46][rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] "
     "[Rank 0] Watchdog caught", 0, None, None, 0),
    (" 4: 10%|#   | 1/10 [00:01<00:09]\r 20%|##  | 2/10\r[rank4]:[E709 17:05:38.162555850 X.cpp:1] y",
     4, None, None, None),
    ("\x1b[31m[rank6]:\x1b[0m Traceback (most recent call last):", 6, None, None, None),
    ("[rank2]: boom\r\n", 2, None, None, None),
]

NEAR_MISSES = [
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "Traceback (most recent call last):",
    "  exitcode  : 1 (pid: 267271)",
    "  host      : f10de8a8e6e4",
    "  rank      : 1 (local_rank: 1)",
    "[1]:",
    "[0]:   ",
    "12:34:56 something",
    "2024-11-05 12:00:00 something: x",
    "WARNING:root:something",
    "WARNING: something",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "torch.distributed.DistBackendError: NCCL error in: x",
    "torch.distributed.elastic.multiprocessing.api: [WARNING] x",
    "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)",
    "slurmstepd: error: *** JOB 123 ON n1 CANCELLED AT 2024-11-05T12:34:56 ***",
    "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device",
    "W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] Sending process 2711",
    "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.",
    "[2024-05-01 10:00:00,000] [INFO] [launch.py:138:main] hi",
    "File line 3: foo",
    "   line 3: foo",
    "0003: zero padded is not srun",
    "        3: too wide for srun",
    "fp16: True",
    "gpu0: 45%",
    "ResNet50: accuracy 0.76",
    "GPT2: hello",
    "model.layers.3.mlp: torch.Size([4])",
    "Note: x",
    "eth0: link up",
    "(some remark) text",
    "[rank]: no number",
    "[Rank x] nope",
    "12:00 [3] NCCL INFO x",
    " [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 |",
]


@pytest.mark.parametrize("line,rank,local_rank,node,pg_rank", LINES)
def test_attribute_line_table(line, rank, local_rank, node, pg_rank):
    a = attribute_line(line)
    assert (a.rank, a.local_rank, a.node, a.pg_rank) == (rank, local_rank, node, pg_rank), a


@pytest.mark.parametrize("line, rank", [("[1,6]<stderr>:RuntimeError: x", 6), ("[1,12]<stdout>:gpu-a:21877:21877 [0] "
                                         "NCCL INFO Bootstrap", 12), ("[5]<stderr>:Traceback", 5),
                                         ("[1,6]<other>:x", None), ("[1,6]:x", None)])
def test_mpi_and_horovod_output_tags_name_the_world_rank(line, rank):
    """Open MPI's `--tag-output` writes `[jobid,rank]<stream>:` before every line of a rank, horovodrun
    `[rank]<stream>:`: a bundle of mpirun-launched ranks names its culprit only through them."""
    assert attribute_line(line).rank == rank


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_misses_give_no_attribution(line):
    a = attribute_line(line)
    assert (a.rank, a.local_rank, a.node, a.pg_rank) == (None, None, None, None), a


@pytest.mark.parametrize(
    "line,stripped",
    [
        ('[rank3]:   File "train.py", line 9', '  File "train.py", line 9'),  # indentation kept
        ("[default2]:[rank2]:[E808 04:21:41.161045406 X.cpp:1] m", "[E808 04:21:41.161045406 X.cpp:1] m"),
        (" 3: [rank3]: Traceback", "Traceback"),
        ("10.3.0.41: [rank22]: x", "x"),
        ("(RayWorkerWrapper pid=1, ip=10.0.0.1) x", "x"),
        ("node23:12098:12141 [2] NCCL INFO x", "node23:12098:12141 [2] NCCL INFO x"),  # emitter header kept
        ("worker-1: [2024-05-01 10:00:00,000] [INFO] x", "[2024-05-01 10:00:00,000] [INFO] x"),
        ("a\rb [rank1]:[E1 X.cpp:1] y", "[E1 X.cpp:1] y"),
        ("RuntimeError: x", "RuntimeError: x"),
        ("[1]:", "[1]:"),
        # mpirun --tag-output (Open MPI 4 orte iof, 5 prte) and horovodrun (safe_shell_exec.py): the world rank
        ("[1,6]<stderr>:RuntimeError: CUDA out of memory.", "RuntimeError: CUDA out of memory."),
        ("[3]<stdout>:[2024-05-01 10:00:00,000] INFO x", "[2024-05-01 10:00:00,000] INFO x"),
        ("\x1b[32mINFO\x1b[0m x\n", "INFO x"),
    ],
)
def test_strip_prefixes(line, stripped):
    assert strip_prefixes(line) == stripped


def test_body_and_styles():
    line = "[default2]:[rank2]:[E808 04:21:41.161045406 X.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 2] m"
    a = attribute_line(line)
    assert line[a.body:].startswith("[E808")
    assert a.styles == ("torchrun_role", "rank_prefix", "pg_prefix")
    a = attribute_line(" 3: [rank3]: x")
    assert a.body == 13 and a.styles == ("srun_label", "rank_prefix")
    a = attribute_line("\x1b[31m[rank6]:\x1b[0m Traceback")  # body indexes the ORIGINAL line
    assert "\x1b[31m[rank6]:\x1b[0m Traceback"[a.body:] == "Traceback"
    a = attribute_line("node23:12098:12141 [2] NCCL INFO x")
    assert a.cuda_dev == 2 and a.rank is None and a.styles == ("nccl_host",)
    assert attribute_line("") == Attribution()
    assert isinstance(attribute_line("x"), Attribution)


@given(st.text())
@settings(max_examples=400, deadline=None)
def test_never_raises_and_idempotent(text):
    a = attribute_line(text)
    assert 0 <= a.body <= len(text)
    once = strip_prefixes(text)
    assert strip_prefixes(once) == once


_PREFIXY = st.lists(
    st.sampled_from(["[rank3]:", "[rank3]: ", " 3: ", "[default1]:", "[7]:", "node2: ", "10.0.0.1: ", "\r", "\x1b[",
                     "\x1b[0m", "(W pid=1, ip=1.2.3.4) ", "[PG 0 Rank 1] ", "[Rank 2] ", "a", " ", ":", "[", "]", "1"]),
    max_size=12,
).map("".join)


@given(_PREFIXY)
@settings(max_examples=400, deadline=None)
def test_idempotent_on_prefix_soup(text):
    once = strip_prefixes(text)
    assert strip_prefixes(once) == once
    attribute_line(text)


@given(st.integers(min_value=0, max_value=10**6), st.text())
@settings(max_examples=300, deadline=None)
def test_rank_prefix_any_suffix(n, suffix):
    assert attribute_line("[rank%d]:" % n + suffix).rank == n


@given(st.integers(min_value=0, max_value=4095), st.text(alphabet=st.characters(blacklist_characters="\r")))
@settings(max_examples=200, deadline=None)
def test_srun_then_rank_prefix(n, suffix):
    assert attribute_line("%4d: [rank%d]:" % (n, n) + suffix).rank == n


def test_speed():
    line = ("[rank5]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 5] Process group "
            "watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout")
    per = min(timeit.repeat(lambda: attribute_line(line), number=2000, repeat=3)) / 2000
    assert per < 50e-6  # typical ~5 µs; generous bound for slow CI


# ------------------------------------------------------------------------------------------ paths
PATHS = [
    ("rank_3.log", dict(rank=3)),
    ("logs/rank3.log", dict(rank=3)),
    ("rank-3.txt", dict(rank=3)),
    ("megatron-ckpt-save-slow-io-timeout/rank5.log", dict(rank=5)),
    ("train_rank12.out", dict(rank=12)),
    ("worker_rank3.log", dict(rank=3)),
    ("local_rank2.log", dict(local_rank=2)),
    ("node_rank1.log", dict(node_index=1)),
    ("/tmp/torchelastic_d676diln/none_yafvf25t/attempt_0/1/error.json", dict(local_rank=1, attempt=0)),
    ("logs.tar.gz!run/attempt_0/3/stderr.log", dict(local_rank=3, attempt=0)),
    ("run/attempt_2/7/stdout.log", dict(local_rank=7, attempt=2)),
    ("error-4891784-3.out", dict(job_id="4891784", node_index=3)),
    ("slurm-4891784.out", dict(job_id="4891784")),
    ("slurm-123_4.out", dict(job_id="123_4")),
    ("job-123-task-7.out", dict(job_id="123", rank=7)),
    ("node_H100-1.log", dict(node="H100-1")),
    ("node-gpu17.log", dict(node="gpu17")),
    # a rank label after the node's name is the rank's, not part of the node's (16 rank files are 2 nodes, not 16)
    ("logs/node-b14.rank10.err", dict(node="b14", rank=10)),
    ("node-a1-local_rank3.out", dict(node="a1", local_rank=3)),
    ("nccl-socket-ifname-docker-bridges/node_dgxa100.log", dict(node="dgxa100")),
    ("aistarget.ais-target-3.INFO.0821-191752.4171", dict(node="ais-target-3")),
    ("aislogs-x/aistarget-WBvt8081.tar.gz!aistarget.ais-target.INFO.0821-191752.4171", dict(node="WBvt8081")),
    ("vertex/workerpool0-1.json", dict(node="workerpool0-1")),
    ("gcloud-logs-workerpool1-0.jsonl", dict(node="workerpool1-0")),
]
EMPTY_PATHS = ["worker_3.log", "out_7.log", "combined.log", "node_3.log", "train.log", "ranks.txt",
               "torchelastic_summary.log", "logs.tar.gz", "3/stderr.log", "epoch_3.log", ""]


@pytest.mark.parametrize("path,fields", PATHS)
def test_attribute_path(path, fields):
    h = attribute_path(path)
    got = {k: getattr(h, k) for k in ("rank", "local_rank", "node", "node_index", "attempt", "job_id")
           if getattr(h, k) is not None}
    assert got == fields
    assert h.style


@pytest.mark.parametrize("path", EMPTY_PATHS)
def test_attribute_path_empty(path):
    assert attribute_path(path) == PathHint()


@given(st.text())
@settings(max_examples=200, deadline=None)
def test_attribute_path_never_raises(text):
    assert isinstance(attribute_path(text), PathHint)


def test_one_local_to_global_mapping_and_conflicts_make_it_ambiguous():
    """`[default1]:[rank5]:` maps local 1 → rank 5 in that file; a later `[default1]:[rank6]:` in the same file
    means the mapping cannot be trusted (two agents' output interleaved), so local 1 maps to no rank (-1)."""
    from trainlog_debugger.tools.lines.attribution import note_local_rank
    m: dict[int, int] = {}
    note_local_rank(m, 1, 5)
    note_local_rank(m, 1, 5)
    note_local_rank(m, 2, 6)
    assert m == {1: 5, 2: 6}
    note_local_rank(m, 1, 9)
    assert m == {1: -1, 2: 6}


@pytest.mark.parametrize("path,node", [("node_H100-1.log", "H100-1"), ("node_gpu48_pyspy.log", "gpu48"),
                                       ("logs/host-a7_dmesg.txt", "a7"), ("node_b12_stderr.out", "b12")])
def test_a_word_for_what_the_file_holds_is_not_part_of_the_node(path, node):
    assert attribute_path(path).node == node


def test_huge_numbers_are_no_prefix_and_raise_nothing():
    """A rank of thousands of digits (hostile input) is not a rank prefix: no exception, no rank."""
    from trainlog_debugger.tools.lines.attribution import attribute_line
    from trainlog_debugger.tools.sources.paths import attribute_path
    a = attribute_line("[rank" + "9" * 5000 + "]: Traceback (most recent call last):")
    assert a.rank is None
    assert attribute_line("node1:" + "7" * 400 + ":1 [0] NCCL INFO x").rank is None
    assert attribute_path("logs/rank_" + "1" * 3000 + ".log").rank is None
    assert attribute_line("[rank1234567]: ok").rank == 1234567
