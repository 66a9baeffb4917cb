"""CUDA errors surfaced through PyTorch (FORMATS.md §9).

Real/constructed lines:
    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.23 GiB is free. ...
    RuntimeError: CUDA error: uncorrectable ECC error encountered
    /pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.
The exception class moved (torch.cuda.OutOfMemoryError ≤2.3 → torch.OutOfMemoryError; RuntimeError ≤2.7 →
torch.AcceleratorError) and 2.1 spells "capacty", so the triggers key on the message, not the class.
"""

from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    # Allocators outside PyTorch's caching allocator: XLA/JAX's (`RESOURCE_EXHAUSTED: Out of memory while trying to
    # allocate N bytes`) and the CUDA driver API's async pool (`cuMemAllocAsync failed to allocate N bytes`).
    P("cuda.alloc_failed", 1, "oom", "root_candidate",
      r"(?:cuMemAlloc\w* failed to allocate|Out of memory while trying to allocate)",
      ("failed to allocate", "Out of memory while trying to allocate"),
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
      "an accelerator memory allocation failed (XLA/JAX or the CUDA driver's pool)",
      fields=r"allocate (?P<requested>[\d,]+) bytes"),
    P("cuda.oom", 1, "oom", "root_candidate",
      # ROCm builds say HIP (c10/hip's allocator is the CUDA one hipified)
      # ... or only the allocator's own sentence, where a paste cut the line before it (its GPU and capacity clause
      # belongs to this message alone: both wordings, ≥2.1 and 2.0)
      r"(?:(?:CUDA|HIP) out of memory\. Tried to allocate|Tried to allocate [\d.]{1,12} ?[KMGT]i?B\.? \(?GPU \d{1,3}"
      r"(?: has a total capac| ?; [\d.]{1,12} ?[KMGT]i?B total capacity))",
      ("CUDA out of memory", "HIP out of memory", " has a total capac", " total capacity; "),
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.85 GiB memory in use.",
      "GPU memory exhausted",
      # ≥2.1: `2.00 GiB. GPU 3 has a total capac(i)ty of 79.10 GiB of which 1.23 GiB is free`;
      # 2.0: `20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.12 MiB free; ...`
      fields=r"Tried to allocate (?P<requested>[\d.]+ ?\w+)(?:\.? \(?GPU (?P<gpu>\d+)(?:;| has a total capac(?:i)?ty of) (?P<total>[\d.]+ \w+)"
             r"(?: total capacity; (?P<allocated>[\d.]+ \w+) already allocated;| of which) (?P<free>[\d.]+ \w+) (?:is )?free)?",
      ints=("gpu",)),
    P("cuda.ecc", 1, "gpu_cuda", "root_candidate",
      # 'Double Bit ECC error', not the bare key: every healthy `nvidia-smi -q` prints `Double Bit ECC : N/A`
      r"(?:[Uu]ncorrectable ECC error|Double Bit ECC [Ee]rror)", ("ncorrectable ECC error", "Double Bit ECC "),
      "RuntimeError: CUDA error: uncorrectable ECC error encountered",
      "GPU memory ECC error (hardware)"),
    P("cuda.error", 1, "gpu_cuda", "root_candidate",
      r"CUDA error: ", "CUDA error: ",
      "RuntimeError: CUDA error: an illegal memory access was encountered",
      "CUDA runtime error", fields=r"CUDA error: (?P<cuda_error>.*?)\s*$", fallback=True),
    P("cuda.device_assert", 1, "software", "root_candidate",
      r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion", "Assertion",
      "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
      "device-side assert in a CUDA kernel (bad index or label)", fields=r"Assertion `(?P<assertion>[^`]*)` failed"),
    P("cuda.library_error", 1, "gpu_cuda", "root_candidate",
      r"(?:CUBLAS_STATUS_[A-Z]|CUDNN_STATUS_[A-Z]|cuDNN error: )", ("CUBLAS_STATUS_", "CUDNN_STATUS_", "cuDNN error: "),
      "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
      "cuBLAS/cuDNN failure", fields=r"(?P<status>CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+)"),
    P("cuda.accelerator_abort", 1, "gpu_cuda", "cascade",
      r"terminate called after throwing an instance of 'c10::(?:Error|AcceleratorError|CUDAError)'",
      "terminate called after throwing",
      "terminate called after throwing an instance of 'c10::AcceleratorError'",
      "process aborted on a CUDA exception in a background thread"),
]
