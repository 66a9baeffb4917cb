"""Reading by meaning (tools/rules/meaning.py): the upstream tables make a known line a candidate of its documented
category; where nothing decisive fires, the lexicon reads the onset line of the rank that stands out, weakly and
cited; "no fault found" only where no rank printed an error-level line; culprits from a line's own words."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.lines.attribution import named_in_text
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.rules import meaning
from trainlog_debugger.tools.sources.messages import catalog as messages


def _diagnose(tmp_path, files: dict[str, str]):
    root = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    with open_bundle(root) as b:
        return investigate(b)


@pytest.mark.parametrize("line, category", [
    ("Task was killed due to the node running low on memory.", "oom"),
    # a run-time build (Triton's launcher stub, a JIT extension) without the Python headers: the environment's
    ("/tmp/tmpq2c8v0nk/main.c:5:10: fatal error: Python.h: No such file or directory", "config"),
    # a Japanese shell's `Killed` (bash 5.2 bash.mo / glibc libc.mo msgstr): killed from outside, as in English
    ("./train.sh: 9 行:  3011 強制終了            python3 finetune.py --config cfg.yaml", "infrastructure"),
    # the schedulers' kills for a job's memory: Slurm's cgroup handler, LSF, PBS
    ("slurmstepd: error: Some of your processes may have been killed by the cgroup out-of-memory handler.", "oom"),
    ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "oom"),
    ("=>> PBS: job killed: mem 123456789kb exceeded limit 100000000kb", "oom"),
    ("torch.OutOfMemoryError: CUDA error: out of memory", "oom"),
    ("E0312 worker.cc:88] Failed to write /ckpt/step_100: Stale file handle", "storage_io"),
    ("Read-only file system while saving", "storage_io"),
    # an error on the checkpoint path that names nothing else: the storage is the first suspect
    ("ERROR trial_runner.py:1319 -- Trial TorchTrainer_e17ed_00000: Error handling checkpoint /home/ray/ray_results/"
     "checkpoint_000045", "storage_io"),
    ("RuntimeError: DataLoader worker 3 timed out after 600 seconds", "data_loading_stall"),
    ("Xid 79 seen on this GPU, aborting", "gpu_cuda"),
    ("GPU 3 has fallen off the bus.", "gpu_cuda"),
    ("cudaErrorSystemNotReady: system not yet initialized (is the fabric manager running?)", "infrastructure"),
    ("worker 7 failed: connection reset by peer 10.0.0.4:29500", "network"),
    ("ibv_poll_cq failed on mlx5_2 port 1", "network"),
    # an HTTP client that could not reach its host (urllib3's words, as requests and huggingface_hub print them)
    ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='hub.example.org', port=443): Max retries exceeded "
     "with url: /api/models (Caused by NewConnectionError('Failed to establish a new connection: [Errno 101]'))",
     "network"),
    # transformers 4.x's wording when the Hub is out of reach: the connection, before the `config.json` it names
    ("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files "
     "and it looks like org/model is not the path to a directory containing a file named config.json.", "network"),
    ("ERROR: failed to bind: Address already in use (port 29500)", "config"),
    ("ValueError: failed to decode record 1834 in shard-00017.parquet: corrupt page", "data"),
    ("step 1200: loss is nan, stopping", "numerical"),
    ("slurmstepd: error: *** JOB 123 ON node7 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***", "infrastructure"),
    ("AttributeError: 'NoneType' object has no attribute 'shape'", "software"),
    ("ValueError: host not found: Name or service not known", "config"),
    ("urllib.error.HTTPError: HTTP Error 429: Too Many Requests", "storage_io"),
    ("KeyError: 'LOCAL_RANK'", "config"),  # a launcher's variable: started without torchrun
    ("*** Error in `python': double free or corruption (!prev): 0x000055d5c9a0f2a0 ***", "software"),  # glibc
    ("wandb.errors.UsageError: api_key not configured (no-tty)", "config"),
    ("deepspeed.runtime.config.DeepSpeedConfigError: Optimizer type adamw_8bit is not supported", "config"),
    ("ValueError: Please specify `target_modules` in `peft_config`", "config"),
    # Triton's on-chip shared memory is the kernel's configuration, not /dev/shm
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: "
     "101376.", "software"),
    # an object store's own client library says whose error it is, whatever words follow
    ('botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: "https://s3.us-east-1.amazonaws.com/b/k"',
     "storage_io"),
    ("google.api_core.exceptions.ServiceUnavailable: 503 GET https://storage.googleapis.com/storage/v1/b/x",
     "storage_io"),
    ("LustreError: 11-0: scratch-OST0007-osc-ffff8a: operation ost_write to node 10.0.0.9@o2ib failed: rc = -107",
     "storage_io"),
    ("webdataset.handlers: tarfile.ReadError: unexpected end of data", "data"),
    # frameworks checking their settings (Megatron-LM training/arguments.py, DeepSpeed runtime/config.py and
    # runtime/zero/config.py): the AssertionError is the check, the setting is the fault
    ("AssertionError: --use-checkpoint-args requires --load or --pretrained-checkpoint argument", "config"),
    ("AssertionError: When using upcycling, the --save option must be specified.", "config"),
    ("AssertionError: num_attention_heads (28) must be divisible by tensor_model_parallel_size (8)", "config"),
    ("ValueError: The global batch size (7 x 1) must be evenly divisible by the number of generations (8).", "config"),
    ("ValueError: Number of devices 8 must equal the product of mesh_shape (2, 8)", "config"),
    ("AssertionError: Fp16_master_weights_and_grads is only supported with ZeRO Stage 2 for now.", "config"),
    ("AssertionError: Partial offloading only supported for ZeRO Stage 3.", "config"),
    ("AssertionError: 1bit-Adam is not compatible with ZeRO", "config"),
    ("AssertionError: Micro batch size per gpu: 0 has to be greater than 0", "config"),
    ("AssertionError: Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is "
     "enabled", "config"),
    # a setting asks for what the build lacks: Cray MPICH's GPU-aware MPI without its GTL library linked in
    ("MPICH ERROR [Rank 0] [job id ] [Thu Jan 30 22:35:30 2025] [x3006c0s19b1n0] - Abort(-1) (rank 0 in comm 0): "
     "MPIDI_CRAY_init: GPU_SUPPORT_ENABLED is requested, but GTL library is not linked", "config"),
    ("AssertionError: Torch not compiled with CUDA enabled", "config"),
    # ... and program errors that stay program errors (no setting named, no setting's words)
    ("RuntimeError: The size of tensor a (1024) must match the size of tensor b (2048) at non-singleton dimension 1",
     "software"),
    ("TypeError: forward() got an unexpected keyword argument 'labels'", "software"),
    ("AssertionError: attempting to reduce an unsupported grad type: torch.int64", "software"),
    ("KeyError: 'the requested key was not found in the cache'", "software"),
])
def test_the_lexicon_reads_what_a_line_says(line, category):
    got = messages.read_by_words(line)
    assert got is not None and got[0] == category, got


def test_the_lexicon_says_nothing_of_a_line_without_such_words():
    assert messages.read_by_words("iteration 100 | lm loss 2.31 | grad norm 0.9") is None


def test_an_unknown_error_in_a_paste_is_read_by_its_words_weakly_and_cited(tmp_path):
    d = _diagnose(tmp_path, {"combined.log": "iteration 4 | lm loss 2.46\nE worker.cc:88] could not open "
                                             "/data/shard-17.tar: Stale file handle\n"})
    assert d.category == "storage_io" and d.status == Status.inconclusive and d.confidence == "low"
    assert d.chain[0].id == "meaning.lexicon" and d.chain[0].evidence[0].line == 2
    assert d.chain[0].facts["words"] == "Stale file handle"


def test_the_rank_that_stands_out_is_the_reading_s_culprit(facts_from):
    ok = "".join(f"[rank{{r}}]: iteration {i} | lm loss {2.5 - i / 100:.2f}\n" for i in range(1, 6))
    files = {f"rank{r}.log": ok.format(r=r).splitlines() for r in range(4)}
    files["rank2.log"].append("[rank2]: E worker.cc:88] prefetch aborted: cannot read /data/shard-17.tar (EIO)")
    (c,) = meaning.read_by_meaning(facts_from(files))
    assert c.category == "storage_io" and c.ranks == [2] and "the only one of 4 ranks" in c.summary


def test_the_same_error_on_every_rank_names_no_rank(facts_from):
    files = {f"rank{r}.log": [f"[rank{r}]: iteration 1 | lm loss 2.5",
                              f"[rank{r}]: E io.cc:7] write aborted: Disk quota exceeded on /scratch"] for r in range(4)}
    (c,) = meaning.read_by_meaning(facts_from(files))
    assert c.category == "storage_io" and c.ranks == []  # nobody singled out
    assert "first of" not in c.summary


def test_a_cascade_line_is_never_the_onset(facts_from):
    """Every rank's NCCL watchdog timeout is cascade; the one unexplained error line on rank 1 is the onset, even
    though it comes later in the file."""
    wd = ("[rank{r}]:[E1105 12:34:{s:02d}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
          "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
          "600010 milliseconds before timing out.")
    files = {f"rank{r}.log": [wd.format(r=r, s=10 + r)] for r in range(3)}
    files["rank1.log"].append("[rank1]:[E1105 12:34:30.000000000 reader.cc:9] prefetch thread aborted: cannot read "
                              "object s3://bucket/shard-9 (HTTP 503)")
    (c,) = meaning.read_by_meaning(facts_from(files))
    assert "prefetch thread aborted" in c.evidence[0].text and c.ranks == [1]


def test_no_error_line_anywhere_is_still_no_fault_found(tmp_path):
    files = {f"rank{r}.log": f"[rank{r}]: iteration 1 | lm loss 2.5\n[rank{r}]: iteration 2 | lm loss 2.4\n"
             for r in range(2)}
    d = _diagnose(tmp_path, files)
    assert d.category == "none" and d.status == Status.inconclusive
    assert not any(f.id == "meaning.lexicon" for f in d.chain)


def test_nccl_tests_own_failure_line_is_an_error_line(tmp_path):
    """nccl-tests output is read as a hardware measurement, but its `Test NCCL failure` line is an error like any
    other: it was "no fault found" (the run's lines were skipped with nvidia-smi's value tables)."""
    head = ("# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 0 graph: 0\n#\n# Using devices\n#  Rank  0 Group  0 Pid 3740409 on node-a device  0 [0x01] "
            "NVIDIA RTX A6000\n")
    d = _diagnose(tmp_path, {"out.log": head + "node-b: Test NCCL failure common.cu:959 'internal error - please report "
                                             "this issue to the NCCL developers / '\n"})
    assert d.category != "none" and "Test NCCL failure" in d.chain[0].evidence[0].text


def test_a_one_line_paste_with_a_rank_in_its_words_names_the_rank(tmp_path):
    d = _diagnose(tmp_path, {"combined.log": "[Rank 5] ERROR: could not allocate pinned host buffer: cannot allocate "
                                             "memory\n"})
    assert d.category == "oom" and d.culprit_ranks == [5]


@pytest.fixture
def demo_table(monkeypatch):
    """One table entry, in place of the shipped tables, for the table rule's mechanics."""
    m = messages.Message("demo", "v1", "Failed to create comm %s: fabric partition %s is not ready", "src/a.cc:12",
                         "infrastructure", "trigger", "the fabric partition the job needs is not up",
                         "ask the admins to bring the partition up (nvidia-fabricmanager status)",
                         "x", syntax="printf")
    monkeypatch.setattr(messages, "tables", lambda: {"demo": (m,)})
    messages._index.cache_clear()
    yield m
    messages._index.cache_clear()


