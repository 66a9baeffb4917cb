"""tools/sources/pytorch/format.py: ProcessGroupNCCL (c10d) lines, every version form FORMATS.md §1 lists, plus the real incidents.

Each row: a line exactly as emitted (FORMATS.md *(real)* lines and incident lines verbatim; the others built from
the FORMATS.md template for that torch version), the pattern ids the scanner records for it after the fallback
rule, and for each id the fields it must extract (a subset; None = the field is absent).
"""

from __future__ import annotations

import pytest
from matching import check, params

WD = "pytorch.watchdog_timeout"
ST = "pytorch.watchdog_pg_status"
TE = "pytorch.watchdog_thread_exception"
DOWN = "pytorch.process_down"
OPS = "pytorch.nccl_ops_failed"
FIRST = "pytorch.dump_first_signal"
OBS = "pytorch.dump_observed"
RECV = "pytorch.dump_signal_received"
HB = "pytorch.heartbeat_stuck"
ERR = "pytorch.nccl_error"
KIND = "pytorch.nccl_error_kind"

WATCHDOG = [
    ("2.0 TensorShape, ≤2.1 header (no rank, no time)",
     "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, TensorShape=[1024, 4096], Timeout(ms)=1800000) ran for 1800851 milliseconds before timing out.",
     {WD: dict(pg_rank=0, seq=5, op="BROADCAST", numel_in=None, numel_out=None, timeout_ms=1800000, elapsed_ms=1800851)}),
    ("2.2 header [rankR]:[E File:line]",
     "[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800439 milliseconds before timing out.",
     {WD: dict(pg_rank=1, seq=1, op="ALLREDUCE", numel_in=1, numel_out=1, timeout_ms=1800000, elapsed_ms=1800439)}),
    ("2.5 real",
     "[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
     {WD: dict(pg_rank=3, seq=31, op="ALLREDUCE", numel_in=117440512, numel_out=117440512, timeout_ms=600000, elapsed_ms=600031)}),
    ("OpType with a leading underscore",
     "[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=_REDUCE_SCATTER_BASE, NumelIn=8388608, NumelOut=1048576, Timeout(ms)=600000) ran for 600093 milliseconds before timing out.",
     {WD: dict(seq=12, op="_REDUCE_SCATTER_BASE", numel_in=8388608, numel_out=1048576)}),
    ("tqdm bar glued in front (FORMATS §0, real prefix)",
     "Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46][rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
     {WD: dict(pg_rank=0, seq=2, timeout_ms=600000, elapsed_ms=600005)}),
    ("torchrun --tee prefix stacked on the c10 header",
     "[default3]:[rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLGATHER, NumelIn=4, NumelOut=32, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
     {WD: dict(pg_rank=3, seq=31, op="ALLGATHER", numel_in=4, numel_out=32)}),
    ("2.15 experimental nccl2 backend: no WorkNCCL(...) to parse ('timed out' is io.timed_out, a fallback)",
     "[rank0]:[E1105 12:00:00.000000000 WorkNCCL.cpp:100] [PG GUID 0 Rank 0] Watchdog caught collective operation timeout: NCCL operation timed out",
     {WD: dict(seq=None)}),
]

PG_STATUS = [
    ("2.4 real",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.",
     {ST: dict(pg_uid="0", pg_desc="default_pg", pg_rank=1, seq=6463, enqueued=6463, completed=6462)}),
    ("2.4-2.5 timeout-only form",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.",
     {ST: dict(pg_rank=1, seq=6463, enqueued=6463, completed=6462)}),
    ("2.4 with a hashed group name and user desc",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 7f3a9c0e (mesh_dp) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
     {ST: dict(pg_uid="7f3a9c0e", pg_desc="mesh_dp", pg_rank=1, seq=12, enqueued=12, completed=11)}),
    ("≥2.6 real: two spaces, no period, completed -1",
     "[rank0]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 0]  failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 547, last completed work: -1",
     {ST: dict(pg_id=1, pg_guid="1", pg_desc=None, pg_rank=0, seq=1, enqueued=547, completed=-1)}),
    ("≥2.6 with the ≥2.5 desc prefix",
     "[rank3]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence id: 67 PG status: last enqueued work: 67, last completed work: 66",
     {ST: dict(pg_id=0, pg_guid="0", pg_desc="default_pg", pg_rank=3, seq=67, enqueued=67, completed=66)}),
    ("newer trunk split wording (tail assumed as in 2.4)",
     "[rank3]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 2 PG GUID 3 Rank 3] Work timeout is detected by watchdog at work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
     {ST: dict(pg_id=2, pg_guid="3", pg_rank=3, seq=12, enqueued=12, completed=11)}),
    ("newer trunk split wording, error variant",
     "[rank3]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 2 PG GUID 3 Rank 3] NCCL error is detected by watchdog at work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
     {ST: dict(seq=12, enqueued=12, completed=11)}),
]

