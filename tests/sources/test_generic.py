"""tools/sources/generic.py: lines any Python training process prints (FORMATS.md §0, §7) and the real incidents.

Each row: a line exactly as emitted, the pattern ids the scanner records for it after the fallback rule, and the
fields each id extracts (a subset; None = absent). `python.exception`, `process.killed` and `io.timed_out` are
fallbacks: recorded only when nothing more specific explains the line.
"""

from __future__ import annotations

import pytest
from matching import check, params

EXC = "python.exception"
NAN = "numerical.nan_loss"
GRAD = "numerical.grad_nan"
RETRY = "io.retrying"

# Megatron-LM training line (FORMATS.md §7.3), verbatim; the healthy form must stay silent.
MEGATRON_OK = (" [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 412.3 | learning rate: 1.499999E-04 | global batch size:   256 | lm loss: 6.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |")

PYTHON = [
    ("≥2.3 excepthook traceback header", "[rank3]: Traceback (most recent call last):", {"python.traceback": {}}),
    ("bare traceback header", "Traceback (most recent call last):", {"python.traceback": {}}),
    ("CPython's unraisable hook: a destructor's exception, printed and ignored",
     "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3e1c2a8ee0>",
     {"python.exception_ignored": {}}),
    ("generic exception (fallback)",
     "RuntimeError: shape '[4, 1024]' is invalid for input of size 2048",
     {EXC: dict(exception="RuntimeError", message="shape '[4, 1024]' is invalid for input of size 2048")}),
    ("dotted exception class", "grpc._channel._InactiveRpcError: StatusCode.UNAVAILABLE", {EXC: dict(exception="grpc._channel._InactiveRpcError")}),
    ("KeyboardInterrupt", "KeyboardInterrupt: ", {EXC: dict(exception="KeyboardInterrupt", message="")}),
    ("exhausted iterator", "StopIteration", {"python.stop_iteration": {}}),
    ("interpreter abort, segfault", "Fatal Python error: Segmentation fault",
     {"python.fatal_error": dict(what="Segmentation fault"), "process.segfault": {}}),
    ("interpreter abort", "Fatal Python error: Aborted", {"python.fatal_error": dict(what="Aborted")}),
    ("Lightning's signal connector", "[rank: 0] Received SIGTERM: 15", {"process.killed": {}}),
]

