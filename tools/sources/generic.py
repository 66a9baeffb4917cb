"""Lines any Python training process prints: tracebacks, exceptions, signals, I/O trouble (FORMATS.md §0, §7.1).

Real lines:
    [rank3]: Traceback (most recent call last):
    FloatingPointError: Loss became infinite or NaN at iteration=1!
    urllib3.exceptions.ProtocolError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))
    Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by ...
The traceback's final exception line is found by this source's hook on `python.traceback` (final_exception),
which the scanner calls on each kept traceback hit: it reads forward from the `Traceback` line. `io.retrying`'s
hook counts the retry escalation over every hit. `python.exception` is a catch-all recorded only when no specific
pattern explains the line.
"""

from __future__ import annotations

import re
from collections import deque

from trainlog_debugger.tools.lines import LINE_BREAK
from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.sources.pattern import HitContext, Hook, P

# an exception class a library keeps in its exc/errors/exceptions module (`torch._dynamo.exc.Unsupported`): one
# spelling for the pattern that finds such a line and for the traceback reader that finds its final exception
_LIB_EXC = r"\.(?:exc|errors?|exceptions?)\.[A-Z][A-Za-z0-9_]*"

_SEGV_L10N = ("段错误|程式記憶體區段錯誤|セグメンテーションフォルト|세그멘테이션 오류|세그먼테이션 오류|Speicherzugriffsfehler|"
              "Adressierungsfehler|Erreur de segmentation|Violación de segmento|Ошибка сегментирования|"
              "Ошибка сегментации|Falha de segmentação")
# `Killed` (SIGKILL) as strsignal() and bash print it in zh_CN, zh_TW, ja and ko (glibc 2.36 libc.mo, bash 5.2 bash.mo):
# a shell's job report of a killed process is an error line in any language (lexicon: infrastructure)
_KILLED_L10N = "已杀死|強制結束|強制終了|죽었음"
_SIGBUS_L10N = ("总线错误|匯流排錯誤|バスエラー|버스 오류|Bus-Zugriffsfehler|Bus-Fehler|Erreur du bus|Erreur de bus|Error del bus|"
                "Ошибка шины|Erro no barramento|Erro do barramento")

