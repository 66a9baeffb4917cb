"""tools/sources/cuda.py: CUDA errors surfaced through PyTorch (FORMATS.md §9) and the real incidents.

Each row: a line exactly as emitted, the pattern ids the scanner records for it after the fallback rule, and the
fields each id extracts (a subset; None = absent). `cuda.error` and `python.exception` are both fallbacks, so a
bare `RuntimeError: CUDA error: ...` records both; a specific pattern (ECC, cuBLAS) replaces them.
"""

from __future__ import annotations

import pytest
from matching import check, params

OOM = "cuda.oom"
ERR = "cuda.error"
EXC = "python.exception"

OUT_OF_MEMORY = [
    ("XLA/JAX allocator", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 17179869184 bytes.", {"cuda.alloc_failed": dict(requested="17179869184")}),
    ("CUDA driver async pool (XLA GPU client)", "cuMemAllocAsync failed to allocate 126,257,359,472 bytes (117.59 GiB)",
     {"cuda.alloc_failed": dict(requested="126,257,359,472")}),
    ("2.0: (GPU i; total; allocated; free; reserved)",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.12 MiB free; 14.60 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     {OOM: dict(requested="20.00 MiB", gpu=0, total="15.78 GiB", allocated="14.56 GiB", free="3.12 MiB")}),
    ("ROCm build: the same allocator, hipified",
     "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB "
     "of which 1.10 GiB is free. Of the allocated memory 60.2 GiB is allocated by PyTorch",
     {OOM: dict(requested="2.00 GiB", gpu=0, total="63.98 GiB", free="1.10 GiB")}),
    ("2.1: 'capacty' typo",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty of 15.78 GiB of which 3.12 MiB is free. Process 1234 has 15.77 GiB memory in use. Of the allocated memory 14.56 GiB is allocated by PyTorch, and 1.01 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     {OOM: dict(requested="20.00 MiB", gpu=0, total="15.78 GiB", free="3.12 MiB", allocated=None)}),
    ("2.2-2.3: torch.cuda.OutOfMemoryError, 'capacity'",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 1 has a total capacity of 39.39 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 38.87 GiB memory in use. Of the allocated memory 36.10 GiB is allocated by PyTorch, and 2.25 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
     {OOM: dict(requested="1.50 GiB", gpu=1, total="39.39 GiB", free="512.00 MiB")}),
    ("≥2.4: torch.OutOfMemoryError (FORMATS e.g.)",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.85 GiB memory in use. Of the allocated memory 75.01 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated. If reserved ...",
     {OOM: dict(requested="2.00 GiB", gpu=3, total="79.10 GiB", free="1.23 GiB")}),
    ("≥2.4 with excepthook prefix, sizes in bytes, allowed_info",
     "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 3 has a total capacity of 79.10 GiB of which 0 bytes is free. 4.00 GiB allowed; Of the allocated memory 3.99 GiB is allocated by PyTorch, and 1.00 MiB is reserved by PyTorch but unallocated.",
     {OOM: dict(requested="512 bytes", gpu=3, free="0 bytes")}),
    ("absurd size: no GPU facts to give",
     "RuntimeError: CUDA out of memory. Tried to allocate more than 1EB memory.",
     {OOM: dict(requested=None, gpu=None)}),
]

RUNTIME_ERRORS = [
    ("≤2.7 RuntimeError: illegal memory access (two fallbacks, both kept)",
     "RuntimeError: CUDA error: an illegal memory access was encountered",
     {ERR: dict(cuda_error="an illegal memory access was encountered"), EXC: dict(exception="RuntimeError")}),
    ("≥2.8 torch.AcceleratorError: device-side assert",
     "torch.AcceleratorError: CUDA error: device-side assert triggered",
     {ERR: dict(cuda_error="device-side assert triggered"), EXC: dict(exception="torch.AcceleratorError")}),
    ("excepthook prefix",
     "[rank0]: RuntimeError: CUDA error: misaligned address",
     {ERR: dict(cuda_error="misaligned address"), EXC: {}}),
    ("CUDA-runtime OOM is a CUDA error, not the allocator's message",
     "RuntimeError: CUDA error: out of memory",
     {ERR: dict(cuda_error="out of memory"), EXC: {}}),
    ("watchdog variant: what(): line",
     "  what():  CUDA error: an illegal memory access was encountered",
     {ERR: dict(cuda_error="an illegal memory access was encountered")}),
    ("abort, ≥2.8 exception type", "terminate called after throwing an instance of 'c10::AcceleratorError'", {"cuda.accelerator_abort": {}}),
    ("abort, ≤2.7 exception type", "terminate called after throwing an instance of 'c10::Error'", {"cuda.accelerator_abort": {}}),
    ("device-side assert, real kernel format",
     "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
     {"cuda.device_assert": dict(assertion="t >= 0 && t < n_classes")}),
    ("device-side assert with rank prefix",
     "[rank1]: /pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [12,0,0], thread: [64,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.",
     {"cuda.device_assert": dict(assertion="-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"")}),
    ("cuBLAS status replaces the generic CUDA error",
     "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
     {"cuda.library_error": dict(status="CUBLAS_STATUS_EXECUTION_FAILED")}),
    ("cuDNN status",
     "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
     {"cuda.library_error": dict(status="CUDNN_STATUS_INTERNAL_ERROR")}),
]

INCIDENTS = [
    # hpc-node-gpu-uncorrectable-ecc/combined.log, every line
    ("ecc: the error", "RuntimeError: CUDA error: uncorrectable ECC error encountered", {"cuda.ecc": {}}),
    ("ecc: boilerplate", "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.", {}),
    ("ecc: boilerplate (≤2.3 trailing '.')", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.", {}),
    ("ecc: boilerplate", "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", {}),
]

NEAR_MISSES = [
    ("2.9-2.11 search hint names the enum only",
     "[Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.]",
     {}),
    ("≥2.4 boilerplate without the period", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1", {}),
    ("a healthy ECC counter is not an ECC error", "[health-check] GPU 3 ECC errors: 0 volatile, 0 aggregate", {}),
    ("nvidia-smi -q's retired-pages key on a healthy GPU", "            Double Bit ECC                    : N/A", {}),
    ("allocator config echo", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", {}),
]


@pytest.mark.parametrize("line, expected", params(OUT_OF_MEMORY))
def test_out_of_memory_every_version(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(RUNTIME_ERRORS))
def test_runtime_errors(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(INCIDENTS))
def test_incident_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