TEARDOWN = [
    ("≤2.2 real: no [Rank r] prefix ('timed out' is io.timed_out, a fallback, dropped)",
     "[rank0]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     {OPS: {}}),
    ("≥2.3: [Rank r] prefix",
     "[rank0]:[E1105 12:00:00.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 0] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     {OPS: {}}),
    ("≥2.3 take-down",
     "[rank0]:[E1105 12:00:00.000000000 ProcessGroupNCCL.cpp:1601] [PG ID 0 PG GUID 0(default_pg) Rank 0] [Rank 0] To avoid data inconsistency, we are taking the entire process down.",
     {DOWN: {}}),
    ("≤2.2 watchdog thread exit carries the timeout text too",
     "[rank0]:[E ProcessGroupNCCL.cpp:1182] [Rank 0] NCCL watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800316 milliseconds before timing out.",
     {TE: dict(pg_rank=None, what="[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800316 milliseconds before timing out."),
      WD: dict(pg_rank=0, seq=5, timeout_ms=1800000)}),
    ("fatal what(): line, ≥2.5 PG prefix",
     "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLGATHER, NumelIn=4, NumelOut=32, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.",
     {TE: dict(pg_id=0, pg_guid="0", pg_desc="default_pg", pg_rank=1),
      WD: dict(pg_rank=1, seq=9, op="ALLGATHER", timeout_ms=600000, elapsed_ms=600083)}),
    ("comm aborted with the original reason",
     "[rank2]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:1897] [PG ID 0 PG GUID 0(default_pg) Rank 2] NCCL communicator was aborted on rank 2. Original reason for failure was: NCCL error: remote process exited or there was a network error",
     {"pytorch.comm_aborted": dict(aborted_rank=2, reason="NCCL error: remote process exited or there was a network error")}),
]

NCCL_ERRORS = [
    ("DistBackendError with location and NCCL version (also the version fact)",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5",
     {ERR: dict(where="../torch/csrc/distributed/c10d/NCCLUtils.hpp:275", nccl_error="remote process exited or there was a network error", nccl_version="2.21.5"),
      "nccl.version": dict(nccl_version="2.21.5")}),
    ("DistBackendError, system error text",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
     {ERR: dict(nccl_error="unhandled system error (run with NCCL_DEBUG=INFO for details)", nccl_version="2.19.3"),
      "nccl.version": dict(nccl_version="2.19.3")}),
    ("≤2.4 async exception",
     "[rank2]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:1897] [Rank 2] found async exception when checking for NCCL errors: NCCL error: remote process exited or there was a network error",
     {ERR: dict(where=None, nccl_error="remote process exited or there was a network error")}),
    ("≥2.5 async exception",
     "[rank2]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:1897] [PG ID 0 PG GUID 0(default_pg) Rank 2] [Rank 2] Collective WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) raised the following async exception: NCCL error: remote process exited or there was a network error",
     {ERR: dict(nccl_error="remote process exited or there was a network error")}),
    ("ncclRemoteError detail",
     "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     {KIND: dict(nccl_error="ncclRemoteError", detail="A call failed possibly due to a network error or a remote process exiting prematurely.")}),
    ("ncclSystemError detail (trailing space)",
     "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
     {KIND: dict(nccl_error="ncclSystemError", detail="System call (e.g. socket, malloc) or external library call failed or device error.")}),
    ("ncclUnhandledCudaError detail",
     "ncclUnhandledCudaError: Call to CUDA function failed.",
     {KIND: dict(nccl_error="ncclUnhandledCudaError", detail="Call to CUDA function failed.")}),
    ("ncclInternalError detail",
     "ncclInternalError: Internal check failed.",
     {KIND: dict(nccl_error="ncclInternalError")}),
]

DUMP = [
    ("2.4 first watchdog (self)",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] First watchdog to set the dump signal.",
     {FIRST: dict(pg_uid="0", pg_rank=1)}),
    ("2.4 first PG detecting through tcpstore (observed)",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] First PG on this rank detecting the dump signal through tcpstore.",
     {OBS: dict(pg_uid="0", pg_rank=1)}),
    ("2.4 global dump signal from another rank (observed)",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Received a global dump signal from rank 3, and will start to dump the debug info. ",
     {OBS: dict(pg_rank=1)}),
    ("2.4 watchdog notified (observed)",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] ProcessGroupNCCL's watchdog detected a dump signal from rank 3 and notified the current rank. ",
     {OBS: dict(pg_rank=1)}),
    ("2.4 dump signal from this local rank: the 2.4 wording of the ≥2.5 'collective timeout from this local rank'",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Received a dump signal from this local rank and will start to dump the debug info. ",
     {RECV: dict(pg_rank=1, from_rank=None, enqueued=None)}),
    ("2.5 broadcasting, hyphenated",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 1] Broadcasting flight-recorder dump signal to other processes via TCPStore.",
     {FIRST: dict(pg_id=0, pg_rank=1)}),
    ("2.6 broadcasting, no hyphen",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 1] Broadcasting flight recorder dump signal to other processes via TCPStore.",
     {FIRST: dict(pg_id=0, pg_rank=1)}),
    ("≥2.7 real: first PG to signal dumping",
     "[rank368]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) Rank 368] First PG on this rank to signal dumping.",
     {FIRST: dict(pg_id=0, pg_guid="0", pg_desc="default_pg", pg_rank=368)}),
    ("≥2.5 observed from another rank",
     "[rank7]:[E808 04:21:42.000000000 ProcessGroupNCCL.cpp:1710] [PG ID 0 PG GUID 0(default_pg) Rank 7] Observed flight recorder dump signal from another rank via TCPStore.",
     {OBS: dict(pg_id=0, pg_rank=7)}),
    ("≥2.5 received from  rank N (double space), '.This' glued",
     "[rank7]:[E808 04:21:42.000000000 ProcessGroupNCCL.cpp:1742] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received a dump signal due to a collective timeout from  rank 3 and we will try our best to dump the debug info. Last enqueued NCCL work: 30, last completed NCCL work: 30.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
     {RECV: dict(pg_id=0, pg_rank=7, from_rank=3, enqueued=30, completed=30)}),
    ("≥2.5 received from this local rank",
     "[rank3]:[E808 04:21:41.000000000 ProcessGroupNCCL.cpp:1742] [PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 31, last completed NCCL work: 30.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
     {RECV: dict(pg_rank=3, from_rank=None, enqueued=31, completed=30)}),
]

