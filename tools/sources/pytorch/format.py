"""PyTorch ProcessGroupNCCL (c10d) watchdog, teardown and dump-coordination lines (FORMATS.md §1).

Real line (torch 2.5):
    [rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation
    timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000)
    ran for 600031 milliseconds before timing out.
Versions: 2.0 prints `TensorShape=[...]` instead of NumelIn/NumelOut; the PG status line changed wording in 2.6
(`failure detected by watchdog at work sequence id: ... PG status: last enqueued work: E, last completed work: C`,
C may be -1). Almost everything here is cascade: every rank prints it once one rank stops participating.
"""

from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.sources.pattern import HitContext, Hook, P

# The PG log prefix (2.3: `[PG 0 Rank 25]`, 2.4: `[PG 0 (default_pg) Rank 1]`, ≥2.5: `[PG ID 0 PG GUID 0(default_pg) Rank 3]`).
_PG_REQ = r"\[PG (?:ID (?P<pg_id>\d+) PG GUID (?P<pg_guid>[^ (\]]+)|(?P<pg_uid>[^ (\]]+))(?: ?\((?P<pg_desc>[^)]*)\))? Rank (?P<pg_rank>\d+)\]"
# Optional form for `fields` regexes: lazily look for the prefix first, so that it is captured when present.
_PG = r"^(?:.*?" + _PG_REQ + r")?"

