"""tools/sources/nccl.py: NCCL's own INFO/WARN lines (FORMATS.md §3) and the real incidents.

Each row: a line exactly as emitted, the pattern ids the scanner records for it after the fallback rule, and the
fields each id extracts (a subset; None = absent). `nccl.warn` is a fallback: it is recorded only for WARN lines
that no specific pattern explains. Line headers by version (§3.1): `host:pid:tid [dev] file:line NCCL WARN` ≤2.25,
a `[YYYY-MM-DD HH:MM:SS] ` prefix 2.26–2.30.4, and `file:line (func) NCCL WARN` from 2.30.7.
"""

from __future__ import annotations

import pytest
from matching import check, params

IB = "nccl.ib_completion_error"
RET = "nccl.error_return"
WARN = "nccl.warn"

# §3.2: the same IB work-completion failure, in every wording NCCL has used.
IB_COMPLETION = [
    ("≤2.17: error N, opcode, len, vendor err",
     "node1:1234:1300 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53249> with error 12, opcode 0, len 0, vendor err 129",
     {IB: dict(peer="10.0.0.2<53249>", status=12, status_name=None, vendor_err=129)}),
    ("2.18-2.19: + (reqType) and RoCE GIDs",
     "node1:1234:1300 [0] transport/net_ib.cc:1455 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53249> with error 12, opcode 0, len 0, vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2",
     {IB: dict(peer="10.0.0.2<53249>", status=12, vendor_err=129)}),
    ("2.20-2.21: status=N opcode=N len=N",
     "node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53249> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2",
     {IB: dict(peer="10.0.0.2<53249>", status=12, vendor_err=129)}),
    ("2.22-2.28.3 real (2.27): 'NET/IB:' no space, timestamp prefix, hca",
     "[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1",
     {IB: dict(peer="10.99.91.63<51161>", status=4, status_name=None, vendor_err=81)}),
    ("2.28.7-2.28.9: status=IBV_WC_NAME(N), vendor_err=N",
     "[2026-03-03 12:11:38] node1:1234:1300 [0] transport/net_ib.cc:2460 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<53249> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129 req_type=Send localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0",
     {IB: dict(peer="10.0.0.2<53249>", status=12, status_name="IBV_WC_RETRY_EXC_ERR", vendor_err=129)}),
    ("2.29+ p2p.cc on IB: (func) header, two spaces before hca",
     "[2026-03-03 12:11:38] node1:1234:1300 [0] transport/net_ib/p2p.cc:310 (ncclIbTest) NCCL WARN NET/IB: Got completion from peer 10.0.0.2<53249> with status=IBV_WC_WR_FLUSH_ERR(5) opcode=IBV_WC_RECV(128) vendor_err=244  hca mlx5_0",
     {IB: dict(status=5, status_name="IBV_WC_WR_FLUSH_ERR", vendor_err=244)}),
    ("2.29+ p2p.cc on RoCE: GIDs, remoteGids glued",
     "[2026-03-03 12:11:38] node1:1234:1300 [0] transport/net_ib/p2p.cc:310 (ncclIbTest) NCCL WARN NET/IB: Got completion from peer 10.0.0.2<53249> with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0) vendor_err=129  localGid fe80::1 remoteGidsfe80::2 hca mlx5_0",
     {IB: dict(status=4, status_name="IBV_WC_LOC_PROT_ERR", vendor_err=129)}),
    ("2.29+ GIN path keeps the old field layout",
     "[2026-03-03 12:11:38] node1:1234:1300 [0] transport/net_ib/gin.cc:310 NCCL WARN NET/IB/GIN: Got completion from peer 10.0.0.2<53249> with status=4 opcode=0 len=0 vendor err 81 (Send)",
     {IB: dict(peer="10.0.0.2<53249>", status=4, vendor_err=81)}),
]

ERROR_RETURN = [
    ("INFO error cascade", "H100-1:9821:9920 [1] NCCL INFO transport/net.cc:1008 -> 6", {RET: dict(where="transport/net.cc:1008", rc=6)}),
    ("with a thread tag", "H100-1:9821:9920 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]", {RET: dict(where="proxy.cc:858", rc=6)}),
    ("with the error name", "node23:12098:12141 [2] NCCL INFO init.cc:1462 -> 1 (ncclCommInitRankFunc)", {RET: dict(where="init.cc:1462", rc=1)}),
    ("v2.30 file:line (func) -> rc",
     "node23:12098:12141 [2] NCCL INFO init.cc:1462 (ncclCommInitRankFunc) -> 3",
     {RET: dict(where="init.cc:1462", func="ncclCommInitRankFunc", rc=3)}),
]

