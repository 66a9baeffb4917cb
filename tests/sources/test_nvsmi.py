"""tools/sources/nvsmi.py: nvidia-smi's and NVML's own messages about a GPU it cannot reach, as health checks print
them into job logs; near-misses that must not match."""

from __future__ import annotations

import pytest
from matching import check, params

LINES = [
    ("device handle, unknown error", "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
     {"nvsmi.device_handle": dict(pci="0000:3B:00.0", what="Unknown Error")}),
    ("GPU lost (both patterns: one line says both)",
     "Unable to determine the device handle for gpu 0000:41:00.0: GPU is lost.  Reboot the system to recover this GPU",
     {"nvsmi.device_handle": {}, "nvsmi.gpu_lost": {}}),
    ("driver unreachable", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
     "that the latest NVIDIA driver is installed and running.", {"nvsmi.no_driver": {}}),
    ("no devices, in a prolog script's output", "+ nvidia-smi -L\nNo devices were found".split("\n")[1],
     {"nvsmi.no_devices": {}}),
]

NEAR_MISSES = [
    ("a healthy nvidia-smi header", "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: "
     "12.4     |", {}),
    ("a retired-pages count of zero", "        Pending Page Blacklist      : No", {}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