def test_a_table_trigger_is_a_cited_candidate_with_its_meaning_and_action(tmp_path, demo_table):
    d = _diagnose(tmp_path, {"combined.log": "[rank0]: iteration 1 | lm loss 2.5\n[rank0]: Failed to create comm "
                                             "0x7f: fabric partition p3 is not ready\n"})
    top = d.chain[0]
    assert top.id == "table.demo" and d.category == "infrastructure"
    assert top.facts["upstream"] == "demo v1 src/a.cc:12" and demo_table.action in d.recommendations
    assert top.evidence[0].line == 2


@pytest.mark.parametrize("text, rank, host", [
    ("[Rank 3] Watchdog caught collective operation timeout", 3, None),
    ("rank 1 and rank 0 both on CUDA device 1000", None, None),
    ("RANK=5 failed to start", 5, None),
    ("local_rank: 2 raised an error", 2, None),
    ("-- Process 1 terminated with the following error:", 1, None),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGKILL", 3, None),
    ("Child process 23817 terminated abnormally", None, None),  # a pid, not spawn's index
    ("Worker process 4123 terminated with exit code 1", None, None),  # a pid in another's words
    ("srun: error: node17: task 3: Segmentation fault", 3, None),
    ("comm 0x1 rank 0 nranks 16 cudaDev 3", 0, None),
    ("nranks 16 cudaDev 3", None, None),
    ("1 Workers killed due to memory pressure (OOM) at node (ID: 1f2e, IP: 10.0.0.5)", None, "10.0.0.5"),
    ("socket error on host gpu-node-7.cluster", None, "gpu-node-7.cluster"),
    # Ray's GCS on a node it lost (python/ray/_private/worker.py: `The node with node id: ... and address: ... and node
    # name: ... has been marked dead`)
    ("The node with node id: 9426f445 and address: 172.16.4.12 and node name: 172.16.4.12 has been marked dead "
     "because the detector has missed too many heartbeats from it.", None, "172.16.4.12"),
    ("opened /logs/rank0.log", None, None),
    ("local rank 2 failed to start", 2, None),  # a local rank alone is read where nothing else names one
    ("tp rank 2 of rank 9 failed", 9, None),     # a tensor-parallel rank is not the job's rank
    ("the worker of rank 3. It failed", 3, None),
    ("socket error: connect to host fe80::1%ib0 failed", None, None),
    ("Error on node startup, retrying", None, None),
    ("Xid errors on instance: ip-26-0-1-2, Error: May 29 01:37:38 ip-26-0-1-2 kernel: [2570.8] NVRM: Xid (PCI:0000:90:1c): "
     "64, pid=1", None, "ip-26-0-1-2"),
])
def test_named_in_text(text, rank, host):
    assert named_in_text(text) == (rank, host)