PATTERNS = [
    P("pytorch.watchdog_timeout", 1, "network", "cascade",
      r"Watchdog caught collective operation timeout", "Watchdog caught collective",
      "[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
      "NCCL watchdog timeout on a collective",
      fields=r"(?:\[Rank (?P<pg_rank>\d+)\] )?Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>[A-Z_]+)(?:, NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+))?(?:, TensorShape=\[[^\]]*\])?, Timeout\(ms\)=(?P<timeout_ms>\d+)\) ran for (?P<elapsed_ms>\d+) milliseconds",
      ints=("pg_rank", "seq", "numel_in", "numel_out", "timeout_ms", "elapsed_ms")),
    # the same wait under TORCH_NCCL_BLOCKING_WAIT=1 (ProcessGroupNCCL.cpp WorkNCCL::synchronize): the caller's own
    # wait times out instead of the watchdog's, and says which collective
    P("pytorch.blocking_wait_timeout", 1, "network", "cascade",
      r"Work WorkNCCL\(SeqNum=\d+, OpType=[A-Z_]+[^\n]{0,200}?\) timed out in blocking wait",
      "timed out in blocking wait",
      "[rank0]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:751] [Rank 0] Work WorkNCCL(SeqNum=12, OpType=BARRIER, "
      "NumelIn=1, NumelOut=1, Timeout(ms)=1800000) timed out in blocking wait.",
      "a collective timed out in the caller's blocking wait (TORCH_NCCL_BLOCKING_WAIT)",
      fields=r"(?:\[Rank (?P<pg_rank>\d+)\] )?Work WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>[A-Z_]+)(?:, NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+))?(?:, TensorShape=\[[^\]]*\])?, Timeout\(ms\)=(?P<timeout_ms>\d+)\)",
      ints=("pg_rank", "seq", "numel_in", "numel_out", "timeout_ms")),
    P("pytorch.watchdog_pg_status", 1, "network", "cascade",
      r"(?:detected by watchdog at work|Timeout at NCCL work: |timeout is detected by watchdog at work|error is detected by watchdog at work)",
      ("detected by watchdog at work", "Timeout at NCCL work"),
      "[rank0]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 0]  failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 547, last completed work: -1",
      "watchdog PG status: last enqueued vs last completed work",
      fields=_PG + r".*?(?:work sequence id|at work|NCCL work): (?P<seq>-?\d+).*?last enqueued (?:NCCL )?work: (?P<enqueued>-?\d+), last completed (?:NCCL )?work: (?P<completed>-?\d+)",
      ints=("pg_id", "pg_rank", "seq", "enqueued", "completed")),
    P("pytorch.watchdog_thread_exception", 1, "network", "cascade",
      r"[Ww]atchdog thread terminated with exception", "atchdog thread terminated with exception",
      "[rank5]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=67, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
      "watchdog thread terminated with an exception",
      fields=_PG + r".*?terminated with exception: (?P<what>.*)", ints=("pg_id", "pg_rank")),
    # torch.multiprocessing.spawn (ProcessContext.join, spawn.py): the parent's ProcessRaisedException names the index
    # of the child whose traceback follows (`fn(i, *args)`: the index spawn passed as the child's rank). A job fact: it
    # says whose the traceback under it is (tools/rules/base.RuleInputs.spawned_index)
    P("pytorch.spawn_raised", 0, None, "context",
      r"-- Process \d+ terminated with the following error", "terminated with the following error",
      "-- Process 3 terminated with the following error:",
      "mp.spawn's parent: the traceback that follows is this process index's",
      fields=r"-- Process (?P<process>\d{1,7}) terminated", ints=("process",)),
    P("pytorch.process_down", 1, None, "cascade",
      r"we are taking the entire process down", "taking the entire process down",
      "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.",
      "watchdog takes the process down"),
    P("pytorch.nccl_ops_failed", 1, None, "cascade",
      r"Some NCCL operations have failed or timed out", "Some NCCL operations have failed",
      "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU opera",
      "NCCL operations failed or timed out"),
    P("pytorch.terminate_backend_error", 1, None, "cascade",
      r"terminate called after throwing an instance of '(?:c10::DistBackendError|std::runtime_error)'",
      "terminate called after throwing an instance of",
      "terminate called after throwing an instance of 'c10::DistBackendError'",
      "process aborted on the watchdog's exception (SIGABRT follows)"),
    P("pytorch.dump_first_signal", 1, None, "context",
      r"(?:First PG on this rank to signal dumping|First watchdog to set the dump signal|Broadcasting flight.recorder dump signal)",
      ("First PG on this rank to signal dumping", "First watchdog to set the dump signal", "dump signal to other processes"),
      "[rank368]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) Rank 368] First PG on this rank to signal dumping.",
      "this rank's own watchdog fired (dump initiator)", fields=_PG_REQ, ints=("pg_id", "pg_rank")),
    P("pytorch.dump_observed", 1, None, "context",
      r"(?:Observed flight recorder dump signal from another rank|watchdog detected a dump signal from rank|Received a global dump signal from rank|First PG on this rank detecting the dump signal through tcpstore)",
      ("Observed flight recorder dump signal", "detected a dump signal from rank", "Received a global dump signal",
       "detecting the dump signal through tcpstore"),
      "[rank7]:[E808 04:21:42.000000000 ProcessGroupNCCL.cpp:1710] [PG ID 0 PG GUID 0(default_pg) Rank 7] Observed flight recorder dump signal from another rank via TCPStore.",
      "notified of another rank's watchdog dump (not self-detected)", fields=_PG_REQ, ints=("pg_id", "pg_rank")),
    P("pytorch.dump_signal_received", 1, None, "context",
      r"Received a dump signal (?:due to a collective timeout from|from this local rank)",
      ("Received a dump signal due to a collective timeout", "Received a dump signal from this local rank"),
      "[rank7]:[E808 04:21:42.000000000 ProcessGroupNCCL.cpp:1742] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received a dump signal due to a collective timeout from  rank 3 and we will try our best to dump the debug info. Last enqueued NCCL work: 30, last completed NCCL work: 30.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
      "dump signal with this rank's last enqueued/completed work",
      fields=_PG + r".*?Received a dump signal (?:due to a collective timeout )?from +(?:this local rank|rank (?P<from_rank>\d+))"
                   r"(?:.*?Last enqueued NCCL work: (?P<enqueued>-?\d+), last completed NCCL work: (?P<completed>-?\d+))?",
      ints=("pg_id", "pg_rank", "from_rank", "enqueued", "completed")),
    P("pytorch.heartbeat_stuck", 1, "software", "cascade",
      r"(?:watchdog got stuck for \d+ seconds|Heartbeat monitor timed out)", ("watchdog got stuck for", "Heartbeat monitor timed out"),
      "[rank25]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] [PG 0 Rank 25] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives.",
      "heartbeat monitor: the watchdog itself was stuck (NCCL/CUDA API hang)",
      fields=r"got stuck for (?P<stuck_s>\d+) seconds", ints=("stuck_s",)),
    P("pytorch.comm_aborted", 1, None, "cascade",
      r"NCCL communicator was aborted on rank \d", "NCCL communicator was aborted",
      "[rank2]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:1897] [PG ID 0 PG GUID 0(default_pg) Rank 2] NCCL communicator was aborted on rank 2. Original reason for failure was: NCCL error: remote process exited or there was a network error",
      "NCCL communicator aborted",
      fields=r"aborted on rank (?P<aborted_rank>\d+)\.(?: +Original reason for failure was: (?P<reason>.*))?", ints=("aborted_rank",)),
    P("pytorch.nccl_error", 1, "network", "root_candidate",
      # the watchdog's own line when the NCCL error (not a timeout) ended it: `watchdog thread terminated with
      # exception: NCCL error: remote process exited or there was a network error, NCCL version 2.19.3`
      r"(?:NCCL error in: |DistBackendError: NCCL error|raised the following async exception: NCCL error|found async exception when checking for NCCL errors"
      r"|terminated with exception: NCCL error: )",
      ("NCCL error in: ", "DistBackendError: NCCL error", "async exception", "terminated with exception: NCCL error: "),
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5",
      "NCCL call returned an error",
      fields=r"NCCL error(?: in: (?P<where>[^,]+),|:) (?P<nccl_error>[^,]+)(?:, NCCL version (?P<nccl_version>\d+\.\d+\.\d+))?"),
    P("pytorch.nccl_error_kind", 1, "network", "root_candidate",
      r"nccl(?:RemoteError|SystemError|UnhandledCudaError|InternalError|InvalidUsage|InvalidArgument): ",
      ("ncclRemoteError: ", "ncclSystemError: ", "ncclUnhandledCudaError: ", "ncclInternalError: ", "ncclInvalidUsage: ", "ncclInvalidArgument: "),
      "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
      "NCCL error class", fields=r"(?P<nccl_error>nccl[A-Za-z]+): (?P<detail>.*)"),
    # c10d's getNcclErrorDetailStr (torch/csrc/distributed/c10d/NCCLUtils.cpp) appends `\nLast error:\n` and
    # ncclGetLastError(): NCCL's own WARN text, without NCCL's prefix, on the line after (read by the hook below)
    P("pytorch.nccl_last_error", 3, None, "context",
      r"\bLast error:", "Last error:",
      "Last error:",
      "NCCL's last error follows (its own WARN text)"),
    P("pytorch.collective_mismatch", 2, "software", "root_candidate",
      r"Detected mismatch between collectives on ranks", "Detected mismatch between collectives",
      "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[4], TensorDtypes=Float",
      "ranks issued different collectives",
      fields=r"Rank (?P<mismatch_rank>\d+) is running (?:inconsistent )?collective: CollectiveFingerPrint\((?:SequenceNumber=\d+, ?)?OpType=(?P<op>[A-Z_]+)(?:.*?, but Rank (?P<other_rank>\d+) is running collective)?",
      ints=("mismatch_rank", "other_rank")),
    # ProcessGroupNCCL::broadcastUniqueNCCLID (ProcessGroupNCCL.cpp:2411, torch 2.6): a rank waits in the store for the
    # NCCL unique id that the root (rank 0 of the group) publishes when it reaches its first collective. A job fact
    # (tier 0: who waited for whom), not a failure of its own: the line's exception is still read by the exception
    # patterns, as before (tools.scan.filepass: a fact does not hide the fallbacks of its line)
    P("pytorch.unique_id_wait", 0, None, "context",
      r"is setting up NCCL communicator and retrieving ncclUniqueId from \[\d+\]",
      "retrieving ncclUniqueId from [",
      "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
      "from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 1800000ms",
      "a rank waited in the store for the NCCL unique id of the group's root",
      fields=r"\[(?P<waiting>\d+)\] is setting up NCCL communicator and retrieving ncclUniqueId from \[(?P<root>\d+)\]"
             r"(?:.*?got error: (?P<error>.*))?",
      ints=("waiting", "root")),
    P("pytorch.desync_lagging", 1, None, "context",
      r"are the lagging ranks that caused this timeout", "lagging ranks that caused this timeout",
      "\t - To our best knowledge, ranks [5, 6] are the lagging ranks that caused this timeout. They never joined any collectives",
      "desync debug names the lagging ranks", fields=r"ranks \[(?P<lagging>[\d, ]+)\] are the lagging"),
]
# collective-state lines come once per process group per rank, and a rank may be in many groups: the first 64 of
# each (pattern, rank) are kept in full, not 5 (tools.scan.keeper)
KEEP_FIRST = {"pytorch.": 64}


