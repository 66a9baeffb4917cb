"""nvidia-smi and NVML, as health checks and prolog/epilog scripts print them into job logs (TAXONOMY `gpu_cuda`:
"nvidia-smi unable to reach a device").

Real lines (NVIDIA driver 470-570, nvidia-smi's own messages):
    Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error
    Unable to determine the device handle for gpu 0000:41:00.0: GPU is lost.  Reboot the system to recover this GPU
    NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.
    No devices were found
A GPU that the driver can no longer reach is the node's fault, never the program's: drain the node.
"""

from trainlog_debugger.tools.sources.pattern import P

DRAIN = "drain the node and check the GPU (`nvidia-smi -q`, the kernel log's Xid lines); reset or RMA it"

PATTERNS = [
    P("nvsmi.device_handle", 1, "gpu_cuda", "root_candidate",
      r"Unable to determine the device handle for (?:GPU|gpu)", "Unable to determine the device handle",
      "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
      "nvidia-smi cannot reach a GPU (lost, or in an unknown error state)",
      fields=r"device handle for (?:GPU|gpu) ?(?P<pci>[0-9A-Fa-f:.]+): (?P<what>.*)", weight=0.85, advice=DRAIN),
    P("nvsmi.gpu_lost", 1, "gpu_cuda", "root_candidate",
      r"GPU is lost\.|GPU requires reset", ("GPU is lost.", "GPU requires reset"),
      "Unable to determine the device handle for gpu 0000:41:00.0: GPU is lost.  Reboot the system to recover this GPU",
      "the driver reports a GPU lost or needing a reset", weight=0.85, advice=DRAIN),
    P("nvsmi.no_driver", 1, "gpu_cuda", "root_candidate",
      r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
      "NVIDIA-SMI has failed because",
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
      "driver is installed and running.",
      "nvidia-smi cannot talk to the NVIDIA driver on this node", weight=0.7,
      advice="check the node's driver (`lsmod | grep nvidia`, the kernel log) and drain it until it is fixed"),
    P("nvsmi.no_devices", 1, "gpu_cuda", "root_candidate",
      r"No devices were found", "No devices were found",
      "No devices were found",
      "nvidia-smi found no GPU on a node that should have some", weight=0.55, advice=DRAIN),
]