WARNINGS = [
    ("/dev/shm too small: also io.no_space (the words are 'No space left on device')",
     "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device",
     {"nccl.shm_no_space": dict(segment=None), "io.no_space": {}}),
    ("socket: connection closed",
     "node2:1234:1299 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node3<46512>",
     {"nccl.socket_error": dict(warn="socketProgress: Connection closed by remote peer node3<46512>")}),
    ("≤2.2x socket: recv failed (the reset is also io.connection_reset)",
     "node2:1234:1299 [0] misc/socket.cc:50 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.3<46512> failed : Connection reset by peer",
     {"nccl.socket_error": {}}),
    ("socket connect failed (real host format)",
     "tpgds-aihub0007:185303:186751 [1] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.99.91.63<40171> failed : Software caused connection abort",
     {"nccl.socket_error": dict(warn="socketStartConnect: Connect to 10.99.91.63<40171> failed : Software caused connection abort")}),
    ("socket connect timeouts",
     "node2:1234:1299 [0] misc/socket.cc:480 NCCL WARN socketPollConnect: exceeded timeouts (20)",
     {"nccl.socket_error": {}}),
    ("no interface in the remote subnet",
     "node2:1234:1299 [0] misc/socket.cc:480 NCCL WARN Net : No interface found in the same subnet as remote address fe80::1%ib0<4444>",
     {"nccl.socket_error": {}}),
    ("≤2.2x Cuda failure without a code",
     "node23:12098:12141 [2] enqueue.cc:244 NCCL WARN Cuda failure 'out of memory'",
     {"nccl.cuda_failure": dict(file="enqueue.cc", line=244, code=None, error="out of memory")}),
    ("v2.30.7+ (func) header, cudawrap code",
     "[2026-03-03 12:11:38] node23:12098:12141 [2] enqueue.cc:244 (ncclLaunchKernel) NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
     {"nccl.cuda_failure": dict(file="enqueue.cc", line=244, func="ncclLaunchKernel", code=700, error="an illegal memory access was encountered")}),
    ("version mismatch",
     "node1:1:1 [0] init.cc:100 NCCL WARN Mismatched NCCL version detected : rank 0 version 21805 rank 8 version 21602",
     {"nccl.version_mismatch": {}}),
    ("ibv call failed: only the generic WARN",
     "node2:1234:1299 [0] transport/net_ib.cc:100 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory errno 12",
     {WARN: dict(file="transport/net_ib.cc", line=100, warn="Call to ibv_create_qp failed with error Cannot allocate memory errno 12")}),
    ("proxy service failure, v2.30.7+ (func) header",
     "[2026-03-03 12:11:38] node2:1234:1299 [0] proxy.cc:1500 (ncclProxyService) NCCL WARN [Proxy Service 3] Failed to execute operation Connect from rank 5, retcode 3",
     {WARN: dict(file="proxy.cc", line=1500, func="ncclProxyService", warn="[Proxy Service 3] Failed to execute operation Connect from rank 5, retcode 3")}),
    ("service thread error",
     "node2:1234:1299 [0] proxy.cc:1500 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
     {WARN: dict(line=1500)}),
    ("≤2.21 IB async event",
     "node7:1234:1300 [0] NCCL INFO NET/IB : mlx5_1:1 Got async event : port error",
     {"nccl.ib_async_event": dict(hca="mlx5_1:1", event="port error")}),
    ("no socket interface (bootstrap)",
     "node1:1234:1300 [0] bootstrap.cc:80 NCCL WARN Bootstrap : no socket interface found",
     {"nccl.no_socket_interface": {}}),
    ("no socket interface (NET/Socket), quoted in a JAX error",
     "invalid usage ... Last NCCL warning(error): 'NET/Socket : no socket interface found'",
     {"nccl.no_socket_interface": {}}),
    ("older WARN wording from net_ib.cc:93, no HCA named",
     "node48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
     {"nccl.ib_async_event": dict(hca=None, event="port error")}),
    ("2.30 IB non-fatal async event",
     "node7:1234:1300 [0] NCCL INFO NET/IB : mlx5_1:1 Got non-fatal async event: GID table change(18)",
     {"nccl.ib_async_event": dict(hca="mlx5_1:1", event="GID table change(18)")}),
]