def test_the_peer_that_refused_the_connection_is_the_node_to_look_at(facts_from):
    from trainlog_debugger.tools.rules.network import socket
    (c,) = socket(facts_from({"nccl.log": [
        "r11i6n2:486514:486651 [1] include/socket.h:403 NCCL WARN Connect to 10.148.3.247<56821> failed : "
        "Connection refused"]}))
    assert c.nodes == ["10.148.3.247"] and c.ranks == [] and "10.148.3.247 refused" in c.summary
    (c,) = socket(facts_from({"nccl.log": [  # a reset names no peer to blame: the printing node stays
        "node2:1234:1299 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node3<46512>"]}))
    assert c.nodes == ["node2"]


# -- what the review of issue 25 found: readings must never outrank proof or a decisive rule ----------------------
def _run(tmp_path, text: str):
    root = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    (root / "combined.log").write_text(text)
    with open_bundle(root) as b:
        return investigate(b)


FINISHED = "{'train_runtime': 812.4, 'train_samples_per_second': 9.8, 'train_loss': 2.31, 'epoch': 3.0}\n"


@pytest.mark.parametrize("noise", [
    "node1:1234:1300 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n",
    "W1105 12:00:00.000 123 tokenization.py:88] Could not estimate the number of tokens of the input\n",
    "E0000 00:00:1730800000.123456 4242 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register "
    "factory for plugin cuDNN when one has already been registered\n",
    "WARNING:jax._src.xla_bridge:An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not "
    "installed. Falling back to cpu.\n",
    "{'loss': 2.91, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.01}\n",
])
def test_a_run_that_finished_is_not_failed_by_a_warning_s_words(tmp_path, noise):
    d = _run(tmp_path, "{'loss': 3.1, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.0}\n" + noise + FINISHED)
    assert d.status == Status.completed and d.category == "none", d.headline


