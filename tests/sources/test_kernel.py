"""tools/sources/kernel.py: NVIDIA driver Xid / NVSwitch SXid (FORMATS.md §6) and the host OOM killer.

Each row: a line exactly as emitted (dmesg `[ sec.usec]`, journald `Mon DD HH:MM:SS host kernel:` or bare), the
pattern ids the scanner records for it, and the fields each id extracts (a subset; None = absent). Xid forms:
≤565 always `pid=, name=` (`'<unknown>'` without a process), ≥570 no pid/name without a process, MIG adds
`GPU-I:`/`GPU-CI:` inside the parentheses, very old drivers omit `PCI:`.
"""

from __future__ import annotations

import pytest
from matching import check, params

XID = "kernel.xid"

XIDS = [
    ("real journald, ≤565 unknown process",
     "Jan 22 18:38:35 host kernel: NVRM: Xid (PCI:0000:81:00): 31, pid='<unknown>', name=<unknown>, Ch 00000016, intr 10000000. MMU Fault: ENGINE GRAPHICS HUBCLIENT_FECS faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
     {XID: dict(pci="0000:81:00", xid=31, pid=None, proc=None,
                msg="Ch 00000016, intr 10000000. MMU Fault: ENGINE GRAPHICS HUBCLIENT_FECS faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ")}),
    ("real dmesg, ≥570 no process",
     "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.",
     {XID: dict(pci="0000:03:00", xid=79, pid=None, proc=None, msg="GPU has fallen off the bus.")}),
    ("with pid and name",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 13, pid=12345, name=python, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
     {XID: dict(pci="0000:3b:00", xid=13, pid=12345, proc="python")}),
    ("94 contained ECC",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 94, pid=12345, name=pt_main_thread, Contained: CE User Channel (0x9). RST: No, D-RST: No",
     {XID: dict(xid=94, pid=12345, proc="pt_main_thread", msg="Contained: CE User Channel (0x9). RST: No, D-RST: No")}),
    ("MIG: GPU-I and GPU-CI",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00 GPU-I:1 GPU-CI:0): 95, pid=12345, name=python, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
     {XID: dict(pci="0000:3b:00", gpu_instance=1, compute_instance=0, xid=95, pid=12345, proc="python")}),
    ("MIG: GPU-I only",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00 GPU-I:2): 43, pid=12345, name=python, Ch 00000010",
     {XID: dict(pci="0000:3b:00", gpu_instance=2, compute_instance=None, xid=43)}),
    ("very old driver: no 'PCI:'",
     "[ 5107.644336] NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus.",
     {XID: dict(pci="0000:03:00", xid=79, msg="GPU has fallen off the bus.")}),
    ("119 GSP timeout, ≥570",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 119, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 1234 (0x20802a02 0x8).",
     {XID: dict(xid=119, pid=None)}),
    ("≥575: 45 caused by a previous Xid",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 45, pid=12345, name=python, Ch 00000010 caused by previous Xid 79",
     {XID: dict(xid=45, msg="Ch 00000010 caused by previous Xid 79")}),
    ("63 row remapper",
     "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.",
     {XID: dict(xid=63, msg="Row Remapper: New row marked for remapping, reset gpu to activate.")}),
    ("real SXid, non-fatal",
     "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
     {"kernel.sxid": dict(pci="0000:05:00.0", sxid=12028, severity="Non-fatal")}),
    ("SXid, fatal, dmesg prefix",
     "[ 5107.644336] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 12 SOE error",
     {"kernel.sxid": dict(sxid=24007, severity="Fatal")}),
]

OOM_KILLER = [
    ("global OOM",
     "[ 5107.644336] Out of memory: Killed process 12345 (python) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB",
     {"kernel.oom_kill": dict(pid=12345, proc="python")}),
    ("cgroup (SLURM/Kubernetes memory limit) OOM",
     "[ 5107.644336] Memory cgroup out of memory: Killed process 12345 (python) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200kB oom_score_adj:0",
     {"kernel.oom_kill": dict(pid=12345, proc="python")}),
    ("OOM killer invoked",
     "[ 5107.644336] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
     {"kernel.oom_kill": dict(pid=None)}),
    ("oom-kill summary",
     "[ 5107.644336] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_123,task_memcg=/slurm/uid_1000/job_123/step_0,task=python,pid=12345,uid=1000",
     {"kernel.oom_kill": {}}),
]

NEAR_MISSES = [
    ("GPU identity line before the first Xid", "[ 5107.644336] NVRM: GPU at PCI:0000:3b:00: GPU-1e2a3b4c-5d6e-7f80-9a0b-1c2d3e4f5a6b", {}),
    ("driver load", "[    5.123456] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024", {}),
    ("fabric manager start", "[   12.000001] nvidia-nvswitch0: probe successful", {}),
]