PATTERNS = [
    P("python.traceback", 2, "software", "root_candidate",
      r"Traceback \(most recent call last\)", "Traceback (most recent call last)",
      "[rank3]: Traceback (most recent call last):",
      "Python traceback (its final exception line is attached)"),
    # CPython's unraisable hook (Python/errors.c: `Exception ignored in: <obj>`, then the traceback): an exception in a
    # destructor or callback that Python printed and ignored (a DataLoader iterator's __del__ at shutdown): the
    # traceback under it is no failure of the program (RuleInputs.ignored)
    P("python.exception_ignored", 2, None, "context",
      r"Exception ignored in: ", "Exception ignored in: ",
      "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b8c1d1ea0>",
      "Python printed an exception raised in a destructor or callback and ignored it"),
    # a wrapper that names its cause in parentheses (Ray re-raises a remote task's error as
    # `ray.exceptions.RayTaskError(OutOfMemoryError): ray::...`, python/ray/exceptions.py as_instanceof_cause): the
    # exception is the cause, the class that says what failed; the wrapper is kept as `wrapper`
    P("python.exception", 2, "software", "root_candidate",
      r"[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt)(?:\([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|"
      r"Interrupt)\))?: ",
      ("Error: ", "Exception: ", "Exit: ", "Interrupt: ", "Error): ", "Exception): ", "Exit): ", "Interrupt): "),
      "RuntimeError: shape '[4, 1024]' is invalid for input of size 2048",
      "Python exception", fields=r"(?:(?P<wrapper>[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception))\()?"
                                 r"(?P<exception>[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt))\)?: "
                                 r"(?P<message>.*)",
      fallback=True),
    # an exception class a library keeps in its exc/errors/exceptions module, whatever its name
    # (`torch._dynamo.exc.Unsupported`, `triton.runtime.errors.OutOfResources`): a last resort, so that a line a
    # fallback explains (`requests.exceptions.ReadTimeout: ... Read timed out`: io.timed_out) stays that
    P("python.exception_named", 2, "software", "root_candidate",
      _LIB_EXC + ": ", (".exc.", ".errors.", ".error.", ".exceptions.", ".exception."),
      "torch._dynamo.exc.Unsupported: call_function BuiltinVariable(print) [ConstantVariable()] {}",
      "Python exception (a library's exception class)",
      fields=r"(?P<exception>[A-Za-z_][A-Za-z0-9_.]*" + _LIB_EXC + r"): (?P<message>.*)",
      fallback=2),
    P("python.stop_iteration", 2, "data", "root_candidate",
      # the engine's trigger stops before `ation`: Hyperscan's literal matcher keys on a literal's last bytes, and
      # `...ation` ends the words of every Megatron iteration line (`iteration`, `iterations:`), a near-miss to
      # confirm three times a line (12-17 % of the whole database's time); `verify` is the whole word
      r"StopIter", "StopIteration",
      "StopIteration",
      "an iterator (data loader) was exhausted", verify=r"StopIteration"),
    P("python.fatal_error", 1, "software", "root_candidate",
      r"Fatal Python error: ", "Fatal Python error",
      "Fatal Python error: Segmentation fault",
      "the interpreter aborted", fields=r"Fatal Python error: (?P<what>.*)"),
    # the signal's name as strsignal() and bash's job report print it, also in the user's locale (glibc 2.36 libc.mo
    # and bash 5.2 bash.mo msgstrs of `Segmentation fault` and `Bus error`: zh_CN, zh_TW, ja, ko, de, fr, es, ru,
    # pt_BR): `run.sh: 第 2 行： 48213 总线错误 （核心已转储）python train.py` is a Chinese shell's `Bus error (core dumped)`
    P("process.segfault", 1, "software", "root_candidate",
      r"(?:Segmentation fault|SIGSEGV|" + _SEGV_L10N + ")", ("Segmentation fault", "SIGSEGV", *_SEGV_L10N.split("|")),
      "srun: error: node17: task 3: Segmentation fault (core dumped)",
      "segmentation fault"),
    P("process.sigbus", 1, "infrastructure", "root_candidate",
      r"(?:SIGBUS|[Bb]us error|" + _SIGBUS_L10N + ")", ("SIGBUS", "us error", *_SIGBUS_L10N.split("|")),
      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
      "bus error (often /dev/shm exhausted in a container)"),
    P("process.sigabrt", 1, None, "cascade",
      r"(?:SIGABRT|Aborted \(core dumped\))", ("SIGABRT", "Aborted (core dumped)"),
      "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)",
      "process aborted (the NCCL watchdog aborts with SIGABRT)"),
    P("process.killed", 1, None, "cascade",
      r"(?:SIGKILL|SIGTERM)", ("SIGKILL", "SIGTERM"),
      # Lightning's signal connector (`[rank: 0] Received SIGTERM: 15`); torch elastic's teardown escalation has its
      # own pattern (torchrun.escalated_kill)
      "[rank: 0] Received SIGTERM: 15",
      "process killed or terminated by a signal", fallback=True),
    P("loader.worker_killed", 2, "data", "root_candidate",
      r"DataLoader worker \(pid[ (]\S+\)? is killed by signal|DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly",
      ("DataLoader worker (pid",),
      "RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed. ",
      "a DataLoader worker process died", fields=r"killed by signal: (?P<signal>[^.]+)"),
    P("loader.shm_insufficient", 2, "infrastructure", "root_candidate",
      r"insufficient shared memory \(shm\)", "insufficient shared memory",
      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
      "DataLoader ran out of shared memory (/dev/shm)"),
    # (a line that says the batch was still produced, SURVIVED, is the store's trouble, not the rank's end)
    P("loader.batch_loader_error", 2, "storage_io", "root_candidate",
      r"(?:AISBatchLoaderError|Batch stream truncated at index|AIStore batch\.get\(\) failed|AISBatchLoader dropping)",
      ("AISBatchLoaderError", "Batch stream truncated", "AIStore batch.get() failed", "AISBatchLoader dropping"),
      "lhotse.ais.batch_loader.AISBatchLoaderError: Sequential GET fallback failed for shard-000123/utt-42.flac",
      "AIStore batch loader error (fewer objects than requested)"),
    P("loader.audio_error", 2, "data", "root_candidate",
      r"(?:AudioLoadingError|\[Suppressed [A-Za-z]+Error\])", ("AudioLoadingError", "[Suppressed "),
      "WARNING:root:[Suppressed AudioLoadingError] Error message: Reading audio from 's3://bucket/a.flac' failed. Details: RuntimeError: Error opening",
      "audio sample failed to load (corrupt or unreachable data)"),
    P("numerical.nan_loss", 2, "numerical", "root_candidate",
      # the engine's trigger: the value after its separator, spelled out per separator so that Hyperscan anchors
      # on literals (`: nan`, `=inf`, `: tensor(nan`); `[Ll]oss[ a-z_]*` in front made it confirm a near-miss on
      # every `lm loss:` line (35 % of the catalog's scan time). `verify` is the precise regex, run on candidates.
      # Megatron prints the nan-iteration count as `: {:3d}`, one to three spaces before its first digit: the bound
      # lets Hyperscan keep the digit in its literals instead of confirming `: +` after the field's name on every
      # iteration line (12-14 % of the database's time); no producer pads it wider.
      r"(?:Loss became infinite or NaN|: (?:nan|NaN|NAN|inf|Inf|INF)\b|:(?:nan|NaN|NAN|inf|Inf|INF)\b|= ?(?:nan|NaN|NAN|inf|Inf|INF)\b|[:=] ?(?:tensor\()?-(?:nan|NaN|NAN|inf|Inf|INF)\b|[:=] ?tensor\((?:nan|NaN|NAN|inf|Inf|INF)\b"
      r"|number of nan iterations: {1,3}[1-9]|[Ll]oss (?:(?:is|became|was|went) )?(?:nan|NaN|NAN|inf|Inf|INF)\b|\b(?:nan|NaN|NAN|inf|Inf|INF) [Ll]oss\b)",
      ("Loss became infinite or NaN", "oss", "number of nan iterations"),
      "FloatingPointError: Loss became infinite or NaN at iteration=1!",
      "loss is NaN/Inf (divergence, bad init or bad data)",
      # a user's own print without a separator (`step 1201 loss nan`), or in words (`Loss is NaN, stopping training`)
      verify=r"(?:Loss became infinite or NaN|[Ll]oss[ a-z_]*'?(?::|=) ?(?:tensor\()?-?(?:nan|NaN|NAN|inf|Inf|INF)\b"
             r"|number of nan iterations: {1,3}[1-9]|[Ll]oss (?:(?:is|became|was|went) )?(?:nan|NaN|NAN|inf|Inf|INF)\b"
             # `Detected NaN loss at step 1500` (the word order of a trainer's own check)
             r"|\b(?:nan|NaN|NAN|inf|Inf|INF) [Ll]oss\b)"),
    P("numerical.grad_nan", 2, "numerical", "root_candidate",
      # Megatron's `grad norm: nan`; the HF Trainer's logged dict `'grad_norm': nan`;
      # ESPnet's `The grad norm is nan`. Not apex's `Gradient overflow.  Skipping step, loss scaler 0 reducing loss
      # scale to X`: the dynamic loss scaler doing its job (every fp16 run prints a few at start), read with the other
      # scalers' step-downs (trainers.py numerical.loss_scale_down, rules/data.loss_scale_collapse)
      r"(?:grad norm(?::| is) (?:nan|inf)|'grad_norm': (?:nan|inf)|non-finite (?:loss|gradients?))",
      ("grad norm: ", "grad norm is ", "'grad_norm': ", "non-finite"),
      "[2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | grad norm: nan | number of skipped iterations:   1 | number of nan iterations:   0 |",
      "gradients are NaN/Inf or overflowed"),
    # tensorboardX's check_nan (x2num.py) warns when a logged value is non-finite: a loss or gradient norm went
    # NaN/Inf, or AMP's loss scale is still settling (then it stops by itself): read by its words, weakly
    P("numerical.logged_nonfinite", 3, "numerical", "root_candidate",
      r"NaN or Inf found in input tensor", "NaN or Inf found in input tensor",
      "WARNING:root:NaN or Inf found in input tensor.",
      "a value logged to TensorBoard was NaN or Inf"),
    P("io.no_space", 1, "storage_io", "root_candidate",
      r"(?:No space left on device|Disk quota exceeded)", ("No space left on device", "Disk quota exceeded"),
      "OSError: [Errno 28] No space left on device: '/checkpoints/iter_0001000/model.pt'",
      "disk full"),
    P("io.connection_reset", 3, "storage_io", "noise",
      r"(?:Connection reset by peer|ConnectionResetError)", ("Connection reset by peer", "ConnectionResetError"),
      # a fallback: an exception line that ends in a reset (`DistNetworkError: Connection reset by peer`) is the
      # program's error (python.exception, read by its words), not retry noise
      "WARNING:urllib3.connectionpool:Retrying after connection reset: [Errno 104] Connection reset by peer",
      "connection reset (noise when the retry succeeds)", fallback=True),
    P("io.connection_refused", 3, "network", "root_candidate",
      r"(?:Connection refused|ConnectionRefusedError)", ("Connection refused", "ConnectionRefusedError"),
      "ConnectionRefusedError: [Errno 111] Connection refused",
      "connection refused"),
    P("io.broken_pipe", 3, "storage_io", "root_candidate",
      r"(?:[Bb]roken pipe|BrokenPipeError)", ("roken pipe", "BrokenPipeError"),
      "BrokenPipeError: [Errno 32] Broken pipe",
      "broken pipe"),
    P("io.connection_broken", 3, "storage_io", "noise",
      r"(?:[Cc]onnection broken|Connection aborted|Connection closed by peer)", ("onnection broken", "Connection aborted", "Connection closed by peer"),
      "Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProtocolError('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))': /v1/objects/bucket/shard-17.tar",
      "connection broken or aborted"),
    P("io.retrying", 3, "storage_io", "noise",
      r"(?:[Rr]etrying|[Rr]etry) \(?(?:attempt )?\d+ ?(?:/|of) ?\d", ("etrying", "etry"),
      "WARNING: GET ais://train/shard-17.tar failed, retrying 1/5: Connection reset by peer",
      "a retried operation (escalation N/M matters, not the count)",
      fields=r"[Rr]etr(?:ying|y) \(?(?:attempt )?(?P<attempt>\d+) ?(?:/|of) ?(?P<max_attempts>\d+)", ints=("attempt", "max_attempts")),
    P("io.timed_out", 3, "storage_io", "root_candidate",
      r"(?:[Tt]imed out|[Tt]imeout[Ee]rror)", ("imed out", "imeoutError"),
      "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='ais-proxy', port=51080): Read timed out. (read timeout=60)",
      "an operation timed out", fallback=True),
    # gRPC's status code (and absl's, which XLA/TSL and Ray use for their RPCs): a call to another process got no
    # answer by its deadline (grpc/include/grpcpp/support/status_code_enum.h DEADLINE_EXCEEDED; the message gRPC
    # itself gives it is `Deadline Exceeded`): the process it called, or the way to it, not a file or a store.
    # Specific wordings (XLA's barrier timeouts) are read by the upstream tables first.
    P("rpc.deadline_exceeded", 3, "network", "root_candidate",
      r"(?:DEADLINE_EXCEEDED|[Dd]eadline [Ee]xceeded)", ("DEADLINE_EXCEEDED", "eadline"),
      "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Deadline Exceeded",
      "an RPC to another process got no answer by its deadline", fallback=True),
    P("gloo.timeout", 1, "network", "cascade",
      r"Timed out waiting \d+ms for (?:recv|send) operation", "Timed out waiting",
      "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
      "gloo collective timed out waiting for a peer",
      fields=r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>recv|send)", ints=("timeout_ms",)),
    P("gloo.read_error", 1, "network", "cascade",
      r"\] Read error \[[^\]\n]+\]:[0-9]+: Connection reset by peer", "Read error [",
      "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:10446: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application.",
      "gloo: a peer's connection dropped (the peer exited or hung)",
      fields=r"Read error \[(?P<peer>[^\]]+)\]:(?P<port>\d+)", ints=("port",)),
    # gloo could not connect its full mesh (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp `Gloo connectFullMesh
    # failed with`; gloo/transport/tcp/pair.h `Connect timeout [addr]:port`): the peer's address (config.nccl_interface
    # reads a loopback or host-local one as the launch's, not the network's)
    P("gloo.connect_failed", 1, "network", "root_candidate",
      r"Gloo connectFullMesh failed with|\] Connect timeout \[", ("Gloo connectFullMesh failed with", "] Connect timeout ["),
      "[rank8]: RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.h:311] "
      "Connect timeout [172.17.0.1]:38127",
      "gloo could not connect to a peer while forming the process group",
      fields=r"\[(?P<peer>[0-9.]{7,15}|[0-9a-fA-F:]{2,39})\]:(?P<port>\d{1,5})", ints=("port",)),
    P("gloo.size_mismatch", 1, "software", "root_candidate",
      r"Received data size doesn't match expected size", "Received data size doesn't match expected size",
      "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 1700 vs 4. Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?",
      "gloo: a peer sent a different amount of data (collective mismatch)"),
    # ATen's MapAllocator names the shared-memory segments it creates `/torch_<pid>_<n>` (NewProcessWideShmHandle):
    # a write, resize or mmap of one that fails is /dev/shm, not a disk (`unable to write to file </torch_311_2376>:
    # No space left on device (28)`, the DataLoader's workers passing batches through too small a /dev/shm)
    P("loader.torch_shm_full", 1, "infrastructure", "root_candidate",
      r"file </torch_", ("file </torch_",),
      "RuntimeError: unable to write to file </torch_311_2376812911>: No space left on device (28)",
      "PyTorch could not grow a shared-memory segment in /dev/shm (tensors passed between processes): /dev/shm is "
      "full or too small", weight=0.7,
      advice="give the container a larger /dev/shm (docker --shm-size or --ipc=host; a memory-backed emptyDir on "
             "/dev/shm in Kubernetes), or use fewer DataLoader workers and a smaller prefetch_factor",
      verify=r"unable to (?:write to|resize|stretch) file </torch_\d+_\d|unable to mmap \d+ bytes from file </torch_\d+_\d"),
    P("loader.torch_shm_open", 1, "config", "root_candidate",
      r"shared memory object </torch_", ("shared memory object </torch_",),
      "RuntimeError: unable to open shared memory object </torch_2034_1384598128> in read-write mode: Too many open "
      "files (24)",
      "the process ran out of file descriptors for PyTorch's shared-memory segments (the file_descriptor sharing "
      "strategy keeps one open per shared tensor)", weight=0.65,
      advice="raise the open-files limit (ulimit -n), or call torch.multiprocessing.set_sharing_strategy('file_system')",
      verify=r"unable to open shared memory object </torch_\d+_\d+> in read-write mode: Too many open files"),
    P("process.host_alloc_failed", 1, "oom", "root_candidate",
      # posix_memalign's wording, and the memalign/_aligned_malloc builds' (c10/core/impl/alloc_cpu.cpp); C++'s
      # operator new failing (libstdc++'s verbose terminate handler: `terminate called after throwing an instance of
      # 'std::bad_alloc'`, `what():  std::bad_alloc`)
      r"(?:DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|[^A-Za-z.\n]MemoryError\b|"
      r"instance of 'std::bad_alloc')",
      ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory", "MemoryError",
       "instance of 'std::bad_alloc'"),
      "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)",
      "host memory allocation failed (CPU out of memory)",
      fields=r"you tried to allocate (?P<requested_bytes>\d+) bytes", ints=("requested_bytes",)),
    P("gloo.peer_closed", 1, "network", "cascade",
      r"\[\S+\] Connection closed by peer \[[^\]\n]+\]", "Connection closed by peer",
      "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.7]:25231",
      "gloo: the peer at that address exited", fields=r"Connection closed by peer \[(?P<peer>[^\]]+)\]:?(?P<port>\d+)?"),
    P("generic.error_line", 3, None, "context",
      # an error-level line that no specific pattern explains (issue 25): kept so that the diagnosis can read it by
      # meaning (tools/rules/meaning.py: the upstream message tables, then the lexicon) when nothing decisive fires.
      # The failure words of a log statement; as a fallback it is recorded only on lines no other pattern explains,
      # and like every pattern only the first and last few per rank are kept in full.
      # absl/gRPC status codes (JAX, XLA, TensorFlow: `FAILED_PRECONDITION: ...`) are error lines in capitals
      r"(?i)\b(?:errors?|fatal|failed|failure|exception|abort(?:ed|ing)?|killed|panic|timed out|refused|unreachable|"
      r"denied|cannot|could not|unable to|out of memory|no space)\b"
      r"|(?-i:\b(?:FAILED_PRECONDITION|RESOURCE_EXHAUSTED|DEADLINE_EXCEEDED|UNAVAILABLE|DATA_LOSS|INTERNAL|"
      r"INVALID_ARGUMENT|UNIMPLEMENTED|PERMISSION_DENIED): )|" + _KILLED_L10N,
      (*_KILLED_L10N.split("|"), "rror", "RROR", "atal", "ATAL", "ailed", "AILED", "ailure", "AILURE", "xception", "XCEPTION", "bort", "BORT",
       "illed", "ILLED", "anic", "ANIC", "imed out", "IMED OUT", "efused", "EFUSED", "nreachable", "NREACHABLE",
       "enied", "ENIED", "annot", "ANNOT", "ould not", "OULD NOT", "nable to", "NABLE TO", "ut of memory",
       "UT OF MEMORY", "o space", "O SPACE", "FAILED_PRECONDITION: ", "RESOURCE_EXHAUSTED: ", "DEADLINE_EXCEEDED: ",
       # the phrases in Title Case (composer's `Out Of Memory (OOM) observed`): the regex is case-blind, the anchors not
       "imed Out", "ould Not", "nable To", "ut Of Memory", "o Space",
       "UNAVAILABLE: ", "DATA_LOSS: ", "INTERNAL: ", "INVALID_ARGUMENT: ", "UNIMPLEMENTED: ", "PERMISSION_DENIED: "),
      "[2024-05-01 10:00:00,123 E 1234 1234] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 1f2e, IP: 10.0.0.5) over the last time period.",
      "an error-level line (read by meaning when nothing specific explains it)", fallback=2,
      # the precise regex (run only on the engine's candidates) leaves out the boilerplate that surrounds every
      # crash and names no fault: C++ backtrace frames, c10's `Exception raised from`, PyTorch's CUDA hints, the
      # elastic report's headings (without it each crashed rank kept them as error lines);
      # and lines their producer printed at INFO or DEBUG level (`NCCL INFO NET/Plugin: Could not find: ...`,
      # `[INFO] ... failed, retrying`, glog `I1105`): a level below warning is not an error line; nor is nccl-tests'
      # column header (`time   algbw   busbw  error`) in a worker's log; nor a warning of Python's warnings module
      # (`<file>.py:<line>: <Category>Warning: <message>`, warnings.formatwarning): a warning that says what a later
      # version "will raise an exception" for is no error of this run
      verify=r"^(?!\s*[ID]\d{4} \d\d:\d\d:\d\d)(?!.*?(?:frame #\d+: |Exception raised from |\.py:\d+: [A-Z]\w*Warning: |"
             r"CUDA kernel errors might be asynchronously reported|"
             r"For debugging consider passing CUDA_LAUNCH_BLOCKING|Compile with .TORCH_USE_CUDA_DSA|"
             r"To enable traceback see|Root Cause \(first observed failure\)|\bNCCL INFO\b|\[INFO\]|algbw\s+busbw|"
             r"(?:^|[\s|])INFO(?::|\s)|\bDEBUG\b))"
             r".*?(?:(?i:\b(?:errors?|fatal|failed|failure|exception|abort(?:ed|ing)?|killed|panic|timed out|refused|"
             r"unreachable|denied|cannot|could not|unable to|out of memory|no space)\b)"
             r"|\b(?:FAILED_PRECONDITION|RESOURCE_EXHAUSTED|DEADLINE_EXCEEDED|UNAVAILABLE|DATA_LOSS|INTERNAL|"
             r"INVALID_ARGUMENT|UNIMPLEMENTED|PERMISSION_DENIED): |" + _KILLED_L10N + ")"),
    P("generic.error_level", 3, None, "context",
      # a line its producer logged at ERROR or FATAL severity in TSL's log sink (XLA, JAX, TensorFlow:
      # `2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] `), whatever its words: XLA's
      # `... may be stuck` names no failure word, yet its logger says error. Read by meaning like generic.error_line,
      # a last resort. glog's own header (`E0729 17:14:59.920189  1234 file.cc:38] `) is not read this way: it has
      # no literal for the engine to find, and scanning for it cost a third more of the whole catalog's scan
      r"\d: [EF] [\w./-]{1,200}\.(?:cc|cpp|h|cu):\d{1,6}\] ",
      (": E ", ": F "),
      "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been waiting for "
      "`initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7]; stream=0; run_id=724296073` for 10 seconds and "
      "may be stuck. Expected 8 threads to join the rendezvous, but not all of them arrived on time.",
      "a line logged at error severity (read by meaning when nothing specific explains it)", fallback=2),
]