LAST_ERROR_LOOKAHEAD = 3  # lines after `Last error:` that may hold it (a blank line, another rank's line between)
LINE_HEAD = 4096


def nccl_last_error(ctx: HitContext) -> None:
    """The NCCL WARN text c10d printed after `Last error:` (`Duplicate GPU detected : rank 1 and rank 0 both on CUDA
    device 1a000`), as facts `detail`, `detail_line`, `detail_text`: the specific reason behind a generic
    `ncclInvalidUsage` / `ncclSystemError`, which the message tables read (tools/rules/meaning.py). On the same line
    when a paste joined them (`Last error: Duplicate GPU ...`); else the next line of the same rank."""
    body = strip_prefixes(ctx.text).strip()
    same = body.split("Last error:", 1)[1].strip() if "Last error:" in body else ""
    if same:
        if same != "Unknown NCCL Error":
            ctx.fields.update({"detail": same[:500], "detail_line": ctx.line, "detail_text": ctx.text})
        return
    buf, pos = ctx.buf, ctx.end + 1
    for k in range(1, LAST_ERROR_LOOKAHEAD + 1):
        if pos >= len(buf):
            return
        nxt = buf.find(b"\n", pos)
        nxt = len(buf) if nxt == -1 else nxt
        text = buf[pos:min(nxt, pos + LINE_HEAD)].decode("utf-8", "replace").rstrip("\r")
        pos = nxt + 1
        if ctx.line_rank is not None:
            r = ctx.rank_of(text)
            if r is not None and r != ctx.line_rank:
                continue
        detail = strip_prefixes(text).strip()
        if detail:
            ctx.fields.update({"detail": detail[:500], "detail_line": ctx.line + k, "detail_text": text})
            return


HOOKS = {"pytorch.nccl_last_error": Hook(nccl_last_error)}
