"""Which hardware tool printed a snapshot, from its content (names lie: `node3.txt`, `slurm-42.out`), and the weaker
name hints: the format floor of the hw package, shared by detection and the parsers (parse.py), so a file is read
by the parser of the kind it was sniffed as and a renamed file still finds its parser.

    nvidia-smi -q       ==============NVSMI LOG==============            (or `GPU 00000000:3B:00.0` + `    Key : value`)
    nvidia-smi topo -m  \tGPU0\tGPU1\t...  /  GPU0\t X \tNV12 ...
    ibstat              CA 'mlx5_0'  ...  Port 1:
    ibv_devinfo         hca_id:\tmlx5_0
    perfquery           # Port counters: Lid 12 port 1 (CapMask: 0x5A00)
    nccl-tests          # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 ...  /  # Avg bus bandwidth    : 182.5
    dcgmi diag          | Diagnostic                | Result                                         |
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.declare import Detector, Head, Reader, has

NVIDIA_SMI, GPU_TOPO, IB_STATUS, IB_COUNTERS, NCCL_TESTS, DCGM_DIAG = (
    "nvidia_smi", "gpu_topo", "ib_status", "ib_counters", "nccl_tests", "dcgm_diag")
KINDS = dict.fromkeys((NVIDIA_SMI, GPU_TOPO, IB_STATUS, IB_COUNTERS, NCCL_TESTS, DCGM_DIAG), "snapshot")

_M = re.M
# what each tool's output contains wherever it starts: the test that recognises a snapshot by content, shared by
# detection and the snapshot reader, most specific first
HW_CONTENT = (
    (DCGM_DIAG, re.compile(r"^\|\s*Diagnostic\s+\|\s*Result\s+\|", _M)),
    (NCCL_TESTS, re.compile(r"^#\s*Avg bus bandwidth\s*:|^# nThread \d+ nGpus \d+ minBytes", _M)),
    (IB_COUNTERS, re.compile(r"^# Port (?:extended )?counters: ", _M)),
    (IB_STATUS, re.compile(r"^CA '[^'\n]+'\s*\n(?:\s.*\n){0,40}?\s+Port \d+:|^hca_id:\s*\S+", _M)),
    (GPU_TOPO, re.compile(r"^\s*(?:\x1b\[[0-9;]*m)?\s*GPU0\s+GPU1\b[^\n]*\n(?:\x1b\[[0-9;]*m)?GPU0\s+X\b", _M)),
    (NVIDIA_SMI, re.compile(r"=+NVSMI LOG=+|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*\n\s+\S[^\n]*: ", _M)),
)
# (nccl-tests: its own first line, or the command that ran it pasted as a comment above it, `#  ./all_reduce_perf -b 8`:
# every test binary is named `<collective>_perf`)
_START = re.compile(r"\s*(?:(?:\x1b\[[0-9;]*m)?\s*GPU0\s|CA '|hca_id:|# Port (?:extended )?counters:|# nThread \d|"
                    r"#\s+\S*\b[a-z_]+_perf\s+-|"
                    r"Successfully ran diagnostic|\+-{20,}\+-{20,}\+|\|\s*Diagnostic\s+\|)")
# the nvidia-smi banner or `-q` header anywhere in a head: prolog scripts print it at the top of workers' logs
_NVSMI = re.compile(r"NVIDIA-SMI \d+\.\d+|=+NVSMI LOG=+|Driver Version\s*:.*CUDA Version", re.S)
_NVSMI_NAME = re.compile(r"nvidia[-_]?smi", re.I)
_NAMES = ((_NVSMI_NAME, NVIDIA_SMI), (re.compile(r"topo", re.I), GPU_TOPO),
          (re.compile(r"ibstat|ibv_devinfo|ibv-devinfo", re.I), IB_STATUS),
          (re.compile(r"perfquery", re.I), IB_COUNTERS),
          (re.compile(r"nccl[-_]?tests?|(?:all_reduce|all_gather|reduce_scatter|alltoall|sendrecv)_perf", re.I),
           NCCL_TESTS), (re.compile(r"dcgm", re.I), DCGM_DIAG))


def hardware_kind(text: str) -> str | None:
    """The hardware snapshot kind whose content test `text` passes (HW_CONTENT), None when none does."""
    return next((kind for kind, rx in HW_CONTENT if rx.search(text)), None)


def _first_line(h: Head) -> str | None:
    """The snapshot kind of a head whose first line is a hardware tool's first line. `nvidia-smi -q` is left to the
    framing tier below the launchers: prolog scripts print it at the top of workers' logs."""
    if not h.lines or not _START.match(h.lines[0]):
        return None
    kind = hardware_kind(h.text)
    return kind if kind != NVIDIA_SMI else None


def _name(h: Head) -> str | None:
    return next((kind for rx, kind in _NAMES if rx.search(h.name)), None)


DETECT = (Detector("content", 60, _first_line,  # a snapshot that starts as its tool starts (slurm-N.out too)
                   ("slurm-42.out", b"CA 'mlx5_0'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Active\n")),
          Detector("framing", 70, lambda h: NVIDIA_SMI if has(_NVSMI, h.text, "NVIDIA-SMI", "NVSMI LOG",
                                                                     "Driver Version") else None,
                   ("prolog.log", b"| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |\n")),
          Detector("name", 40, _name, ("node3-ibstat.txt", b"(empty)\n")))

READER = Reader(
    "reader.hardware", None,
    "hardware and fabric snapshots per node; the node out of line with its peers, joined to the ranks it ran",
    ("nvidia-smi -q (ECC, retired pages, remapped rows, throttle reasons, temperature)", "nvidia-smi topo -m",
     "ibstat", "ibv_devinfo", "perfquery (and -x)", "nccl-tests (all_reduce_perf & co.)", "dcgmi diag"),
    "Volatile ... DRAM Uncorrectable : 4", ("hardware.*",))