def test_a_table_trigger_printed_earlier_does_not_outrank_a_decisive_rule(tmp_path, demo_table):
    d = _run(tmp_path, "[rank0]: Failed to create comm 0x7f: fabric partition p3 is not ready\n"
                       "[rank0]: OSError: [Errno 28] No space left on device: '/ckpt/iter_100/model.pt'\n")
    assert d.category == "storage_io", d.headline
    assert any(a.category == "infrastructure" for a in d.alternatives)  # the reading is kept as an alternative


def test_a_rule_that_named_a_category_from_wording_is_re_read_by_the_table(facts_from):
    from trainlog_debugger.tools.diagnose import candidates
    cands = candidates(facts_from({"rank_0.log": ["[rank0]: RuntimeError: CUDA error: system not yet initialized"]}))
    c = next(c for c in cands if c.rule == "gpu.cuda_error")
    assert c.category == "infrastructure" and c.facts["category_was"] == "gpu_cuda"
    assert c.facts["upstream"].startswith("cuda ") and "fabricmanager" in c.recommendations[0]


@pytest.mark.parametrize("message, category", [
    # verl's check of a prompt against data.max_prompt_length (truncation='error'): the data, whatever the type
    ("NotImplementedError: sequence_length=1081 is larger than max_length=1024", "data"),
    # a NotImplementedError no table documents stays what its type says
    ("NotImplementedError: fused kernel for dtype float64 on this device", "software"),
])
def test_an_exception_classified_by_its_type_alone_is_re_read_by_the_table(facts_from, message, category):
    """Terminal errors classified by their type only (the weakest tier of tools/rules/terminal.py) yield to an
    upstream table that documents the very message as a trigger of another category."""
    from trainlog_debugger.tools.diagnose import candidates
    lines = ["Traceback (most recent call last):", '  File "/app/verl/utils/torch_functional.py", line 553, in '
             "postprocess_data", "    raise NotImplementedError(f\"{sequence_length=} is larger than {max_length=}\")",
             message]
    c = next(c for c in candidates(facts_from({"rank_0.log": lines})) if c.rule == "software.terminal_error")
    assert c.facts.get("by_type") is True
    assert c.category == category
    assert ("category_was" in c.facts) == (category != "software")


def test_a_collective_abort_that_names_the_network_stays_network(tmp_path):
    d = _run(tmp_path, "[rank2]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:1897] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank 2] NCCL communicator was aborted on rank 2. Original reason for failure was: NCCL error: "
                       "remote process exited or there was a network error\n")
    assert d.category == "network" and d.status != Status.completed