# lhotse's AIStore batch loader went on (`Batch stream truncated at index N/M. Falling back to direct AIStore API
# calls ...`, `AISBatchLoader dropping N/M cuts due to per-object fetch failures (skip_failed_fetches=True).`): the
# batch was still produced, or the loss was one the job was configured to take (tools/rules/storage.batch_loader)
SURVIVED = ("Falling back to", "skip_failed_fetches=True")
LOOKAHEAD_LINES = 200  # how far a traceback's final exception line is searched for
LINE_HEAD = 4096  # bytes of a following line read: its prefixes and its start, bounded for a 2 GB line
MAX_FRAMES = 12  # innermost frames kept per traceback
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)\((?=[A-Za-z_][\w.]*\): ))?"  # a wrapper naming its cause
                       r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|StopIteration|Warning)|StopIteration|"
                       r"[A-Za-z_][\w.]*" + _LIB_EXC + "|"
                       r"KeyboardInterrupt)\b\)?:? ?(.*)")
# at a traceback's end Python prints any exception as `module.Class: message` (traceback.format_exception_only):
# a class of a module path that names no Error (`pyarrow.lib.ArrowInvalid: JSON parse error ...`) is still the
# exception there, though a line elsewhere is not read as one by its shape alone
_EXC_QUALIFIED = re.compile(r"^([a-z_]\w*(?:\.\w+)*\.[A-Z_]\w*):(?: (.*)|$)")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')
_TB_SKIP = ("Traceback", "During handling", "The above exception", "File ", "^", "~")