CONTEXT = [
    ("2.27+ comm init",
     "node1:2345:2400 [3] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 61000 commId 0x8c3f2a1b - Init COMPLETE",
     {"nccl.comm_init": dict(comm_rank=3, nranks=16, cuda_dev=3)}),
    ("≤2.18 comm init",
     "node1:2345:2400 [3] NCCL INFO comm 0x55d0c8a0 rank 3 nranks 16 cudaDev 3 busId 61000 commId 0x8c3f2a1b - Init COMPLETE",
     {"nccl.comm_init": dict(comm_rank=3, nranks=16, cuda_dev=3)}),
    ("2.30 Init START with [Rank r]",
     "node1:2345:2400 [3] NCCL INFO [Rank 3] ncclCommInitRank comm 0x55d0c8a0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 61000 commId 0x8c3f2a1b - Init START",
     {"nccl.comm_init": dict(comm_rank=3, nranks=16)}),
    ("version banner, INFO", "node1:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", {"nccl.version": dict(nccl_version="2.21.5")}),
    ("version banner, bare (NCCL_DEBUG=VERSION/WARN)", "NCCL version 2.21.5+cuda12.4", {"nccl.version": dict(nccl_version="2.21.5")}),
]

INCIDENTS = [
    ("acs-enabled-breaks-gpudirect-rdma/node_H100-1.log",
     "H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)",
     {IB: dict(peer="fe80::966d:ae03:8b:df50%ib0<44413>", status=4, vendor_err=81)}),
    ("acs: H100-1 cascade", "H100-1:9821:9920 [1] NCCL INFO transport/net.cc:1008 -> 6", {RET: dict(rc=6)}),
    ("acs: H100-1 cascade", "H100-1:9821:9920 [1] NCCL INFO proxy.cc:679 -> 6", {RET: dict(where="proxy.cc:679", rc=6)}),
    ("acs: H100-1 cascade", "H100-1:9821:9920 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]", {RET: dict(where="proxy.cc:858", rc=6)}),
    ("acs-enabled-breaks-gpudirect-rdma/node_H100-2.log",
     "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
     {IB: dict(peer="fe80::966d:ae03:8b:df78%ib0<53249>", status=4, vendor_err=81)}),
    ("acs: H100-2 cascade", "H100-2:19989:20082 [1] NCCL INFO transport/net.cc:1008 -> 6", {RET: dict(rc=6)}),
    ("acs: H100-2 cascade", "H100-2:19989:20082 [1] NCCL INFO proxy.cc:679 -> 6", {RET: dict(rc=6)}),
    ("acs: H100-2 cascade", "H100-2:19989:20082 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]", {RET: dict(rc=6)}),
    ("acs-enabled-breaks-gpudirect-rdma/node_H100-5.log",
     "H100-5:68738:69060 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:9c:f5f8%ib0<39391> with error 4, opcode 32639, len 32639, vendor err 81 (Send)",
     {IB: dict(peer="fe80::966d:ae03:9c:f5f8%ib0<39391>", status=4, vendor_err=81)}),
    ("acs: H100-5 cascade", "H100-5:68738:69060 [3] NCCL INFO transport/net.cc:1008 -> 6", {RET: dict(rc=6)}),
    ("docker-default-shm-64mb-nccl27/combined.log",
     "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device",
     {"nccl.shm_no_space": {}, "io.no_space": {}}),
    ("docker-default-shm-64mb-nccl27/combined.log",
     "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)",
     {"nccl.shm_no_space": dict(segment="nccl-shm-recv-250a7cc850ba9298-0-1-3", size=9637888)}),
    ("nvls-alloc-fail-fabricmanager-restart/combined.log",
     "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
     {"nccl.cuda_failure": dict(file="transport/nvls.cc", line=244, code=1, error="invalid argument")}),
    ("nvls cascade", "node23:12098:12141 [2] NCCL INFO transport/nvls.cc:394 -> 1", {RET: dict(where="transport/nvls.cc:394", rc=1)}),
    ("nvls cascade", "node23:12098:12141 [2] NCCL INFO init.cc:1196 -> 1", {RET: dict(rc=1)}),
    ("nvls cascade", "node23:12098:12141 [2] NCCL INFO init.cc:1462 -> 1", {RET: dict(rc=1)}),
    ("nvls cascade", "node23:12098:12141 [2] NCCL INFO group.cc:75 -> 1 [Async thread]", {RET: dict(where="group.cc:75", rc=1)}),
    ("nccl-socket-ifname-docker-bridges/node_dgxa100.log",
     "dgxa100:1050:1316 [0] NCCL INFO include/net.h:25 -> 2", {RET: dict(where="include/net.h:25", rc=2)}),
    ("nccl-socket-ifname-docker-bridges/node_dgxa100.log",
     "dgxa100:1050:1316 [0] NCCL INFO transport/net.cc:515 -> 2", {RET: dict(where="transport/net.cc:515", rc=2)}),
]

