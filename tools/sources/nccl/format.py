"""NCCL's own lines (FORMATS.md §3): `{host}:{pid}:{tid} [{cudaDev}] [file:line] NCCL INFO|WARN {msg}`.

Real lines:
    H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)
    [2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) ...
    include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device
The IB completion status tells the story: 4 local protection (ACS / GPUDirect), 5 flush (secondary), 12 retry
exceeded (link or peer unreachable).
"""

import re

from trainlog_debugger.tools.sources.pattern import P, WorldSize

# the host and pid an NCCL INFO line opens with ('node-17:4127:4190 [3] NCCL INFO ...'), after whatever prefix a
# launcher put before it (a blank, torchrun's `[default2]:`, srun's `3: `): which process printed it, on which host
# (pid and tid at most 10 digits, the device at most 4, like the attribution's own NCCL prefix)
HOST_PID = re.compile(r"(?:^|[\s\]:])(?P<host>[\w.-]+):(?P<pid>\d{1,10}):\d{1,10} \[\d{1,4}\] NCCL INFO")
# ... and a WARN's too (`gpu-c02:120417:121002 [4] transport/net_ib.cc:2453 NCCL WARN ...`: its source file between)
HOST_PID_ANY = re.compile(r"(?:^|[\s\]:])(?P<host>[\w.-]+):(?P<pid>\d{1,10}):\d{1,10} \[\d{1,4}\] "
                          r"(?:\S{1,200} )?NCCL (?:INFO|WARN)")

PATTERNS = [
    P("nccl.ib_completion_error", 1, "network", "root_candidate",
      r"NET/IB\w*(?:/GIN)? ?: ?Got completion from peer", "Got completion from peer",  # IBext / plugin spellings
      "H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)",
      "InfiniBand work completion error",
      fields=r"from peer (?P<peer>\S+) with (?:error |status=(?:(?P<status_name>[A-Z_]+)\()?)(?P<status>\d+)\)?(?:.*?vendor[ _]err[ =]?(?P<vendor_err>\d+))?",
      ints=("status", "vendor_err")),
    P("nccl.ib_async_event", 1, "network", "root_candidate",
      r"NET/IB ?: (?:\S+ )?Got (?:non-fatal )?async event", "async event",
      "node7:1234:1300 [0] NCCL INFO NET/IB : mlx5_1:1 Got async event : port error",
      "InfiniBand async event (port error, link down)", fields=r"NET/IB ?: (?:(?P<hca>\S+) )?Got (?:non-fatal )?async event ?: ?(?P<event>.*)"),
    P("nccl.shm_no_space", 1, "infrastructure", "root_candidate",
      r"(?:posix_fallocate failed: No space left on device|Error while creating shared memory segment)",
      ("posix_fallocate failed", "Error while creating shared memory segment"),
      "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device",
      "NCCL cannot create its shared-memory segment (/dev/shm too small)",
      fields=r"shared memory segment (?P<segment>\S+) \(size (?P<size>\d+)\)", ints=("size",)),
    P("nccl.no_socket_interface", 1, "config", "root_candidate",
      r"(?:Bootstrap|NET/Socket) ?: no socket interface found", "no socket interface found",
      "node1:1234:1300 [0] bootstrap.cc:80 NCCL WARN Bootstrap : no socket interface found",
      "NCCL found no usable network interface (NCCL_SOCKET_IFNAME matches none)"),
    P("nccl.socket_error", 1, "network", "root_candidate",
      # older NCCL (include/socket.h) prints `Connect to <ip><port> failed : Connection refused` with no function name
      r"(?:Connection closed by remote peer|socketStartConnect: Connect to|socketPollConnect: exceeded timeouts|No interface found in the same subnet|Call to recv from \S+ failed"
      r"|NCCL WARN Connect to \S+ failed)",
      ("Connection closed by remote peer", "socketStartConnect", "socketPollConnect", "No interface found in the same subnet", "Call to recv from",
       "NCCL WARN Connect to "),
      "node2:1234:1299 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node3<46512>",
      "NCCL socket error", fields=r"NCCL WARN (?P<warn>.*)"),
    P("nccl.cuda_failure", 1, "gpu_cuda", "root_candidate",
      r"NCCL WARN Cuda failure", "NCCL WARN Cuda failure",
      "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
      "CUDA call failed inside NCCL", fields=r"(?P<file>\S+):(?P<line>\d+)(?: \((?P<func>\w+)\))? NCCL WARN Cuda failure (?:(?P<code>\d+) )?'(?P<error>[^']*)'",
      ints=("line", "code")),
    P("nccl.version_mismatch", 1, "config", "root_candidate",
      r"Mismatched NCCL version detected", "Mismatched NCCL version",
      "node1:1:1 [0] NCCL WARN Mismatched NCCL version detected : rank 0 version 21805 rank 8 version 21602",
      "ranks run different NCCL versions"),
    P("nccl.warn", 2, "network", "root_candidate",
      r"NCCL WARN ", "NCCL WARN ",
      "node2:1234:1299 [0] transport/net_ib.cc:100 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory errno 12",
      "any NCCL warning", fields=r"(?:(?P<file>[\w/.]+):(?P<line>\d+) (?:\((?P<func>\w+)\) )?)?NCCL WARN (?P<warn>.*)", ints=("line",), fallback=True),
    P("nccl.error_return", 3, None, "cascade",
      # engine trigger `file:line -> rc` without `NCCL INFO \S+` in front: Hyperscan otherwise confirmed a
      # near-miss on every NCCL INFO line (13 % of the catalog's scan time); `verify` is the precise regex
      r":\d+(?: \(\w+\))? -> [1-9]", " -> ",
      "H100-1:9821:9920 [1] NCCL INFO transport/net.cc:1008 -> 6",
      "NCCL error code propagating up the call stack", verify=r"NCCL INFO \S+:\d+(?: \(\w+\))? -> [1-9]",
      fields=r"NCCL INFO (?P<where>\S+:\d+)(?: \((?P<func>\w+)\))? -> (?P<rc>\d+)", ints=("rc",)),
    P("nccl.comm_init", 0, None, "context",
      r"rank \d+ nranks \d+ cudaDev \d", " nranks ",
      "node1:2345:2400 [3] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 61000 commId 0x8c3f2a1b - Init COMPLETE",
      "NCCL communicator init: rank, nranks and device (rank↔host map)",
      fields=r"rank (?P<comm_rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda_dev>\d+)", ints=("comm_rank", "nranks", "cuda_dev")),
    P("nccl.version", 0, None, "context",
      r"NCCL version \d+\.\d+\.\d", "NCCL version ",
      "node1:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
      "NCCL version", fields=r"NCCL version (?P<nccl_version>\d+\.\d+\.\d+)"),
]

# a communicator's size: the world size when it is the largest one and no line states the world size itself
WORLD_SIZE = {"nccl.comm_init": WorldSize("nranks", 1, "NCCL nranks (largest communicator)")}
# the rank → host map of world-sized communicators, a step over the per-file scans (tools.scan.summary)
SCAN_STEPS = {"nodes": "trainlog_debugger.tools.sources.nccl.nodes:comm_rank_nodes"}