def _flattened(text: str) -> list[str] | None:
    """A whole traceback on one line, its line breaks shown as tools.bundle.notebook.LINE_BREAK (a JSON-lines log's
    `exc_info` string read in place): the header's piece and the pieces after it; None for a traceback on lines."""
    at = text.find("Traceback (most recent call last)")
    if at < 0 or LINE_BREAK not in text[at:]:
        return None
    pieces = text[at:].split(LINE_BREAK)
    # a header, a frame and more: a record's own line end after a header alone (one line of a traceback a record)
    # is no traceback held in the line
    return pieces if len(pieces) >= 3 and pieces[1].strip() else None


def final_exception(ctx: HitContext) -> None:
    """The exception that ended a traceback, added to the `python.traceback` hit's facts (`exception`, `message`,
    `exception_line`, `exception_text`, `frames`): the first unindented line after the frames (same rank label),
    the innermost frames (`file:function`, innermost last) and each one's source line (`calls`, "" where the
    traceback prints none). Where it was raised decides what was at fault as
    much as its class does (a ValueError inside a Dataset's __getitem__ is the data's; in a forward pass it is the
    code's). "Unindented" is relative to the header: torchrun's failure report copies a worker's error.json under
    `  traceback : Traceback (...)`, frames indented four, the exception line two:

        [rank3]: Traceback (most recent call last):
        [rank3]:   File "/workspace/train.py", line 212, in <module>
        [rank3]:     loss = model(batch)
        [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered

    Lines of other ranks interleaved in a shared console are skipped. When the block ends before an exception line
    (a line less indented than the header, an unindented line that names no exception, the file's end: a paste cut
    inside its traceback) or after LOOKAHEAD_LINES, only `frames` and `calls` are added: where the code was when it
    raised, without what it raised. A block cut by the end of a chunk (not the file's) gets nothing: what follows
    is in the next buffer, and the answer may not depend on where the chunks fall."""
    buf, end, rank = ctx.buf, ctx.end, ctx.line_rank
    pos = end + 1
    head = strip_prefixes(_decode(buf[buf.rfind(b"\n", 0, end) + 1:end]))
    flat = _flattened(ctx.text)
    if flat is not None:  # a structured log's one string (tools/bundle/notebook.py): its pieces are the lines
        head, rank = flat[0], None
    base = len(head) - len(head.lstrip(" \t"))
    frames: deque[str] = deque(maxlen=MAX_FRAMES)
    calls: deque[str] = deque(maxlen=MAX_FRAMES)
    for k in range(1, LOOKAHEAD_LINES + 1):
        if flat is not None:
            if k >= len(flat):
                break
            text = flat[k][:LINE_HEAD]
        elif pos >= len(buf):
            if not ctx.final:  # a chunk's cut, not the file's end: the block goes on in the next buffer
                return
            break
        else:
            nxt = buf.find(b"\n", pos)
            nxt = len(buf) if nxt == -1 else nxt
            text = _decode(buf[pos:min(nxt, pos + LINE_HEAD)])
            pos = nxt + 1
        if rank is not None:
            r = ctx.rank_of(text)
            if r is not None and r != rank:
                continue
        body = strip_prefixes(text)
        if base:
            if body[:base].strip():  # less indented than the header: the block ended
                break
            body = body[base:]
        fm = _FRAME.match(body)
        if fm:
            frames.append(f"{fm.group(1)[-120:]}:{fm.group(2)[:60]}")
            calls.append("")
        elif calls and not calls[-1] and body[:1] in (" ", "\t") and body.strip()[:1] not in ("^", "~", ""):
            calls[-1] = body.strip()[:120]  # the frame's source line: what it was calling (`with x.barrier():`)
        if not body.strip() or body[:1] in (" ", "\t") or body.startswith(_TB_SKIP):
            continue
        m = _EXC_LINE.match(body) or (_EXC_QUALIFIED.match(body) if frames else None)
        if m:
            ctx.fields.update({"exception": m.group(1), "message": (m.group(2) or "")[:500],
                               "exception_line": ctx.line + (k if flat is None else 0),
                               "exception_text": text, "frames": list(frames), "calls": list(calls)})
            goes_on = _goes_on(body, buf, pos, base, rank, ctx) if flat is None else False
            if goes_on is None:  # a chunk's cut right after a carrier's line: what follows is in the next buffer
                for key in ("exception", "message", "exception_line", "exception_text", "frames", "calls"):
                    ctx.fields.pop(key, None)
                return
            if goes_on:
                continue  # a wrapper's line: the traceback it carries follows (below)
            return
        if body.startswith("Original Traceback (most recent call last)"):
            continue  # the DataLoader worker's own traceback, under the message that re-raised it (_goes_on)
        break
    if frames:  # cut before its exception line: where it was raised is still known
        ctx.fields.update({"frames": list(frames), "calls": list(calls)})