NEAR_MISSES = [
    # nccl-socket-ifname-docker-bridges: channel set-up lines have ' -> ' but are not error returns
    ("channel 03", "dgxa100:1050:1315 [0] NCCL INFO Channel 03/0 : 0[90000] -> 1[1000] [send] via NET/Socket/3", {}),
    ("channel 08", "dgxa100:1050:1315 [0] NCCL INFO Channel 08/0 : 0[90000] -> 1[1000] [send] via NET/Socket/0", {}),
    ("channel 15", "dgxa100:1050:1315 [0] NCCL INFO Channel 15/0 : 0[90000] -> 1[1000] [send] via NET/Socket/7", {}),
    ("rc 0 is success", "node23:12098:12141 [2] NCCL INFO init.cc:1462 -> 0", {}),
    ("IB device list", "node2:1234:1299 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.2<0>", {}),
    # the interface NCCL chose is context for the env checks (tools/sources/env.py), not an NCCL event
    ("bootstrap interface", "node2:1234:1299 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
     {"env.nccl_iface_using": dict(iface="eth0")}),
    ("env echo", "node2:1234:1299 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
     {"env.nccl_set_by_env": dict(name="NCCL_SOCKET_IFNAME", value="eth0")}),
    ("topology summary: nRanks, not nranks", "node2:1234:1299 [0] NCCL INFO comm 0x5 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0", {}),
    ("2.30 GID table changed is not an error event", "node7:1234:1300 [0] NCCL INFO NET/IB : mlx5_1:1 GID table changed", {}),
    # the error_return trigger is `file:line -> rc` (issue 16); verify requires `NCCL INFO` in front
    ("a Python frame arrow, not NCCL", "  model/train.py:1008 -> 6 frames skipped", {}),
    ("NCCL TRACE with a return arrow", "node1:1:1 [0] NCCL TRACE transport/net.cc:1008 -> 6", {}),
]


@pytest.mark.parametrize("line, expected", params(IB_COMPLETION))
def test_ib_completion_error_every_version(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(ERROR_RETURN))
def test_error_return(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(WARNINGS))
def test_warnings(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(CONTEXT))
def test_context_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(INCIDENTS))
def test_incident_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


# ------------------------------------------------------ communicator ranks → hosts, world size (nccl/nodes.py)

def _init(host: str, r: int, n: int) -> str:
    return (f"{host}:2345:2400 [{r % 8}] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank {r} nranks {n} cudaDev "
            f"{r % 8} nvmlDev {r % 8} busId 61000 commId 0x8c3f2a1b - Init COMPLETE")


def test_world_sized_communicators_place_their_ranks(tmp_path):
    """The scan step nccl declares (SCAN_STEPS nodes): in a communicator of the whole world, NCCL's rank is the
    global rank; a tensor-parallel group of 2 numbers its ranks 0-1 and places nothing. With no line that states
    the world size, the largest communicator sizes the job (WORLD_SIZE, trust 1)."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle

    for node, ranks in (("node1", range(0, 4)), ("node2", range(4, 8))):
        (tmp_path / f"{node}.log").write_text("\n".join([_init(node, r, 8) for r in ranks]
                                                        + [_init(node, r % 2, 2) for r in ranks]) + "\n")
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=1)
    assert res.coverage.expected_ranks == 8 and res.coverage.expected_from == "NCCL nranks (largest communicator)"
    assert {r: ev.node for r, ev in res.rank_nodes.items()} == {r: "node1" if r < 4 else "node2" for r in range(8)}
    assert all(f"rank {r} nranks 8" in ev.text for r, ev in res.rank_nodes.items())


def test_a_stated_world_size_outranks_the_communicators(tmp_path):
    """`WORLD_SIZE=16` (job.world_size, trust 0) sizes the job even where the largest communicator has 8 ranks;
    the communicators of 8 are then not the world and place no rank."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle
    from trainlog_debugger.tools.sources.nccl.nodes import comm_rank_nodes

    (tmp_path / "node1.log").write_text("WORLD_SIZE=16\n" + "\n".join(_init("node1", r, 8) for r in range(8)) + "\n")
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=1)
    assert res.coverage.expected_ranks == 16 and res.coverage.expected_from == "world size in the logs"
    assert res.rank_nodes == {} and comm_rank_nodes(res.files, 16) == []
    assert [r for r, _ev in comm_rank_nodes(res.files, 8)] == list(range(8))
