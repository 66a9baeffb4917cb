"""Kernel log lines (dmesg / kern.log / journald): NVIDIA driver Xid and the host OOM killer (FORMATS.md §6).

Real lines:
    Jan 22 18:38:35 host kernel: NVRM: Xid (PCI:0000:81:00): 31, pid='<unknown>', name=<unknown>, Ch 00000016, ...
    [ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.
    Out of memory: Killed process 12345 (python) total-vm:... anon-rss:...
    pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error received: 0000:81:00.0
    nvidia 0000:81:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)
    pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0   (handled by the link: noise)
    pcieport 0000:00:03.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:03:00.0   (aer.c, more than one)
    INFO: task python:4127 blocked for more than 120 seconds.                   (khungtaskd, kernel/hung_task.c)
    Memory cgroup out of memory: Killed process 12345 (python) total-vm:...     (mm/oom_kill.c, a cgroup limit)
NVLink faults are reported as Xid 74 (`NVRM: Xid (PCI:0000:b9:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal
error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)`): kernel.xid reads them, `msg` holds the link.
A hung task is a process stuck in the kernel (state D) for hung_task_timeout_secs: usually a filesystem (NFS,
Lustre, FUSE) or a driver call that never returned; which one is in the kernel stack printed under it, so the line
alone is a weak lead (infrastructure, below decisive), and its seconds (120, 241, 362...) say how long it has been.
Xid numbers map to causes (48/94/95 ECC, 79 off the bus, 74 NVLink, 119 GSP timeout); 13/31/43/45 are usually
the application's own fault or a consequence, so the diagnosis reads the number, not just the word "Xid".
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, Head, share
from trainlog_debugger.tools.sources.pattern import HitContext, Hook, P

XID_MEANING = {
    13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
    45: "preemptive cleanup after earlier errors", 48: "double-bit ECC error", 61: "PMU breakpoint",
    62: "PMU halt", 63: "ECC page retirement / row remap recorded", 64: "page retirement / row remap failure",
    74: "NVLink error", 79: "GPU has fallen off the bus", 92: "excessive single-bit ECC", 94: "contained ECC error",
    95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error", 154: "GPU recovery action required",
}

PATTERNS = [
    P("kernel.xid", 1, "gpu_cuda", "root_candidate",
      r"NVRM: Xid \(", "NVRM: Xid",
      "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.",
      "NVIDIA driver Xid error",
      fields=r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?: GPU-I:(?P<gpu_instance>\d+))?(?: GPU-CI:(?P<compute_instance>\d+))?[^)]*\): "
             r"(?P<xid>\d+),(?: pid=(?:'?<unknown>'?|(?P<pid>\d+)), name=(?:<unknown>|(?P<proc>[^,]*)),)? ?(?P<msg>.*)",
      ints=("xid", "gpu_instance", "compute_instance", "pid")),
    P("kernel.sxid", 1, "gpu_cuda", "root_candidate",
      r"nvidia-nvswitch\d+: SXid", "SXid",
      "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
      "NVSwitch error", fields=r"SXid \(PCI:(?P<pci>[^)]+)\): (?P<sxid>\d+), (?P<severity>Fatal|Non-fatal)", ints=("sxid",)),
    P("kernel.oom_kill", 1, "oom", "root_candidate",
      r"(?:[Oo]ut of memory: Killed process|oom-kill:|invoked oom-killer)", ("ut of memory: Killed process", "oom-kill:", "invoked oom-killer"),
      "Out of memory: Killed process 12345 (python) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB",
      "host OOM killer killed a process",
      fields=r"(?:(?P<scope>Memory cgroup) out of memory: )?Killed process (?P<pid>\d+) \((?P<proc>[^)]*)\)"
             r"|oom-kill:constraint=(?P<constraint>CONSTRAINT_\w+)", ints=("pid",)),
    P("kernel.aer_uncorrected", 1, "gpu_cuda", "root_candidate",
      r"AER: (?:Multiple )?Uncorrected \((?:Fatal|Non-Fatal)\) error|PCIe Bus Error: severity=Uncorrected",
      ("AER: Uncorrected", "AER: Multiple Uncorrected", "severity=Uncorrected"),
      "pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error received: 0000:81:00.0",
      "uncorrected PCIe error (AER) on a device's link", fields=r"(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)",
      advice="find the device at that PCI address (`lspci -s`); a GPU or its switch port with uncorrected AER errors "
             "needs the node drained and the link or card checked"),  # read by tools/rules/gpu.pcie_aer
    P("kernel.aer_corrected", 3, None, "noise",
      r"AER: (?:Multiple )?Corrected error received|PCIe Bus Error: severity=Corrected",
      ("AER: Corrected", "AER: Multiple Corrected", "severity=Corrected"),
      "pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0",
      "corrected PCIe error (handled by the link; a flood of them is worth a look, one is not)"),
    P("kernel.hung_task", 1, "infrastructure", "root_candidate",
      r"INFO: task \S+:\d+ blocked for more than \d+ seconds", "blocked for more than",
      "[ 4920.112233] INFO: task python:4127 blocked for more than 120 seconds.",
      "a process blocked in the kernel (hung task) for minutes",
      fields=r"INFO: task (?P<proc>\S+):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds",
      ints=("pid", "seconds"), weight=0.4, status="hung",
      advice="read the kernel stack printed under the hung-task line: nfs/lustre/fuse frames point at the filesystem "
             "(storage), nvidia/uvm frames at the GPU driver; `cat /proc/<pid>/stack` on a live node"),
]


# ---- detection: a file of kernel lines (dmesg, dmesg -T, syslog, journalctl), or one named as such
KERNEL = "kernel"
KINDS = {KERNEL: "system"}
_LINE = re.compile(
    r"^(?:\[\s*\d+\.\d+\] "                                              # dmesg
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "    # dmesg -T
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: "                # syslog / journalctl
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \S+ kernel: "                   # journalctl -o short-iso
    r"|NVRM: |nvidia-nvswitch\d+: SXid )")
_SYSLOG_LINE = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.()/-]+(?:\[\d+\])?: ")
_NAME = re.compile(r"^(?:dmesg|kern\.log|syslog|messages|journalctl)", re.I)


# the host field of a syslog / journalctl line (`Mar 14 08:59:01 gpu-r04 kernel: `, `-o short-iso`'s
# `2024-03-14T08:59:01+0000 gpu-r04 kernel: `): the machine that logged it, whatever the file is called
_HOST_FIELD = re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) "
                         r"(?!(?:localhost(?:\.localdomain)?|ERROR|WARN(?:ING)?|INFO|DEBUG|CRITICAL|FATAL|NOTICE) )"
                         r"([A-Za-z][\w.-]{0,252}) (?:kernel|[\w.()/-]+\[\d+\]): ")


def logged_on(ctx: HitContext) -> None:
    """A kernel file's kept hit is the node's whose host field its line carries: that beats a node read from the
    file's name (`node_check.txt` names no machine), which the scan gave the hit when the line named none."""
    if (m := _HOST_FIELD.match(ctx.text)) is not None:
        ctx.node = m.group(1)


KIND_HOOKS = {KERNEL: Hook(logged_on)}


def _content(h: Head) -> str | None:
    kernel = share(_LINE, h.lines)
    return KERNEL if kernel >= 0.5 or (kernel and kernel + share(_SYSLOG_LINE, h.lines) >= 0.6) else None


DETECT = (Detector("content", 50, _content,
                   ("node3.txt", b"[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")),
          Detector("name", 30, lambda h: KERNEL if _NAME.match(h.name) else None, ("dmesg.txt", b"(empty)\n")))