LOADER = [
    ("bus error in a worker: /dev/shm",
     "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     {"loader.shm_insufficient": {}, "process.sigbus": {}}),
    ("worker killed", "RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed. ",
     {"loader.worker_killed": dict(signal="Killed")}),
    ("worker bus error",
     "RuntimeError: DataLoader worker (pid 12345) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
     {"loader.worker_killed": dict(signal="Bus error"), "process.sigbus": {}}),
    ("workers exited", "RuntimeError: DataLoader worker (pid(s) 12345, 12346) exited unexpectedly", {"loader.worker_killed": dict(signal=None)}),
    # a shell's report of a signalled process in the user's locale (bash 5.2 bash.mo / glibc 2.36 libc.mo msgstrs)
    ("zh_CN bash: Bus error (core dumped)", "run.sh: 第 2 行： 48213 总线错误               （核心已转储）python train.py",
     {"process.sigbus": {}}),
    ("ja bash: Segmentation fault", "./train.sh: 9 行:  3011 セグメンテーションフォルト (コアダンプ) python3 finetune.py",
     {"process.segfault": {}}),
    ("ko libc: Bus error", "srun: error: gpu-07: task 3: 버스 오류", {"process.sigbus": {}, "slurm.task_exit": {}}),
    ("ja bash: Killed, an error line", "./train.sh: 9 行:  3011 強制終了            python3 finetune.py --config cfg.yaml",
     {"generic.error_line": {}}),
    ("lhotse AIS batch loader error",
     "lhotse.ais.batch_loader.AISBatchLoaderError: Sequential GET fallback failed for shard-000123/utt-42.flac",
     {"loader.batch_loader_error": {}}),
    ("lhotse batch.get fallback", "AIStore batch.get() failed: timeout. Falling back to sequential GET requests.", {"loader.batch_loader_error": {}}),
    ("lhotse truncated stream",
     "Batch stream truncated at index 17/64. Falling back to direct AIStore API calls for remaining objects.",
     {"loader.batch_loader_error": {}}),
    ("lhotse dropping cuts",
     "AISBatchLoader dropping 3/64 cuts due to per-object fetch failures (skip_failed_fetches=True).",
     {"loader.batch_loader_error": {}}),
    ("lhotse suppressed audio error",
     "WARNING:root:[Suppressed AudioLoadingError] Error message: Reading audio from 's3://bucket/a.flac' failed. Details: RuntimeError: Error opening",
     {"loader.audio_error": {}}),
    ("lhotse audio error raised",
     "AudioLoadingError: Reading audio from '/data/a.flac' failed. Details: RuntimeError: Error opening '/data/a.flac'",
     {"loader.audio_error": {}}),
]

NUMERICAL = [
    ("Megatron: NaN loss, counted nan iteration",
     " [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.499999E-04 | global batch size:   256 | lm loss: nan | loss scale: 1.0 | grad norm: nan | number of skipped iterations:   1 | number of nan iterations:   1 |",
     {NAN: {}, GRAD: {}}),
    ("Megatron: finite loss, nan iterations counted in the interval (1 to 3 spaces before the count, `{:3d}`)",
     " [2024-11-05 12:00:00] iteration      200/   10000 | consumed samples:        51200 | lm loss: 6.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:  12 | number of nan iterations:  12 |",
     {NAN: {}}),
    ("Megatron: a four-digit nan-iteration count",
     " [2024-11-05 12:00:00] iteration     2000/   10000 | consumed samples:       512000 | lm loss: 6.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations: 1000 | number of nan iterations: 1000 |",
     {NAN: {}}),
    ("Megatron: '{:.6E}' prints NAN in capitals",
     " [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | lm loss: NAN | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |",
     {NAN: {}}),
    ("Megatron: overflowing grad norm, finite loss",
     " [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | lm loss: 6.123456E+00 | loss scale: 65536.0 | grad norm: inf | number of skipped iterations:   1 | number of nan iterations:   0 |",
     {GRAD: {}}),
    ("NeMo 2 progress line", "Training epoch 0, iteration 10/99 | lr: 1e-05 | global_batch_size: 8 | global_step: 10 | reduced_train_loss: nan | train_step_timing in s: 0.5",
     {NAN: {}}),
    ("Hugging Face Trainer log dict", "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.1}",
     {NAN: {}, GRAD: {}}),
    ("Hugging Face Trainer log dict, grad norm only", "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2.6e-07}",
     {GRAD: {}}),
    ("fp16 loss scaler overflow: the scaler doing its job, read with the other step-downs",
     "[2024-11-05 12:00:00] Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
     {"numerical.loss_scale_down": {"scale": "32768.0"}}),
    ("non-finite loss", "Detected non-finite loss", {GRAD: {}}),
    ("a user's own print", "rank 3: epoch 2 step 1201 loss nan", {NAN: {}}),
    ("a trainer's stop in words", "Loss is NaN, stopping training", {NAN: {}}),
    ("a loss that became inf", "[rank0]: step 310: loss became inf, skipping the update", {NAN: {}}),
    ("ESPnet grad norm", "(trainer:582) WARNING: The grad norm is nan. Skipping updating the model.", {GRAD: {}}),
]

IO = [
    ("disk full", "OSError: [Errno 28] No space left on device: '/checkpoints/iter_0001000/model.pt'", {"io.no_space": {}}),
    ("quota", "OSError: [Errno 122] Disk quota exceeded", {"io.no_space": {}}),
    ("connection refused", "ConnectionRefusedError: [Errno 111] Connection refused", {"io.connection_refused": {}}),
    ("broken pipe", "BrokenPipeError: [Errno 32] Broken pipe", {"io.broken_pipe": {}}),
    ("reset inside an aborted connection",
     "urllib3.exceptions.ProtocolError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
     {"io.connection_broken": {}}),  # io.connection_reset is a fallback: the specific wording wins
    ("urllib3 retry warning: Retry( is not a retry count",
     "Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProtocolError('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))': /v1/objects/bucket/shard-17.tar",
     {"io.connection_broken": {}}),
    ("retrying 1/5 is attempt 1 of 5",
     "WARNING: GET ais://train/shard-17.tar failed, retrying 1/5: Connection reset by peer",
     {RETRY: dict(attempt=1, max_attempts=5)}),  # the reset is a fallback: the retry explains the line
    ("a dated line: the date is not the retry count",
     "2024-05-01 10:00:00 retrying 1/5",
     {RETRY: dict(attempt=1, max_attempts=5)}),
    ("attempt k/n", "Retrying (attempt 3/10) after error", {RETRY: dict(attempt=3, max_attempts=10)}),
    ("k of n", "retry 2 of 5", {RETRY: dict(attempt=2, max_attempts=5)}),
    ("read timeout (fallback)", "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='ais-proxy', port=51080): Read timed out. (read timeout=60)",
     {"io.timed_out": {}}),
    # gRPC's status code is an RPC to another process, not storage I/O (rpc.deadline_exceeded: network)
    ("DEADLINE_EXCEEDED: two fallbacks", "grpc._channel._InactiveRpcError: StatusCode.DEADLINE_EXCEEDED",
     {"rpc.deadline_exceeded": {}, EXC: dict(exception="grpc._channel._InactiveRpcError")}),
    ("XLA's status text", "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Deadline Exceeded",
     {"rpc.deadline_exceeded": {}, EXC: dict(exception="jaxlib.xla_extension.XlaRuntimeError")}),
    ("gloo timeout",
     "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
     {"gloo.timeout": dict(timeout_ms=1800000, op="recv")}),
    ("gloo peer closed",
     "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.7]:25231",
     {"gloo.peer_closed": dict(peer="10.0.0.7", port="25231"), "io.connection_broken": {}}),
]

INCIDENTS = [
    ("ddp-uninitialized-weight-nan-iter1/combined.log", "FloatingPointError: Loss became infinite or NaN at iteration=1!", {NAN: {}}),
    ("ddp-uninitialized-weight-nan-iter1/combined.log",
     "loss_dict = {'loss_cls': tensor(nan, device='cuda:0', grad_fn=<MulBackward0>), 'loss_triplet': tensor(nan, device='cuda:0', grad_fn=<MulBackward0>)}",
     {NAN: {}}),
]

NEAR_MISSES = [
    ("healthy Megatron iteration line (lm loss E+00, loss scale, 0 nan iterations)", MEGATRON_OK, {}),
    ("loss scale alone", "loss scale: 1.0", {}),
    ("healthy NeMo progress line",
     "Training epoch 0, iteration 10/99 | lr: 1e-05 | global_batch_size: 8 | global_step: 10 | reduced_train_loss: 9.47 | train_step_timing in s: 0.5", {}),
    ("'info' after loss: is not inf", "loss: info logged every 10 steps", {}),
    ("tqdm postfix with a finite loss", "Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46]", {}),
    ("INFO line mentioning timeout=", "INFO: init_process_group(backend=nccl, timeout=1800)", {}),
    ("NeMo config echo of a timeout", "[NeMo I 2025-04-11 14:46:18 nemo_logging:393] distributed timeout=0:30:00", {}),
    ("a fraction next to a date, no retry", "[2024/11/05 12:00:01] saved checkpoint shard 1/5", {}),
    ("urllib3 Retry object without a count", "Retry(total=4, connect=None, read=None, redirect=None, status=None)", {}),    # the nan_loss trigger anchors on `: nan` / `=inf` (issue 16); these reach `verify`, which must say no
    ("a NaN metric that is not a loss", "[2024-11-05 12:00:00] validation | accuracy: nan | perplexity: inf", {}),
    ("a config echo of an infinite value", "  clip_grad=inf, max_norm: inf, stop_at_loss_scale_min=False", {}),
    ("a tensor that is not a loss", "grad_norm = tensor(nan, device='cuda:0')", {}),
]


@pytest.mark.parametrize("line, expected", params(PYTHON))
def test_python_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(LOADER))
def test_data_loader_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NUMERICAL))
def test_numerical_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(IO))
def test_io_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(INCIDENTS))
def test_incident_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line,expected", [
    # torch 2.13 gloo (real, eval/lab): a dropped peer connection is the wait, not the cause
    ("  RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
     "[127.0.0.1]:10446: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
     "application. Check the logs of the remote worker before reporting an error. GLHF! 🏖️",
     {"gloo.read_error": {"peer": "127.0.0.1", "port": 10446}}),
    ("  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
     "op.preamble.length <= op.nbytes. 1700 vs 4. Received data size doesn't match expected size. Is there a "
     "distributed collective mismatch in your code?", {"gloo.size_mismatch": {}}),
    ("[rank2]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
     "you tried to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)",
     {"process.host_alloc_failed": {"requested_bytes": 268435456}}),
    ("[rank3]: MemoryError", {"process.host_alloc_failed": {}}),
    # C++'s operator new failing, as libstdc++'s terminate handler prints it
    ("terminate called after throwing an instance of 'std::bad_alloc'", {"process.host_alloc_failed": {}}),
    # the memalign/_aligned_malloc builds' wording (Windows, Android)
    ("RuntimeError: [enforce fail at C:\\actions-runner\\_work\\pytorch\\c10\\core\\impl\\alloc_cpu.cpp:72] data. "
     "DefaultCPUAllocator: not enough memory: you tried to allocate 34359738368 bytes.",
     {"process.host_alloc_failed": {"requested_bytes": 34359738368}}),
    # CUDA OOM's class name contains MemoryError but is not host memory
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
     "of which 1.23 GiB is free.", {"cuda.oom": {}}),
])
def test_torch_213_gloo_and_host_memory(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, kept", [
    ("ERROR: failed to open /data/shard-17.tar", True),
    ("E1105 12:00:00.000 4242 reader.cc:88] could not open file /data/x", True),
    ("FAILED_PRECONDITION: TPU platform already registered for platform hardware version", True),
    ("(raylet) 1 Workers (tasks / actors) killed due to memory pressure (OOM)", True),
    # boilerplate around every crash, and lines printed below warning level: never an error line
    ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout() + 0x1d2 (0x7f in libtorch_cuda.so)", False),
    ("Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632", False),
    ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
     "incorrect.", False),
    ("node1:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.", False),
    ("I1105 12:00:00.000 123 x.cc:1] failed to connect, retrying", False),
    ("2024-01-01 12:00:00,000 INFO worker.py:88 -- retry 1 failed, trying again", False),
    ("iteration 100 | lm loss 2.31 | grad norm 0.90", False),
    # nccl-tests' column header (before 2.13 its last column is `error`) in a worker's log
    ("#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error", False),
])
def test_the_last_resort_keeps_error_lines_only(line, kept):
    from matching import matched
    assert ("generic.error_line" in matched(line)) == kept