# the exception lines that carry another process's traceback right after them: Ray's re-raise of a remote task's
# error (`ray.exceptions.RayTaskError(RuntimeError): ray::Cls.method() (pid=..`), and torch's re-raise of a
# DataLoader worker's (`RuntimeError: Caught RuntimeError in DataLoader worker process 5.`, torch/_utils.py)
_CARRIER = re.compile(r"\bRayTaskError\b|\bray::[\w.<>:]+\(\) \(pid=|\bCaught \w+ in DataLoader worker process \d")


def _goes_on(exc: str, buf: bytes, pos: int, base: int, rank: int | None, ctx: HitContext) -> bool | None:
    """Whether the exception line just read is a wrapper's, with the traceback it carries right after it: Ray's
    `ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() (pid=..., ip=...)` is followed by the remote
    task's frames (python/ray/exceptions.py RayTaskError.__str__), and a DataLoader worker's error re-raised in the
    main process by `Original Traceback (most recent call last):` and the worker's frames (torch/_utils.py
    ExceptionWrapper). The exception that ended the traceback is then the one after those frames, the cause; the
    wrapper's line names only who carried it. The next line of the same rank decides (a blank line, another
    traceback's header after `During handling of the above exception` or anything else ends it, as before). Only
    for those carriers (_CARRIER): in a console where two processes' tracebacks interleave without labels, another
    exception's line followed by the other's frames is no wrapper. None: the buffer ends before the next line and is
    not the file's last (the answer may not depend on where chunks fall)."""
    if not _CARRIER.search(exc):
        return False
    for _ in range(4):  # lines of other ranks interleaved in a shared console are skipped, a few
        if pos >= len(buf):
            return None if not ctx.final else False
        nxt = buf.find(b"\n", pos)
        nxt = len(buf) if nxt == -1 else nxt
        text = _decode(buf[pos:min(nxt, pos + LINE_HEAD)])
        pos = nxt + 1
        if rank is not None and (r := ctx.rank_of(text)) is not None and r != rank:
            continue
        body = strip_prefixes(text)
        if base:
            if body[:base].strip():
                return False
            body = body[base:]
        return bool(_FRAME.match(body)) or body.startswith("Original Traceback (most recent call last)")
    return False


def count_retry(ctx: HitContext) -> None:
    """A rank's retry escalation, over every `io.retrying` hit (repeats only counted included): the highest attempt
    and limit seen, how many retries were at attempt 1 and how many at the limit. `retrying 1/5` a thousand times
    is a service that recovers; `retrying 5/5` is one that gave up (FileScan.retries, merged per rank by the
    summary)."""
    a, m = ctx.fields.get("attempt"), ctx.fields.get("max_attempts")
    if not isinstance(a, int) or not isinstance(m, int):
        return
    r = ctx.file.retries.setdefault(ctx.rank, [0, 0, 0, 0])
    r[0], r[1] = max(r[0], a), max(r[1], m)
    r[2] += a == 1
    r[3] += a >= m


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace").rstrip("\r")


HOOKS = {"python.traceback": Hook(final_exception), "io.retrying": Hook(count_retry, every=True)}
# gloo's collective-state lines come once per process group per rank, and a rank may be in many groups: the first 64
# of each (pattern, rank) are kept in full, not 5 (tools.scan.keeper)
KEEP_FIRST = {"gloo.": 64}