HEARTBEAT = [
    ("2.3 real F line, doubled PG prefix",
     "[rank25]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] [PG 0 Rank 25] ProcessGroupNCCL's watchdog got stuck for 600 seconds ...",
     {HB: dict(stuck_s=600)}),
    ("2.3-2.4 heartbeat monitor timed out ('timed out' fallback dropped)",
     "[rank25]:[E ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
     {HB: dict(stuck_s=None)}),
    ("≥2.5 watchdog stuck, 480 s",
     "[rank25]:[F1105 12:00:00.000000000 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID 0(default_pg) Rank 25] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect ...",
     {HB: dict(stuck_s=480)}),
]

MISC = [
    ("desync report names the lagging ranks",
     "\t - To our best knowledge, ranks [5, 6] are the lagging ranks that caused this timeout. They never joined any collectives",
     {"pytorch.desync_lagging": dict(lagging="5, 6")}),
]

INCIDENTS = [
    ("megatron-ckpt-save-slow-io-timeout/rank5.log",
     "[rank5]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=67, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
     {TE: dict(pg_uid="0", pg_desc="default_pg", pg_rank=5),
      WD: dict(pg_rank=5, seq=67, op="ALLREDUCE", numel_in=1, numel_out=1, timeout_ms=600000, elapsed_ms=600042)}),
    ("multinode-no-ib-nccl-ib-disable/combined.log: ≤2.1 header, line cut mid-word",
     "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU opera",
     {OPS: {}}),
    ("multinode-no-ib-nccl-ib-disable/combined.log: the cut line's tail",
     "tions might run on corrupted/incomplete data.",
     {}),
    ("multinode-no-ib-nccl-ib-disable/combined.log: take-down",
     "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.",
     {DOWN: {}}),
    ("speechbrain-timed-ckpt-collective-mismatch/combined.log: frame line",
     "      dist._broadcast_coalesced(",
     {}),
    ("speechbrain-timed-ckpt-collective-mismatch/combined.log",
     "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))",
     {"pytorch.collective_mismatch": dict(mismatch_rank=0, op="BROADCAST")}),
]

# Lines from the same logs that must NOT produce a finding (or only the one named).
NEAR_MISSES = [
    ("normal watchdog exit",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Process group watchdog thread terminated normally",
     {}),
    ("dump preparation is not a failure",
     "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
     {}),
    ("desync timeout summary line carries no lagging ranks",
     "\t - [0] Timeout at collective: ALLREDUCE, #67",
     {}),
    ("≥2.6 FR stack header",
     "Stack trace of the failed collective: ",
     {}),
    ("≥2.6 FR frame line",
     "#0 all_reduce from /usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py:3174",
     {}),
    ("barrier device warning at start-up",
     "[rank0]:[W1105 12:00:00.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.",
     {}),
    ("C++ exception location line",
     "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 (most recent call first):",
     {}),
]


@pytest.mark.parametrize("line, expected", params(WATCHDOG))
def test_watchdog_timeout(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(PG_STATUS))
def test_pg_status(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(TEARDOWN))
def test_teardown(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NCCL_ERRORS))
def test_nccl_errors(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(DUMP))
def test_dump_coordination(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(HEARTBEAT + MISC))
def test_heartbeat_and_desync(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(INCIDENTS))
def test_incident_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