def test_a_broken_table_or_lexicon_is_skipped_never_a_crash(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("upstream: bad\nsyntax: printf\nmessages:\n  - template: x %s\n    source: a.c:1\n    role: trigger\n"
                   "    category: network\n    meaning: m\n    action: a\n    example: x y\n    regex: '(unclosed'\n")
    with pytest.raises(messages.TableError, match="regex does not compile"):
        messages.read_table(bad)
    lex = tmp_path / "lexicon.yaml"
    lex.write_text("rows:\n  - [oom, '(unclosed', why]\n")
    monkeypatch.setattr(messages, "LEXICON", lex)
    messages.lexicon.cache_clear()
    try:
        assert messages.read_by_words("CUDA out of memory") is None and messages.LOAD_ERRORS
        d = _run(tmp_path, "E worker.cc:88] could not open /data/shard-17.tar: Stale file handle\n")
        assert d.status != Status.completed  # read without the lexicon: still an answer
    finally:
        messages.lexicon.cache_clear()
        messages.LOAD_ERRORS.clear()


def test_ray_s_top_memory_users_table_alone_is_its_memory_monitor_kill(tmp_path):
    """Ray prints `PID\\tMEM(GB)\\tCOMMAND` only in its memory-monitor kill message (the raylet's
    TopNMemoryDebugString): a paste of just that table is a host-RAM OOM kill, read from the Ray table, not a job
    with no fault. Pasted into an issue the tabs are often spaces."""
    rows = "".join(f"{40120 + i}   11.{i:02d}   ray::WorkerDict.actor_rollout_generate_sequences\n" for i in range(4))
    d = _diagnose(tmp_path, {"combined.log": "PID     MEM(GB) COMMAND\n" + rows})
    assert d.category == "oom" and d.chain[0].evidence[0].line == 1
    d = _diagnose(tmp_path, {"ps.log": "[rank0]: iteration 9 | loss 2.3\n  PID COMMAND          MEM\n"
                                       " 4012 python train.py  11.2G\n"})
    assert d.category != "oom"  # another tool's process table is not Ray's kill message


def test_a_user_s_own_key_named_rank_is_not_a_launcher_variable():
    assert messages.read_by_words("KeyError: 'rank'")[0] == "software"


def test_nccl_s_last_error_under_c10d_s_generic_wrapper_decides(tmp_path):
    """c10d prints `ncclInvalidUsage: This usually reflects invalid usage` (software, by PyTorch's table) and then
    `Last error:` with NCCL's own reason on the next line: that reason, read through NCCL's table, is the trigger."""
    lines = ["[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:"
             "317, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5",
             "[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
             "[rank1]: Last error:",
             "[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000"]
    d = _diagnose(tmp_path, {"rank1.log": "\n".join(lines) + "\n"})
    assert d.category == "config" and d.chain[0].evidence[0].line == 4
    assert d.chain[0].id == "nccl.last_error" and d.chain[0].facts["table"] == "nccl_legacy"
    # under a system error, NCCL's reason outranks the error class's network reading
    sys_err = ["[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
               "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
               "[rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
               "error.", "[rank1]: Last error:", "[rank1]: Bootstrap : no socket interface found"]
    d = _diagnose(tmp_path, {"rank1.log": "\n".join(sys_err) + "\n"})
    assert d.category == "config" and d.chain[0].evidence[0].line == 4, d.headline
    d = _diagnose(tmp_path, {"rank1.log": "\n".join(lines[:3] + ["[rank1]: Unknown NCCL Error"]) + "\n"})
    assert d.category != "config"  # no reason given: the wrapper's reading stands


def test_nccl_s_last_error_may_be_its_network_plugin_s_warning(tmp_path):
    """aws-ofi-nccl warns through NCCL's logger, so its WARN is what ncclGetLastError returns: read through the
    plugin's table (nccl_ofi_rdma.cpp), not as NCCL's `internal error`."""
    lines = ["[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL "
             "version 2.20.5",
             "[rank1]: ncclInternalError: Internal check failed.",
             "[rank1]: Last error:",
             "[rank1]: NET/OFI Unable to insert remote address into address vector for device 1. RC: 0"]
    d = _diagnose(tmp_path, {"rank1.log": "\n".join(lines) + "\n"})
    assert d.category == "network" and d.chain[0].id == "nccl.last_error", d.headline
    assert d.chain[0].evidence[0].line == 4 and d.chain[0].facts["upstream"].startswith("mpi-ucx-ofi")


def test_the_hub_client_s_errors_are_read_from_its_table(tmp_path):
    d = _diagnose(tmp_path, {"train.log": "[rank0]: huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request "
                                          "ID: Root=1-65f0) Cannot access gated repo for url https://huggingface.co/"
                                          "meta-llama/Llama-2-7b-hf/resolve/main/config.json.\n"})
    assert d.category == "config" and "gated" in d.chain[0].summary
    d = _diagnose(tmp_path, {"train.log": "[rank0]: huggingface_hub.errors.LocalEntryNotFoundError: An error happened "
                                          "while trying to locate the file on the Hub and we cannot find the requested "
                                          "files in the local cache. Please check your connection and try again\n"})
    assert d.category == "network"


def test_a_raised_connection_reset_is_an_error_not_retry_noise(tmp_path):
    d = _diagnose(tmp_path, {"paste.log": "torch.distributed.DistNetworkError: Connection reset by peer\n"})
    assert d.category == "network"


def test_a_job_fact_on_an_error_line_does_not_hide_the_error(tmp_path):
    """c10d's store-barrier timeout names `world_size=8`: the job-facts pattern matched first and, being specific,
    kept every error pattern of the line from being tried, so a RuntimeError read as `none`."""
    d = _diagnose(tmp_path, {"paste.log": "RuntimeError: Timed out initializing process group in store based barrier "
                                          "on rank: 3, for key: store_based_barrier_key:1 (world_size=8, "
                                          "worker_count=4, timeout=0:30:00)\n"})
    assert d.category != "none" and d.chain[0].evidence[0].line == 1
    assert d.job.ranks == 8  # the fact is still read


def test_a_trainer_setting_that_transformers_refuses_is_config(tmp_path):
    """TrainingArguments' own validation (transformers' training_args.py, in the HF table): the run never trained."""
    d = _diagnose(tmp_path, {"train.log": "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                                          "    args = TrainingArguments(output_dir='o', fp16=True, bf16=True)\n"
                                          "ValueError: At most one of fp16 and bf16 can be True, but not both\n"})
    assert d.category == "config" and d.chain[0].evidence[0].line == 4


@pytest.mark.parametrize("line, category", [
    # an exception class kept in a library's exc/errors module, whatever its name
    ("torch._dynamo.exc.Unsupported: call_function BuiltinVariable(print) [ConstantVariable()] {}", "software"),
    # a trainer's own NaN check, noun after the value
    ("[Rank 0] Detected NaN loss at step 1500, stopping training", "numerical"),
    # PyTorch's own shared-memory segment is /dev/shm, not a disk; its descriptors are the open-files limit
    ("RuntimeError: unable to write to file </torch_311_2376812911>: No space left on device (28)", "infrastructure"),
    ("RuntimeError: unable to open shared memory object </torch_2034_1384598128> in read-write mode: Too many open "
     "files (24)", "config"),
    # vLLM (the table of the engine RL trainers colocate with the policy)
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine.", "oom"),
    ("ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).", "config"),
    # Open MPI's launcher saw a process die of SIGKILL, nothing else erred
    ("mpirun noticed that process rank 3 with PID 0 on node gpu-04 exited on signal 9 (Killed).", "infrastructure"),
    ("2023-03-03 05:15:30,774 WARNING worker.py:1866 -- The node with node id: 9426f4 and address: 10.130.0.113 and "
     "node name: 10.130.0.113 has been marked dead because the detector has missed too many heartbeats from it.",
     "infrastructure"),
    ("WARNING:root:NaN or Inf found in input tensor.", "numerical"),
    # a checkpoint that is not a whole zip: a save cut short or a partial copy (the storage, not the code)
    ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory", "storage_io"),
    ("Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: error running "
     "hook #0: stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
     "infrastructure"),
])
def test_a_one_line_paste_gets_the_answer_its_upstream_gives(tmp_path, line, category):
    d = _diagnose(tmp_path, {"paste.log": line + "\n"})
    assert d.category == category and d.chain[0].evidence[0].line == 1, (d.category, d.headline)


def test_the_launcher_names_whom_the_sigkill_hit(tmp_path):
    """srun prints how a task ended by strsignal (`task 5: Killed` is SIGKILL), mpirun names the rank and node: with
    the kernel's or Slurm's OOM record that is the OOM's culprit; without it, a kill from outside (TAXONOMY)."""
    d = _diagnose(tmp_path, {"slurm.out": "srun: error: gpu-node-12: task 5: Killed\n"})
    assert (d.category, d.culprit_ranks, d.culprit_nodes) == ("infrastructure", [5], ["gpu-node-12"])
    d = _diagnose(tmp_path, {"slurm.out": "srun: error: Detected 1 oom_kill event in StepId=5567.0. Some of your "
                                          "processes may have been killed by the cgroup out-of-memory handler.\n"
                                          "srun: error: gpu-node-12: task 5: Killed\n"})
    assert (d.category, d.culprit_ranks, d.culprit_nodes) == ("oom", [5], ["gpu-node-12"])
    d = _diagnose(tmp_path, {"launcher.log": "mpirun.real noticed that process rank 1 with PID 39 on node "
                                             "mpi-job-worker-1 exited on signal 9 (Killed).\n"})
    assert (d.category, d.culprit_ranks, d.culprit_nodes) == ("infrastructure", [1], ["mpi-job-worker-1"])


def test_masking_what_differs_rank_to_rank_changes_no_table_reading():
    """meaning.table_key lets 4,096 ranks' copies of one message be matched once: sound only if no entry reads a
    rank number, a glog header or NCCL's host:pid:tid prefix. Checked on every entry's own example line, and on that
    line as other ranks would print it."""
    from trainlog_debugger.tools.lines.attribution import strip_prefixes
    from trainlog_debugger.tools.rules.meaning import table_key
    from trainlog_debugger.tools.sources.messages.catalog import match_many, messages, pick_best
    examples = [m.example for m in messages() if m.example]
    bodies = [strip_prefixes(x) for x in examples]
    plain = [pick_best(h) for h in match_many(bodies)]
    masked = [pick_best(h) for h in match_many([strip_prefixes(table_key(x)) for x in examples])]  # as _tables_of
    differ = [(b, p and p.id, q and q.id) for b, p, q in zip(bodies, plain, masked) if p is not q]
    assert not differ, differ[:5]
    a = "[rank3]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation"
    b = "[rank9]:[E1105 12:00:02.987654321 ProcessGroupNCCL.cpp:616] [Rank 9] Watchdog caught collective operation"
    assert strip_prefixes(table_key(a)) == strip_prefixes(table_key(b))
    assert table_key("node-7:12345:12390 [3] NCCL WARN x") == table_key("node-8:2345:2390 [5] NCCL WARN x")


def test_an_error_class_is_a_lead_and_its_cause_decides(tmp_path):
    """NCCL's `unhandled system error` names a class (a socket, /dev/shm, ibverbs or NVML call failed), not which:
    its table entry is marked `lead`, so alone it reads inconclusive at low confidence; the WARN line that says which
    call failed decides."""
    tb = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    dist.barrier()\n"
          "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    assert [m.lead for m in messages.match(tb.splitlines()[-1]) if m.name == "ncclSystemError"] == [True]
    alone = _diagnose(tmp_path, {"rank_0.log": tb})
    assert (alone.status, str(alone.confidence)) == (Status.inconclusive, "low")
    warn = ("node1:123:456 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<34567> failed : "
            "Connection refused\n")
    told = _diagnose(tmp_path, {"rank_0.log": warn + tb})
    assert told.category == "network" and told.status == Status.crashed and str(told.confidence) != "low"


def test_c10d_s_retried_connect_warning_is_noise_however_long_its_address(tmp_path):
    """c10d logs each failed connect to the store as a warning and retries (socket.cpp tryConnect); its table entry
    speaks for the whole line (catalog.spans_whole) though the address and errno fill most of it. Store retries while
    the store host started, then hours of training: nothing failed that the words could name."""
    warn = ("{r}: [W1108 07:01:0{r}.668835601 socket.cpp:752] [c10d] The client socket has failed to connect to "
            "[cn-041]:29500 (errno: 111 - Connection refused).")
    lines = [warn.format(r=r) for r in (4, 5, 6, 7)] + [f"0: [rank0]: iteration {i}/2000 | lm loss: 2.{i % 9}"
                                                          for i in range(1, 6)]
    d = _diagnose(tmp_path, {"slurm-30117.out": "\n".join(lines) + "\n"})
    assert d.category == "none", d.headline
    # the final error of the same retries is a failure, and is read
    d2 = _diagnose(tmp_path, {"paste.log": "torch.distributed.DistNetworkError: The client socket has timed out "
                                                 "after 600000ms while trying to connect to (10.1.2.3, 29500).\n"})
    assert d2.category != "none", d2.headline


def test_a_template_spans_the_whole_message_only_when_nothing_follows_it():
    from trainlog_debugger.tools.sources.messages import catalog
    m = catalog.best("The client socket has failed to connect to [cn-041]:29500 (errno: 111 - Connection refused).")
    assert m is not None
    assert catalog.spans_whole(m, "[W1108 07:01:01.6 socket.cpp:752] [c10d] The client socket has failed to connect to "
                                  "[cn-041]:29500 (errno: 111 - Connection refused).")
    assert not catalog.spans_whole(m, "RuntimeError: retries exhausted: The client socket has failed to connect to "
                                      "[cn-041]:29500 (errno: 111 - Connection refused). Giving up")
    # the standard library logging's default format is a header too (`LEVEL:logger.name:`)
    verl = catalog.best("Connection error for generate (attempt 1)")
    assert verl is not None and catalog.spans_whole(
        verl, "WARNING:verl.workers.rollout.sglang_rollout.http_server_engine:Connection error for generate (attempt 1)")


def test_a_checkpoint_without_the_state_the_load_flags_ask_for_is_a_setting(tmp_path):
    """Megatron's `Unable to load optimizer from checkpoint ... Specify --no-load-optim or --finetune`: the checkpoint
    read fine and holds no optimizer state; the flags the run was launched with asked for it (TAXONOMY config, not
    storage_io: nothing failed to read)."""
    d = _diagnose(tmp_path, {"train.log": "".join(
        f"[rank{r}]: Unable to load optimizer from checkpoint /ckpt/sft-base/iter_0120000. Specify --no-load-optim or "
        "--finetune to prevent attempting to load the optimizer state, exiting ...\n" for r in range(4))})
    assert d.category == "config", d.headline


def _fairseq_inconsistent(norms: list[str]) -> str:
    """fairseq v0.12.2 trainer.py:1466-1490 (_check_grad_norms): the FloatingPointError and its per-rank block."""
    return ("2022-06-14 10:21:33 | INFO | fairseq.trainer | begin training epoch 3\n"
            "Traceback (most recent call last):\n"
            '  File "/opt/fairseq/fairseq/trainer.py", line 1481, in _check_grad_norms\n'
            "    raise FloatingPointError(\n"
            "FloatingPointError: Fatal error: gradients are inconsistent between workers. Try --ddp-backend=legacy_ddp. "
            "Or are you mixing up different generation of GPUs in training?\n" + "-" * 80 + "\n"
            "grad_norm across the workers:\n" + "".join(f"rank {r:3d} = {n}\n" for r, n in enumerate(norms))
            + "-" * 80 + "\n")


def test_fairseq_s_inconsistent_gradients_read_by_its_per_rank_norms(tmp_path):
    """`gradients are inconsistent between workers` is a class (a desync, mixed GPU generations, or one rank's
    non-finite gradients: _check_grad_norms fails on any nan): the block that follows says which. A rank's `nan`
    is the numerical failure of that rank; with every norm finite the class is what fairseq says it is (software)."""
    d = _diagnose(tmp_path, {"train.log": _fairseq_inconsistent(["0.87712401"] * 3 + ["nan"] + ["0.87712401"] * 4)})
    assert (d.category, d.culprit_ranks) == ("numerical", [3]), d.headline
    d = _diagnose(tmp_path, {"train.log": _fairseq_inconsistent(["0.87712401", "0.87712390", "0.91020011"])})
    assert (d.category, d.culprit_ranks) == ("software", []), d.headline


def test_nccl_s_periodic_connect_retry_at_start_up_is_no_fault(tmp_path):
    """NCCL <= 2.22 logs `Call to connect returned Connection refused, retrying` (src/misc/socket.cc, every 1000
    refusals) while a peer is not yet listening; `Init COMPLETE` follows: a retry that recovered (TAXONOMY: noise),
    never the network's fault, however its words read."""
    d = _run(tmp_path, "gpu-a01:2301:2511 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
                       "gpu-a01:2301:2301 [0] NCCL INFO comm 0x55d0c0a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1b000 "
                       "commId 0x5e1f2a9c - Init COMPLETE\n"
                       "step 100/120 | loss 0.912 | 4.1 s/it\n")
    assert d.category == "none", d.headline


def test_nccl_s_invalid_usage_is_a_class_that_a_specific_line_names(tmp_path):
    """`ncclInvalidUsage` names a class (two ranks on one GPU, unbalanced group calls, no usable transport), as
    ncclSystemError and ncclInternalError do: the line that says which one decides, here TRL's vLLM server refusing a
    GPU the trainer also uses (config) in the other process's log; alone, the class stays an inconclusive reading."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "trainer.log").write_text(
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp"
        ":268, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
        "[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n")
    (root / "vllm_serve.log").write_text(
        "(EngineCore_0 pid=4502) RuntimeError: Attempting to use the same CUDA device (UUID: GPU-5f2b8c7e-1a4d-4e9b-9c3f-"
        "0a1b2c3d4e5f) for multiple distinct roles/ranks within the same communicator. This setup is unsupported and "
        "will likely lead to program hangs or incorrect behavior. Ensure that trainer is using different devices than "
        "vLLM server.\n")
    with open_bundle(root) as b:
        assert investigate(b).category == "config"
    (root / "vllm_serve.log").unlink()
    with open_bundle(root) as b:
        d = investigate(b)
    assert (d.category, d.status) == ("software", Status.inconclusive), d.headline


@pytest.mark.parametrize("path, category", [
    ("/lustre/data/pile/train-00417-of-01024.bin", "data"),              # a dataset shard (HF/Megatron naming)
    ("/lustre/data/pile/pile_shard_0042_text_document.idx", "data"),     # Megatron's index of a shard
    ("/ckpt/run7/checkpoint-4000/pytorch_model.bin", "config"),          # a checkpoint's file: not the dataset's
    ("/data/hf/model-00001-of-00004.safetensors", "config"),             # a model's weight shard
    ("/workspace/configs/llama3_8b.yaml", "config"),
])
def test_a_missing_dataset_shard_is_data_and_a_missing_checkpoint_is_not(path, category):
    """ENOENT reads as data only for what a dataset is made of (TAXONOMY: a missing data file), never a checkpoint's
    or a model's files, which stay the lead's reading (a wrong path, an unmounted volume)."""
    m = messages.best(f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'")
    assert m is not None and m.category == category, (path, m and m.category)


def test_fairseq_s_nan_rank_is_the_rank_the_block_names_not_the_log_s(tmp_path):
    """The block names the rank whose norm is nan; the log that printed it (rank 0's) is not the culprit."""
    d = _diagnose(tmp_path, {"rank_0.log": _fairseq_inconsistent(["0.87712401"] * 3 + ["nan"] + ["0.87712401"] * 4)})
    assert (d.category, d.culprit_ranks) == ("numerical", [3]), d.headline


@pytest.mark.parametrize("head", ["[ 1211.000212] ", "[Fri Apr  4 01:17:09 2025] ",
                                  "Apr  4 01:17:09 cn-117 kernel: "])
def test_a_kernel_line_a_table_calls_context_is_no_fault_however_dmesg_was_read(facts_from, head):
    """The kernel's `Machine check events logged` is context in its table (corrected events were recorded): read
    with `dmesg -T`'s date or syslog's host before it, its timestamp is a header, not words the entry must cover (the
    longer line was read by its words as an unknown program error)."""
    files = {"paste.txt": ["[after training is done] datetime: 2025-04-04 05:48:33",
                           f"{head}mce: [Hardware Error]: Machine check events logged"]}
    assert meaning.read_by_meaning(facts_from(files)) == []