@pytest.mark.parametrize("line, expected", params(XIDS))
def test_xid_every_form(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(OOM_KILLER))
def test_oom_killer(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


AER = [
    ("uncorrected fatal, on the root port", "[ 8012.551234] pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error "
     "received: 0000:81:00.0", {"kernel.aer_uncorrected": dict(pci="0000:80:01.1")}),
    ("uncorrected non-fatal, on the GPU", "Mar  3 02:11:09 node12 kernel: nvidia 0000:81:00.0: PCIe Bus Error: "
     "severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)", {"kernel.aer_uncorrected": {}}),
    ("corrected: noise", "[ 8012.551234] pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0",
     {"kernel.aer_corrected": {}}),
    ("corrected, as the bus error line", "pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical "
     "Layer, (Receiver ID)", {"kernel.aer_corrected": {}}),
]


@pytest.mark.parametrize("line, expected", params(AER))
def test_aer(line, expected):
    check(line, expected)


MORE = [
    # NVLink faults are Xid 74: the link and its registers stay in `msg` (public HyperPod / NVSentinel examples)
    ("Xid 74 NVLink, journald", "Aug 21 18:35:35 node-b9 kernel: NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, "
     "name=<unknown>, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
     {XID: dict(pci="0000:b9:00", xid=74, msg="NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, "
                                              "0x0, 0x0)")}),
    ("Xid 74 NVLink, dmesg, ≤565 quoted unknown",
     "[449410.332316] NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected "
     "on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", {XID: dict(pci="0003:00:00", xid=74)}),
    # aer.c prefixes "Multiple " when more than one error was logged before the handler ran
    ("AER, several uncorrected at once", "[ 8012.551234] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Non-Fatal) "
     "error received: 0000:03:00.0", {"kernel.aer_uncorrected": dict(pci="0000:00:03.0")}),
    ("AER, several corrected: noise", "[ 8012.551234] pcieport 0000:00:03.0: AER: Multiple Corrected error received: "
     "0000:03:00.0", {"kernel.aer_corrected": {}}),
    # khungtaskd (kernel/hung_task.c): the first report, a later one for the same task, a kernel thread
    ("hung task, dmesg", "[ 4920.112233] INFO: task python:4127 blocked for more than 120 seconds.",
     {"kernel.hung_task": dict(proc="python", pid=4127, seconds=120)}),
    ("hung task, repeated, journald", "Mar  5 08:31:52 puma kernel: [10359910.034733] INFO: task pt_main_thread:118153 "
     "blocked for more than 241 seconds.", {"kernel.hung_task": dict(proc="pt_main_thread", pid=118153, seconds=241)}),
    ("hung task, a kworker", "[12124.201919] INFO: task kworker/2:1:166 blocked for more than 120 seconds.",
     {"kernel.hung_task": dict(proc="kworker/2:1", pid=166)}),
    # the cgroup OOM killer: same pattern as the global one, the scope and constraint say it was a limit
    ("memory cgroup OOM", "[ 5107.644336] Memory cgroup out of memory: Killed process 4127 (pt_main_thread) "
     "total-vm:1234kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0",
     {"kernel.oom_kill": dict(scope="Memory cgroup", pid=4127, proc="pt_main_thread")}),
    ("global OOM has no cgroup scope", "[ 5107.644336] Out of memory: Killed process 12345 (python) total-vm:1kB",
     {"kernel.oom_kill": dict(scope=None, pid=12345)}),
    ("oom-kill summary names the memcg constraint", "[ 5107.644336] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
     "cpuset=/,mems_allowed=0-1,oom_memcg=/kubepods/burstable/pod1,task=python,pid=12345,uid=0",
     {"kernel.oom_kill": dict(constraint="CONSTRAINT_MEMCG")}),
    # near misses: the hung-task sysctl hint and a task's stack header are not the report
    ("hung-task hint line", "[ 4920.112240] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.",
     {}),
    ("hung task's state line", "[ 4920.112250] task:python          state:D stack:0     pid:4127  ppid:4100", {}),
]


@pytest.mark.parametrize("line, expected", params(MORE))
def test_nvlink_aer_hung_task_and_cgroup_oom(line, expected):
    check(line, expected)


def test_a_journal_line_s_host_names_its_node_over_the_file_s_name(tmp_path):
    """A journal or syslog line names the machine that logged it (`Mar 14 08:59:01 gpu-r04 kernel: ...`): that is
    the hit's node, not a word of the file's name (`node_check.txt`); a dmesg line names none, and keeps the name's."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle
    (tmp_path / "node_check.txt").write_text(
        "Mar 14 08:58:40 gpu-r04 systemd[1]: Started Session 12 of user slurm.\n"
        "Mar 14 08:59:01 gpu-r04 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen off "
        "the bus.\n")
    (tmp_path / "node_h100-7.txt").write_text("[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, "
                                              "GPU has fallen off the bus.\n"
                                              # a container's syslog names no machine
                                              "Mar 14 08:59:02 localhost kernel: NVRM: Xid (PCI:0000:3b:00): 79, "
                                              "pid=2211, name=python, GPU has fallen off the bus.\n"
                                              # nor does a level word where a host would sit
                                              "2024-03-14T08:59:03+0000 ERROR trainer: NVRM: Xid (PCI:0000:3b:00): 79, "
                                              "pid=2211, name=python, GPU has fallen off the bus.\n")
    with open_bundle(tmp_path) as b:
        scan = scan_bundle(b, workers=1)
    nodes = {f.rel: [h.node for h in f.hits if h.pattern.startswith("kernel.xid")] for f in scan.files}
    assert nodes == {"node_check.txt": ["gpu-r04"], "node_h100-7.txt": ["h100-7"] * 3}, nodes
