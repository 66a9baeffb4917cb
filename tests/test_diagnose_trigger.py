"""The trigger is the first fault near the failure's onset, not the earliest scary line (issue 10, mechanism 3):
handled warnings never trigger however early, and a line without a time does not borrow one from long before."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate

OOM = ["[rank2]: Traceback (most recent call last):",
       '[rank2]:   File "/workspace/train.py", line 301, in <module>',
       "[rank2]:     loss.backward()",
       "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 2 has a total capacity "
       "of 79.15 GiB of which 1.02 GiB is free."]


LOADER = ["[rank2]: Traceback (most recent call last):",
          '[rank2]:   File "/workspace/train.py", line 301, in <module>',
          "[rank2]:     batch = next(it)",
          "[rank2]: ValueError: Caught ValueError in DataLoader worker process 1."]


def _investigate(tmp_path, files: dict[str, list[str]]):
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


def test_a_handled_errno_warning_hours_earlier_is_not_the_trigger(tmp_path):
    d = _investigate(tmp_path, {"rank_2.log": [
        "[rank2]: 2025-03-02 01:12:09,114 WARNING dataset: OSError: [Errno 5] Input/output error reading "
        "shard-00417.tar (will retry)",
        "[rank2]: 2025-03-02 01:12:11,002 INFO train: step 120 loss 2.41",
        "[rank2]: 2025-03-02 03:40:55,871 INFO train: step 9120 loss 1.87"] + LOADER})
    assert d.category == "data" and d.culprit_ranks == [2], d.headline
    assert "Caught ValueError" in d.chain[0].evidence[0].text


def test_suppressed_and_skipped_lines_are_noise(tmp_path):
    d = _investigate(tmp_path, {"rank_0.log": [
        "[rank0]: 2025-03-02 01:00:00,000 INFO train: start",
        "[rank0]: 2025-03-02 01:00:01,000 WARNING data: ValueError: cannot identify image file 'img/00017.jpg' "
        "(skipping sample)",
        "[rank0]: torch._dynamo.convert_frame: [WARNING] Suppressed: RuntimeError: Tried to allocate 2.00 GiB",
        "[rank0]: 2025-03-02 02:00:00,000 INFO train: step 400 loss 1.20",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/workspace/train.py", line 512, in save',
        "[rank0]:     torch.save(state, path)",
        "[rank0]: OSError: [Errno 28] No space left on device"]})
    assert d.category == "storage_io", d.headline
    assert d.chain[0].evidence[0].text.endswith("No space left on device")


def test_an_untimed_traceback_does_not_borrow_a_time_from_two_hours_before(tmp_path):
    """Rank 0's traceback has no time; its neighbours are 10:00 and 12:00. It must not be dated 10:00 and so
    become 'earlier' than rank 1's timed ECC error at 11:00."""
    d = _investigate(tmp_path, {
        "rank_0.log": ["[rank0]: 2025-03-02 10:00:00,000 INFO train: step 100 loss 2.0",
                       "[rank0]: Traceback (most recent call last):",
                       '[rank0]:   File "/workspace/ckpt.py", line 88, in write',
                       "[rank0]: OSError: [Errno 5] Input/output error",
                       "[rank0]: 2025-03-02 12:00:00,000 INFO train: giving up"],
        "rank_1.log": ["[rank1]: 2025-03-02 11:00:00,000 INFO train: step 700 loss 1.9",
                       "[rank1]: 2025-03-02 11:00:01,000 ERROR RuntimeError: CUDA error: uncorrectable ECC error "
                       "encountered"]})
    tb = [e for f in d.chain + [a for a in d.alternatives] for e in (f.evidence or [])
          if "Input/output error" in e.text]
    assert tb and all(e.time is None for e in tb), [e.time for e in tb]
    assert d.category == "gpu_cuda" and d.culprit_ranks == [1], d.headline


def test_an_untimed_traceback_right_after_a_timed_line_keeps_that_time(tmp_path):
    d = _investigate(tmp_path, {"rank_0.log": ["[rank0]: 2025-03-02 10:00:00,000 INFO train: step 100 loss 2.0",
                                               "[rank0]: Traceback (most recent call last):",
                                               '[rank0]:   File "/workspace/ckpt.py", line 88, in write',
                                               "[rank0]: OSError: [Errno 5] Input/output error",
                                               "[rank0]: 2025-03-02 10:00:02,000 INFO train: exiting"]})
    assert d.category == "storage_io"
    assert d.chain[0].evidence[0].time is not None and d.chain[0].evidence[0].time.iso().startswith("2025-03-02T10:00:00")


def test_a_handled_exception_line_does_not_outrank_a_later_fault(tmp_path):
    """A warning that names a bad sample and skips it is earlier than the disk-full error, and would classify as
    `data` on its own, as strongly; it says it was handled, so it is noise."""
    d = _investigate(tmp_path, {"rank_6.log": [
        "[rank6]: 2025-03-02 01:00:01,000 WARNING data: ValueError: cannot identify image file 'img/00017.jpg' "
        "(skipping sample)",
        "[rank6]: 2025-03-02 01:00:02,000 INFO train: step 400 loss 1.20",
        "[rank6]: 2025-03-02 01:00:03,000 ERROR checkpoint: OSError: [Errno 28] No space left on device"]})
    assert d.category == "storage_io" and d.culprit_ranks == [6], d.headline


CLOSED = ["gpu-p01:1100:1388 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer "
          "gpu-p01<43311>",
          "[rank0]:[E1021 14:02:11.482913776 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
          "group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network "
          "error, NCCL version 2.21.5",
          "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
          "Last error:",
          "socketProgress: Connection closed by remote peer gpu-p01<43311>"]


def test_a_socket_that_saw_its_peer_close_is_the_cascade_of_that_peers_own_crash(tmp_path):
    """NCCL's `Connection closed by remote peer` is what the receiving end sees when the peer's process exits:
    rank 5's CUDA OOM is the trigger, although rank 0's close is timed (by the watchdog line after it) and the OOM
    is not."""
    d = _investigate(tmp_path, {"rank0.log": CLOSED, "rank5.log": [x.replace("rank2", "rank5") for x in OOM]})
    assert d.category == "oom" and d.culprit_ranks == [5], d.headline


def test_a_close_timed_before_the_peers_failure_stays_a_rival_on_time(tmp_path):
    """The deferral is for a close that cannot be ordered after the other failure: a close timed an hour before the
    peer's exception is not its consequence, and the reading of the network stays."""
    closed = ["[rank0]: 2025-03-02 10:00:00,000 INFO train: step 100 loss 2.0",
              "[rank0]: 2025-03-02 10:00:01,000 gpu-p01:1100:1388 [0] misc/socket.cc:58 NCCL WARN socketProgress: "
              "Connection closed by remote peer gpu-p02<43311>"]
    late = ["[rank5]: 2025-03-02 11:00:00,000 INFO train: step 100 loss 2.0",
            "[rank5]: 2025-03-02 11:00:05,000 ERROR train: ValueError: expected a non-empty batch"]
    d = _investigate(tmp_path, {"rank0.log": closed, "rank5.log": late})
    assert d.category == "network", d.headline


def test_a_socket_close_alone_is_still_read_as_the_network(tmp_path):
    d = _investigate(tmp_path, {"rank0.log": CLOSED})
    assert d.category == "network", d.headline


REMOTE_IB = ["[rank{r}]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
             "NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.21.5",
             "[rank{r}]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
             "prematurely.",
             "[rank{r}]: Last error:",
             "[rank{r}]: NET/IB : Got completion from peer 10.1.0.11<48234> with status=12 opcode=0 len=0 vendor err 129 "
             "(Recv) localGid ::ffff:10.1.0.12 remoteGids::ffff:10.1.0.11"]
DISK_FULL = ["[rank3]: Traceback (most recent call last):",
             '[rank3]:   File "/workspace/train.py", line 141, in save_checkpoint',
             "[rank3]:     torch.save(state, path)",
             "[rank3]: OSError: [Errno 28] No space left on device"]


def test_an_ib_completion_error_quoted_by_a_remote_error_is_the_cascade_of_a_peers_own_failure(tmp_path):
    """When a peer PROCESS dies, the survivors' sends to it exhaust their retries (status 12) and c10d quotes that
    as the last error of its `remote process exited or there was a network error` report: rank 3's full disk is the
    trigger, not the fabric of the ranks that only saw it go. The same quoted error with no rank failing on its own
    stays the network's."""
    cascade = [x.format(r=r) for r in (0, 1, 2) for x in REMOTE_IB]
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"rank0-2.log": cascade, "rank3.log": DISK_FULL})
    assert d.category == "storage_io" and d.culprit_ranks == [3], d.headline
    (tmp_path / "b").mkdir()
    alone = _investigate(tmp_path / "b", {"rank0-2.log": cascade})
    assert alone.category == "network", alone.headline


def test_nccls_own_ib_completion_warning_stays_the_fabrics_beside_another_ranks_error(tmp_path):
    """NCCL's own WARN line of a completion error (not a quote of the last error) is the fabric's reading, as
    before: only what c10d's remote-error report quotes is read as a peer's exit."""
    (tmp_path / "c").mkdir()
    d = _investigate(tmp_path / "c", {"rank0.log": [
        "[rank0]:gpu-a08:3320:3390 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer "
        "10.1.0.11<48234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.12 "
        "remoteGids::ffff:10.1.0.11 hca mlx5_0"], "rank3.log": DISK_FULL})
    assert d.category == "network", d.headline


def test_a_dataloader_workers_original_exception_decides_over_the_wrapper(tmp_path):
    """`Caught OSError in DataLoader worker process 2.` only says where it was raised; the Original Traceback under
    it says what failed: a stale NFS handle is the filesystem's (storage_io), not the sample's. The survivors'
    `DistBackendError: NCCL error ... remote process exited` tracebacks (quoting their IB retries to the dead peer),
    printed first and dated by the step line before them, are the NCCL rules' to read, not the first failing rank's
    exception."""
    survivors = [x.format(r=r) for r in (0, 1, 2) for x in (
        "[rank{r}]: 2024-11-06 03:42:18,100 INFO train: step 1200 loss 2.31",
        "[rank{r}]: Traceback (most recent call last):",
        '[rank{r}]:   File "/workspace/train.py", line 251, in main',
        "[rank{r}]:     dist.all_reduce(loss_t)", *REMOTE_IB)]
    d = _investigate(tmp_path, {"train.log": survivors + [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "/workspace/train.py", line 240, in main',
        "[rank3]:     batch = next(it)",
        "[rank3]: OSError: Caught OSError in DataLoader worker process 2.",
        "[rank3]: Original Traceback (most recent call last):",
        '[rank3]:   File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 351, in _worker_loop',
        "[rank3]:     data = fetcher.fetch(index)",
        '[rank3]:   File "/workspace/data/arrow_ds.py", line 77, in __getitem__',
        '[rank3]:     table = pa.ipc.open_file(pa.memory_map(self.files[fi], "r")).read_all()',
        "[rank3]: OSError: [Errno 116] Stale file handle: '/nfs/datasets/c4/train-00412.arrow'"]})
    assert d.category == "storage_io" and d.culprit_ranks == [3], d.headline


def test_nccls_last_error_takes_the_time_of_the_c10d_error_that_prints_it(tmp_path):
    """The reason under `Last error:` has no stamp; it is the same failure as the timed c10d line above it, so that
    line's time is its own, and the timed wrapper does not win the ordering against its own reason (here aws-ofi-nccl's
    err 113, which its source prints only for traffic the security group dropped)."""
    d = _investigate(tmp_path, {"rank0.log": [
        "ip-10-0-5-12:811:1190 [0] NCCL WARN NET/OFI Request 0x7f2ad40 (send) completed with error: err: 113, flags: "
        "0, prov_errno: 15, strerror: Unreachable remote - never received a response, len: 0",
        "[rank0]:[E1021 14:02:11.482913776 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
        "group watchdog thread terminated with exception: NCCL error: unhandled system error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        "NET/OFI Request 0x7f2ad40 (send) completed with error: err: 113, flags: 0, prov_errno: 15, strerror: "
        "Unreachable remote - never received a response, len: 0"]})
    assert d.category == "config", d.headline
    assert "Last error" not in d.chain[0].evidence[0].text and "err: 113" in d.chain[0].evidence[0].text


MEGATRON_END = ["7:  [2024-11-05 12:10:01] iteration     5000/    5000 | consumed samples:      1280000 | lm loss: "
                "1.900000E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |",
                "7: [after training is done] datetime: 2024-11-05 12:41:07 ",
                "JobID           JobName      State ExitCode",
                "------------ ---------- ---------- --------",
                "5610044        gpt1b-pr  COMPLETED      0:0",
                "5610044.0        python  COMPLETED      0:0"]


def test_the_schedulers_completed_record_is_proof_of_a_normal_end_over_a_link_flap(tmp_path):
    """sacct's row for the job (COMPLETED 0:0) proves the end; a RoCE port that went down and up during the run is
    a table's reading, not a failure of a run that finished."""
    d = _investigate(tmp_path, {
        "node.dmesg": ["[ 3310.880211] mlx5_core 0000:4b:00.0 ibp75s0: Link down",
                       "[ 3312.904512] mlx5_core 0000:4b:00.0 ibp75s0: Link up"],
        "slurm-5610044.out": MEGATRON_END})
    assert d.status.value == "completed" and d.category == "none", d.headline


def test_a_recorded_row_remap_is_not_a_crash_of_a_run_that_finished(tmp_path):
    """Xid 63 is an event NVIDIA's catalog calls informational (the remap takes effect at the next reset): with the
    launcher's normal end it is set aside, and shown as what was noticed."""
    d = _investigate(tmp_path, {
        "journal.txt": ["Nov 05 03:02:11 h100-k8s-14 kernel: NVRM: Xid (PCI:0000:18:00): 63, pid=1, name=python, Row "
                        "Remapper: New row marked for remapping, reset gpu to activate."],
        "trainer.log": ["[default0]:{'train_runtime': 15101.9, 'train_samples_per_second': 86.7, 'epoch': 2.0}",
                        "I1105 05:22:30.101000 1 torch/distributed/elastic/agent/server/api.py:879] [default] worker "
                        "group successfully finished. Waiting 300 seconds for other agents to finish."]})
    assert d.status.value == "completed", d.headline
    assert any("Xid 63" in a.summary for a in d.alternatives)


LIGHTNING_END = ["Epoch 9: 100%|##########| 1250/1250 [05:12<00:00,  4.00it/s, v_num=3, train_loss=1.92]",
                 "`Trainer.fit` stopped: `max_epochs=10` reached."]


def test_machine_events_on_a_clock_of_their_own_do_not_fail_a_run_that_finished(tmp_path):
    """dmesg's uptime stamps order nothing against the trainer's lines: a recorded row remap and a corrected-ECC rate
    (Xid 63, 92), and a Lustre reply that was slow and came back, are what the node rode through when the trainer
    proves its normal end."""
    for i, dmesg in enumerate([
            ["[300112.120099] NVRM: Xid (PCI:0000:2a:00): 63, Row Remapper: New row marked for remapping, reset gpu "
             "to activate.",
             "[300112.120121] NVRM: Xid (PCI:0000:2a:00): 92, High single-bit ECC error rate"],
            ["[81234.567890] Lustre: 4012:0:(client.c:2305:ptlrpc_expire_one_request()) @@@ Request sent has timed "
             "out for slow reply: [sent 1730790000/real 1730790000]  req@000000001a2b3c4d x1789/t0(0) "
             "o4->scratch-OST0007-osc-ffff8f0a@10.10.0.17@o2ib:6/4 lens 488/448 e 0 to 1 dl 1730790047 ref 2 fl "
             "Rpc:Xr/0/ffffffff rc 0/-1 job:''",
             "[81255.123456] Lustre: scratch-OST0007-osc-ffff8f0a: Connection restored to 10.10.0.17@o2ib (at "
             "10.10.0.17@o2ib)"]]):
        (tmp_path / str(i)).mkdir()
        d = _investigate(tmp_path / str(i), {"dmesg.txt": dmesg, "fit.log": LIGHTNING_END})
        assert d.status.value == "completed", d.headline


def test_a_weak_reading_of_a_ranks_own_output_is_not_set_aside_for_another_files_end(tmp_path):
    """Only the machine's events are set aside unordered: an unclassified exception in a rank's own file, which
    nothing orders against rank 0's end line, may be that rank's failure, and is not read as ridden through."""
    d = _investigate(tmp_path, {"rank0.log": LIGHTNING_END, "rank1.log": [
        "Traceback (most recent call last):", '  File "/workspace/train.py", line 80, in <module>',
        "    main()", "FooBarError: the frobnicator refused"]})
    assert d.status.value != "completed", d.headline


def test_a_loaders_suppressed_and_fallback_warnings_are_no_failure_of_a_run_that_finished(tmp_path):
    """lhotse's fault-tolerant mode (`[Suppressed AudioLoadingError]`) and the AIStore batch loader's fallbacks said
    they went on: with the trainer's end after them the run completed; the raised loader error still ends a run."""
    warnings = ["WARNING:root:[Suppressed AudioLoadingError] Error message: Reading audio from "
                "'/data/ls/train/1234-5678-0042.flac' failed. Details: LibsndfileError: Error opening "
                "'/data/ls/train/1234-5678-0042.flac': Format not recognised.",
                "WARNING:root:AIStore batch.get() failed: Read timed out. (read timeout=30). Falling back to "
                "sequential GET requests.",
                "WARNING:root:AISBatchLoader dropping 2/512 cuts due to per-object fetch failures "
                "(skip_failed_fetches=True)."]
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"train.log": warnings + LIGHTNING_END})
    assert d.status.value == "completed", d.headline
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"train.log": warnings + [
        "lhotse.ais.batch_loader.AISBatchLoaderError: Sequential GET fallback failed for shard-000123/utt-42.flac"]})
    assert d.category == "storage_io" and d.status.value == "crashed", d.headline


def test_an_undated_crash_printed_above_the_time_limit_banner_came_before_it(tmp_path):
    """The first dated line after rank 5's undated CUDA error is the time-limit banner itself, further down the same
    file: the error was printed before the limit, and the other ranks waited until it (a 4-hour collective timeout
    shows no hang): the crash is the trigger, the limit only ended the wait."""
    d = _investigate(tmp_path, {"slurm-735700.out": [
        " 5: [rank5]: Traceback (most recent call last):",
        ' 5: [rank5]:   File "/workspace/train.py", line 212, in <module>',
        " 5: [rank5]:     loss.backward()",
        " 5: [rank5]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "slurmstepd: error: *** STEP 735700.0 ON gpu-j-001 CANCELLED AT 2024-11-20T16:00:07 DUE TO TIME LIMIT ***",
        "srun: error: gpu-j-001: task 5: Exited with exit code 1"]})
    assert d.category == "gpu_cuda" and d.culprit_ranks == [5], d.headline


def test_a_rank_the_kernel_killed_outranks_a_hang_inferred_from_the_waiters(tmp_path):
    """Megatron's rank 0 prints the dataset build for all; task 4 is OOM-killed; rank 1 times out in the barrier.
    That rank 0 "never entered" the barrier is inferred from the waiters' lines (it is the only rank that prints),
    and the others waited for the rank that died: the kill is the trigger."""
    d = _investigate(tmp_path, {"slurm-55012.out": [
        " 0: [after model, optimizer, and learning rate scheduler are built] datetime: 2026-11-14 07:59:02 ",
        " 0: > building train, validation, and test datasets ...",
        " 0: INFO:megatron.core.datasets.gpt_dataset:Load the GPTDataset train indices",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=55012.0. Some of the step tasks have been OOM Killed.",
        "srun: error: cpu-gpu-03: task 4: Out Of Memory",
        " 1: [rank1]:[E1114 08:21:55.560475952 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=5, OpType=BARRIER, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600041 milliseconds before timing out.",
        " 1: [rank1]:[E1114 08:21:55.866177624 ProcessGroupNCCL.cpp:690] [Rank 1] To avoid data inconsistency, we are "
        "taking the entire process down.",
        "srun: error: cpu-gpu-03: tasks 1-3,5-7: Aborted (core dumped)",
        "srun: error: cpu-gpu-03: task 0: Terminated"]})
    assert d.category == "oom" and d.culprit_ranks == [4], d.headline


def _gave_up(r: int) -> list[str]:
    return [f"[default{r}]:[rank{r}]:[E1116 07:11:45.727058325 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3, OpType=BARRIER, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
            f"[default{r}]:[rank{r}]:[E1116 07:11:45.046443419 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID "
            f"0(default_pg) Rank {r}]  failure detected by watchdog at work sequence id: 3 PG status: last enqueued "
            "work: 3, last completed work: 2",
            f"[default{r}]:[rank{r}]:[E1116 07:11:45.372769699 ProcessGroupNCCL.cpp:690] [Rank {r}] To avoid data "
            "inconsistency, we are taking the entire process down."]


def test_a_close_seen_after_the_peers_had_given_up_is_their_exit_not_the_network(tmp_path):
    """Rank 0 alone builds Megatron's dataset index; the others time out in the barrier at 07:11:45 and take their
    processes down; rank 0 enters the barrier at 07:16 and sees its peers' sockets closed. The close is their exit,
    not a broken network: the rank that never entered is the culprit, and what it was doing is read from its own
    last lines though it printed no collective line of its own before the close."""
    close = [
        "[default0]:[rank0]:[E1116 07:16:02.568223019 ProcessGroupNCCL.cpp:1709] [PG ID 0 PG GUID 0(default_pg) Rank "
        "0] Collective WorkNCCL(SeqNum=3, OpType=BARRIER, NumelIn=1, NumelOut=1, Timeout(ms)=600000) raised the "
        "following async exception: NCCL error: remote process exited or there was a network error, NCCL version "
        "2.21.5",
        "[default0]:ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.",
        "[default0]:Last error:",
        "[default0]:socketProgress: Connection closed by remote peer gpu-m02<40110>"]
    gave_up = [x for r in (1, 3, 6, 7) for x in _gave_up(r)]
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"train.log": [
        "[default0]:INFO:megatron.core.datasets.gpt_dataset:Build and save the GPTDataset train indices", *gave_up,
        "[default0]:INFO:megatron.core.datasets.gpt_dataset:> total number of samples: 1024038311", *close]})
    assert d.category != "network" and d.culprit_ranks == [0], d.headline
    assert "does not say what it was doing" not in d.headline, d.headline
    # with nothing of rank 0's own, the close dated after the others gave up is still not the trigger
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"train.log": gave_up + close})
    assert d.category != "network" and d.culprit_ranks == [0], d.headline


def test_a_pod_evicted_for_memory_is_the_cause_of_the_close_its_peer_saw(tmp_path):
    """The worker pod was evicted for its memory (a death that names a pod, not a rank); the master's rank saw its
    socket close. Whoever printed the close was alive: the eviction is the trigger."""
    d = _investigate(tmp_path, {
        "pod.txt": ["Name:             vit-pretrain-worker-0",
                    "Status:           Failed",
                    "Reason:           Evicted",
                    "Message:          The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                    "91232Ki. Container pytorch was using 187340212Ki, request is 96Gi, has larger consumption of "
                    "memory. "],
        "master.log": ["[default1]:[2024-11-06 03:02:18] vit-pretrain-master-0:51:311 [1] misc/socket.cc:58 NCCL WARN "
                       "socketProgress: Connection closed by remote peer "
                       "vit-pretrain-worker-0.vit-pretrain.vision.svc<41119>"]})
    assert d.category == "oom", d.headline


def test_the_agents_sigterm_yields_to_the_reading_of_who_sent_it(tmp_path):
    """The kubelet killed the container after its liveness probe failed (a probe too short for the checkpoint
    load); the torchrun agent inside only saw SIGTERM. The events say who sent it: that reading is the answer."""
    d = _investigate(tmp_path, {
        "events.txt": ["LAST SEEN   TYPE      REASON                   OBJECT                          MESSAGE",
                       '5m          Warning   Unhealthy                pod/t5-ft-master-0              Liveness '
                       'probe failed: Get "http://10.244.5.9:8080/healthz": context deadline exceeded',
                       "4m          Normal    Killing                  pod/t5-ft-master-0              Container "
                       "pytorch failed liveness probe, will be restarted"],
        "master-0.log": ["W1114 06:04:40.100000 1 torch/distributed/elastic/agent/server/api.py:719] Received "
                         "Signals.SIGTERM death signal, shutting down workers",
                         "W1114 06:04:40.101000 1 torch/distributed/elastic/multiprocessing/api.py:897] Sending "
                         "process 20 closing signal SIGTERM"]})
    assert d.category == "config", d.headline
    (tmp_path / "alone").mkdir()
    alone = _investigate(tmp_path / "alone", {"master-0.log": [
        "W1114 06:04:40.100000 1 torch/distributed/elastic/agent/server/api.py:719] Received Signals.SIGTERM death "
        "signal, shutting down workers"]})
    assert alone.category == "infrastructure", alone.headline


def _dcp_block(r: int) -> list[str]:
    p = f"[default{r}]:[rank{r}]: "
    return [p + x for x in (
        "Traceback (most recent call last):",
        '  File "/workspace/train_fsdp.py", line 380, in main',
        '    dcp.save(state_dict, checkpoint_id=f"{cfg.ckpt_dir}/step_{step}")',
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/utils.py", line 232, in all_reduce',
        "    raise final_result",
        "torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([3])",
        "Traceback (most recent call last): (RANK 3)",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/filesystem.py", line 207, in '
        "_write_item",
        "    torch.save(data, stream)",
        "OSError: [Errno 28] No space left on device")]


def test_a_failure_dcp_reports_for_one_rank_is_that_ranks_whoever_prints_it(tmp_path):
    """Every rank re-raises DCP's CheckpointException with the failed rank's traceback under `(RANK 3)`: the full
    disk is rank 3's (not a shared cause because four ranks printed it, nor the printers' own)."""
    d = _investigate(tmp_path, {"train.log": [x for r in range(4) for x in _dcp_block(r)]})
    assert d.category == "storage_io" and d.culprit_ranks == [3], d.headline


def test_the_node_of_a_rank_dcp_reports_is_that_ranks_not_the_printers(tmp_path):
    """Per-node files (torchrun --tee, one file per node): rank 0 on dgx-01 prints rank 3's full disk
    first, but the disk that filled is rank 3's, on dgx-02: the culprit's node is where rank 3 ran, never dgx-01
    because its copy of the traceback came first."""
    def init(host: str, local: int, rank: int) -> str:  # NCCL's communicator line names the host of each rank
        return (f"[default{local}]:{host}:{48213 + local}:{48213 + local} [{local}] NCCL INFO comm 0x55d1c0e0 rank "
                f"{rank} nranks 4 cudaDev {local} nvmlDev {local} busId 1b000 commId 0x9f2c7e11 - Init COMPLETE")
    d = _investigate(tmp_path, {
        "first.out": [init("dgx-01", 0, 0), init("dgx-01", 1, 1), *_dcp_block(0)],
        "second.out": [init("dgx-02", 0, 2), init("dgx-02", 1, 3)]
        + [x.replace("[default3]:[rank3]", "[default1]:[rank3]") for x in _dcp_block(3)]})
    assert d.category == "storage_io" and d.culprit_ranks == [3], d.headline
    assert d.culprit_nodes == ["dgx-02"], (d.culprit_nodes, d.headline)


def test_a_straggler_that_said_what_went_wrong_is_read_by_what_it_said(tmp_path):
    """torchtitan's rank 5 ran out of data (its shard was shorter), ended its loop and destroyed its process group;
    the others timed out in the next all-gather. The rank that never entered said why before it stopped: the
    upstream table's trigger on its own last lines decides the category (the data), not a guess from silence."""
    def waiting(r):
        return [f"[rank{r}]:[E1120 18:10:22.477357240 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=96012, OpType=_ALLGATHER_BASE, NumelIn=131072000, "
                "NumelOut=131072000, Timeout(ms)=100000) ran for 100031 milliseconds before timing out.",
                f"[rank{r}]:[E1120 18:10:22.015113954 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank "
                f"{r}]  failure detected by watchdog at work sequence id: 96012 PG status: last enqueued work: 96012, "
                "last completed work: 96011"]
    d = _investigate(tmp_path, {"stdout.log": [
        "[rank0]:[titan] 2026-11-20 18:08:29,233 - root - INFO - step: 8000  loss:  2.1064  grad_norm:  0.1488",
        "[rank5]:[titan] 2026-11-20 18:08:41,843 - root - WARNING - Ran out of data; last step was canceled.",
        "[rank5]:[titan] 2026-11-20 18:08:41,296 - root - INFO - Training completed",
        "[rank5]:[titan] 2026-11-20 18:08:42,373 - root - INFO - Process group destroyed",
        *[x for r in (0, 2, 4, 7) for x in waiting(r)]]})
    assert d.category == "data" and d.culprit_ranks == [5], d.headline


def _unresponsive(r: int, t: str) -> list[str]:
    ofi = ("NET/OFI Request 0x7f02aa1c3e10 (recv) completed with error: err: 5, flags: 0, prov_errno: 13, strerror: "
           "Unresponsive remote (was previously responsive), len: 0")
    return [f" {r}: [rank{r}]:[E503 {t} ProcessGroupNCCL.cpp:1804] [Rank {r}] Collective WorkNCCL(SeqNum=19220, "
            "OpType=_ALLGATHER_BASE, NumelIn=805306368, NumelOut=805306368, Timeout(ms)=600000) raised the following "
            "async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5",
            f" {r}: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
            "prematurely.", f" {r}: Last error:", f" {r}: {ofi}"]


def test_efas_unresponsive_remote_is_what_survivors_see_of_a_rank_the_kernel_killed(tmp_path):
    """libfabric/EFA's `Unresponsive remote (was previously responsive)`, quoted as NCCL's last error, is the
    survivors' view of a peer that went away; srun and slurmstepd report task 21 OOM-killed, untimed, below the
    survivors' dated lines (a time they would only borrow from those lines says nothing of when it died)."""
    d = _investigate(tmp_path, {"slurm-77120.out": [
        "15: [2025-05-03 07:08:40] step 614 | loss 1.7220 | grad_norm 0.31 | host_rss 1.71TB",
        *_unresponsive(1, "07:12:11.838685876"), *_unresponsive(9, "07:12:19.727035364"),
        "srun: error: p4d-st-2: task 21: Out Of Memory",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=77120.0. Some of the step tasks have been OOM Killed.",
        "srun: error: p4d-st-0: tasks 0-7: Aborted (core dumped)"]})
    assert d.category == "oom" and d.culprit_ranks == [21], d.headline
    (tmp_path / "alone").mkdir()
    alone = _investigate(tmp_path / "alone", {"out.log": _unresponsive(1, "07:12:11.838685876")})
    assert alone.category == "network", alone.headline


def test_a_fatal_xid_still_fails_a_run_whose_trainer_printed_its_end(tmp_path):
    d = _investigate(tmp_path, {
        "journal.txt": ["Nov 05 03:02:11 h100-k8s-14 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, "
                        "GPU has fallen off the bus."],
        "trainer.log": ["[default0]:{'train_runtime': 15101.9, 'train_samples_per_second': 86.7, 'epoch': 2.0}"]})
    assert d.category == "gpu_cuda", d.headline


RESTART = ["I1105 08:38:33.548000 51877 torch/distributed/elastic/agent/server/api.py:889] [default] Worker group "
           "FAILED. 3/3 attempts left; will restart worker group",
           "I1105 08:38:41.374000 51877 torch/distributed/elastic/agent/server/api.py:526] [default] Starting worker "
           "group"]
IB = ("[rank2]:gpu-node-07:52011:52390 [2] transport/net_ib.cc:2449 NCCL WARN NET/IB: Got completion from peer "
      "10.12.4.21<47512> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.12.4.20 remoteGidsfe80::1")
LAUNCHER_END = ["I1105 21:16:45.038000 51877 torch/distributed/elastic/agent/server/api.py:879] [default] worker group "
                "successfully finished. Waiting 300 seconds for other agents to finish."]


def test_a_fault_that_the_launcher_restarted_away_is_not_the_end_of_a_job_that_finished(tmp_path):
    d = _investigate(tmp_path, {"output.txt": [IB] + RESTART + ["[rank0]: step 4000 loss 1.1"] + LAUNCHER_END})
    assert d.status.value == "completed", d.headline
    assert "restarted the workers" in d.headline and "IB completion" in d.headline


def test_a_fault_after_the_last_restart_still_ends_the_job(tmp_path):
    d = _investigate(tmp_path, {"output.txt": RESTART + [IB] + LAUNCHER_END})
    assert d.category == "network", d.headline


def _log_dir_attempts(tmp_path, last_attempt: list[str]) -> None:
    """torchrun --log-dir: the agent's console, and each attempt's worker files under `attempt_<N>/<local rank>/`;
    the workers' tracebacks are undated, so only their place says which attempt they belong to."""
    (tmp_path / "console.log").write_text("\n".join(RESTART + LAUNCHER_END) + "\n")
    oom = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "/work/train.py", line 301, in <module>',
           "[rank1]:     batch = next(it)", "[rank1]: TimeoutError: timed out"]
    for attempt, lines in ((0, oom), (1, last_attempt)):
        d = tmp_path / "logs" / "run_x8k2m1qd" / f"attempt_{attempt}" / "1"
        d.mkdir(parents=True)
        (d / "stderr.log").write_text("\n".join(lines) + "\n")


def test_a_fault_in_an_earlier_attempt_s_files_is_restarted_away(tmp_path):
    _log_dir_attempts(tmp_path, ["[rank1]: step 4000 loss 1.1"])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.status.value == "completed", d.headline
    assert "restarted the workers" in d.headline


def test_attempts_of_two_runs_are_not_one_run_s(tmp_path):
    """torchrun keeps a folder per invocation: yesterday's run restarted and finished; today's crashed in its first
    attempt. Today's attempt_0 is no earlier attempt of yesterday's run."""
    _log_dir_attempts(tmp_path, ["[rank1]: step 4000 loss 1.1"])
    today = tmp_path / "logs" / "run_nov06" / "attempt_0" / "1"
    today.mkdir(parents=True)
    (today / "stderr.log").write_text("[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: CUDA error: "
                                      "no kernel image is available for execution on the device\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.status.value != "completed", d.headline


def test_a_fault_in_the_last_attempt_s_files_ends_the_job(tmp_path):
    _log_dir_attempts(tmp_path, ["[rank1]: Traceback (most recent call last):",
                                 "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 "
                                 "has a total capacity of 79.15 GiB of which 1.02 GiB is free."])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom", d.headline


def test_peers_closing_their_sockets_at_the_end_of_a_run_that_finished_is_no_failure(tmp_path):
    d = _investigate(tmp_path, {"output.txt": ["[rank0]: Training completed. Do not forget to share your model on "
                                               "huggingface.co/models =)"] + CLOSED[:1] + LAUNCHER_END})
    assert d.status.value == "completed", d.headline


def test_a_traceback_after_the_trainers_end_line_is_a_failure_however_weakly_it_reads(tmp_path):
    """The HF Trainer prints `Training completed` and then loads the best model and prunes checkpoints: a failure
    there is the job's, and a weak reading of it is not set aside for the end line before it (no false all-clear)."""
    d = _investigate(tmp_path, {"combined.log": [
        "Training completed. Do not forget to share your model on huggingface.co/models =)",
        "Traceback (most recent call last):",
        '  File "run_train.py", line 512, in <module>',
        "    main()",
        '  File "run_train.py", line 490, in main',
        "    trainer.train()"]})
    assert d.status.value != "completed" and d.category != "none", d.headline


def test_a_peers_close_yields_to_a_table_reading_of_the_peers_own_failure(tmp_path):
    """The reading of rank 11's DataLoader timeout comes from PyTorch's table (not a rule): the other node's
    `Connection closed by remote peer node1` is still its consequence, and the table's reading stands."""
    d = _investigate(tmp_path, {"slurm-48213.out": [
        " 1: node0:7001:7041 [1] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "node1<46229>",
        " 0: node0:7000:7040 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "node1<46229>",
        "11: [rank11]: Traceback (most recent call last):",
        '11: [rank11]:   File "/workspace/train.py", line 288, in train',
        "11: [rank11]:     batch = next(train_iter)",
        "11: [rank11]: RuntimeError: DataLoader timed out after 300 seconds",
        "srun: error: node1: task 11: Exited with exit code 1"]})
    assert d.category == "data_loading_stall" and d.culprit_ranks == [11], d.headline


def test_nccls_last_error_quoting_a_cuda_error_is_read_by_the_cuda_error(tmp_path):
    """NCCL's `Cuda failure '<cudaGetErrorString>'` quotes the runtime's error: an NCCL build with no kernels for this
    GPU is the install's (config), not the GPU's."""
    d = _investigate(tmp_path, {"rank2.log": [
        "[rank2]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:268, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
        "[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.",
        "[rank2]: Last error:",
        "[rank2]: Cuda failure 'no kernel image is available for execution on the device'"]})
    assert d.category == "config" and d.culprit_ranks == [2], d.headline


def _node_failure(ib_time: str) -> dict[str, list[str]]:
    return {"slurm-4911770.out": [
        f" 0: [{ib_time}] gpu-node-11:70200:70290 [0] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from "
        "peer 10.42.1.12<51223> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.42.1.11 "
        "remoteGidsfe80::1 hca mlx5_0",
        "srun: error: Node failure on gpu-node-12",
        "slurmstepd: error: *** STEP 4911770.0 ON gpu-node-11 CANCELLED AT 2024-11-05T14:33:41 DUE TO NODE FAILURE, "
        "SEE SLURMCTLD LOG FOR DETAILS ***"]}


def test_fabric_errors_shortly_before_a_node_failure_are_its_consequence(tmp_path):
    """Slurm declares the node down minutes after it stopped answering: the peers' IB retries ran out in between.
    The failed node is srun's, not the banner's (the step's own host)."""
    d = _investigate(tmp_path, _node_failure("2024-11-05 14:31:07"))
    assert d.category == "infrastructure" and d.culprit_nodes == ["gpu-node-12"], d.headline


@pytest.mark.parametrize("gone", [
    ["2m23s       Normal    NodeNotReady   node/gpu-node-12   Node gpu-node-12 status is now: NodeNotReady"],
    ["5m   Warning   Evict   podgroup/llm-pt   Pod is evicted, because of preempt"],
    ['{"DocumentIncarnation": 4, "Events": [{"EventId": "A1B2", "EventType": "Preempt", "ResourceType": '
     '"VirtualMachine", "Resources": ["gpu-node-12"], "EventStatus": "Scheduled"}]}'],
], ids=["k8s-node-not-ready", "volcano-preempted", "azure-spot-preempt"])
def test_fabric_errors_beside_a_platform_s_word_that_a_member_went_away_are_its_consequence(tmp_path, gone):
    """The peers of a machine that went away (its node stopped reporting, its pod was preempted, the cloud took the
    instance) see IB retries run out: the platform's record, untimed, explains them (TAXONOMY: the peer is down)."""
    files = _node_failure("2024-11-05 14:31:07")
    # the gone machine's own rank said where it ran before it went away (a job node, not another workload's)
    files["slurm-4911770.out"] = [" 8: [2024-11-05 13:00:00] gpu-node-12:70300:70300 [0] NCCL INFO Bootstrap : Using "
                                  "eth0:10.42.1.12<0>"] + files["slurm-4911770.out"][:1]
    files["events.txt"] = gone
    d = _investigate(tmp_path, files)
    assert d.category == "infrastructure", d.headline


def test_fabric_errors_beside_mpiruns_lost_daemon_are_the_lost_nodes(tmp_path):
    """Open MPI's [node-died] help text: mpirun's daemon on gpu-node-12 stopped answering (the node is gone); the IB
    retries its peers ran out of are consequences, and the node is the one the text names as the remote daemon's,
    not mpirun's own (HNP)."""
    files = _node_failure("2024-11-05 14:31:07")
    files["slurm-4911770.out"] = files["slurm-4911770.out"][:1] + [
        "--------------------------------------------------------------------------",
        "ORTE has lost communication with a remote daemon.", "",
        "  HNP daemon   : [[18771,0],0] on node gpu-node-11", "  Remote daemon: [[18771,0],1] on node gpu-node-12", "",
        "This is usually due to either a failure of the TCP network", "connection to the node, or possibly an "
        "internal failure of", "the daemon itself. We cannot recover from this failure, and",
        "therefore will terminate the job."]
    d = _investigate(tmp_path, files)
    assert d.category == "infrastructure" and d.culprit_nodes == ["gpu-node-12"], d.headline


def test_another_node_s_notready_event_explains_nothing_of_this_job(tmp_path):
    """A cluster's events name every node that went NotReady; the job ran on gpu-node-11, not cpu-pool-7."""
    files = _node_failure("2024-11-05 14:31:07")
    files["slurm-4911770.out"] = files["slurm-4911770.out"][:1]
    files["events.txt"] = ["41m  Normal  NodeNotReady  node/cpu-pool-7  Node cpu-pool-7 status is now: NodeNotReady"]
    d = _investigate(tmp_path, files)
    assert d.category == "network" and "cpu-pool-7" not in d.culprit_nodes, d.headline


def test_a_container_that_never_started_explains_the_rendezvous_that_waited_for_it(tmp_path):
    d = _investigate(tmp_path, {
        "events.txt": ["  Warning  Failed   2m   kubelet  Error: failed to create containerd task: failed to create shim "
                       "task: OCI runtime create failed: runc create failed: unable to start container process: error "
                       "during container init: error running hook #0: error running hook: exit status 1, stdout: , "
                       "stderr: Auto-detected mode as 'legacy' nvidia-container-cli: initialization error: nvml error: "
                       "driver/library version mismatch: unknown"],
        "master-0.log": ["[2024-11-05 14:01:07,000] INFO train: rendezvous",
                         "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 3/4 "
                         "clients joined."]})
    assert d.category == "infrastructure", d.headline


def test_fabric_errors_hours_before_a_node_failure_stay_the_fabrics(tmp_path):
    d = _investigate(tmp_path, _node_failure("2024-11-05 11:31:07"))
    assert d.category == "network", d.headline


def test_a_worker_line_with_no_rank_takes_the_one_rank_of_the_same_failure(tmp_path):
    """The worker's own bus-error notice names no rank; its main process's line names rank 1: one failure, one rank."""
    d = _investigate(tmp_path, {"train.log": [
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "[rank1]: RuntimeError: DataLoader worker (pid 4471) is killed by signal: Bus error. It is possible that "
        "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."]})
    assert d.category == "infrastructure" and d.culprit_ranks == [1], d.headline


def test_an_oom_quoted_in_torchruns_failure_entry_is_that_entrys_rank(tmp_path):
    d = _investigate(tmp_path, {"paste.txt": [
        "Root Cause (first observed failure):",
        "[3]:",
        "  time      : 2024-11-06_01:12:05",
        "  host      : a100-x9",
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : 1 (pid: 5502)",
        "  error_file: <N/A>",
        "  traceback : Traceback (most recent call last):",
        '    File "/workspace/train.py", line 164, in train_one_epoch',
        "      loss.backward()",
        "  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 2 has a total capacity of 79.10 "
        "GiB of which 2.19 GiB is free."]})
    assert d.category == "oom" and d.culprit_ranks == [2], d.headline


def test_the_last_attempt_with_a_fault_of_its_own_ended_the_job(tmp_path):
    """Attempt 0 died of an IB error; the launcher restarted the workers; attempt 1 filled the disk: the disk ended
    the job, the IB error ended an attempt the launcher had already replaced."""
    d = _investigate(tmp_path, {"output.txt": [IB] + RESTART + [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/workspace/train.py", line 512, in save',
        "[rank0]:     torch.save(state, path)",
        "[rank0]: OSError: [Errno 28] No space left on device"]})
    assert d.category == "storage_io", d.headline


def test_every_attempt_failing_before_its_restart_keeps_the_first_fault(tmp_path):
    """Nothing decisive after the last restart: the earlier fault may be the one that kept coming back."""
    d = _investigate(tmp_path, {"output.txt": [IB] + RESTART + ["[rank0]: step 10 loss 2.0"]})
    assert d.category == "network", d.headline


def test_a_cut_cuda_oom_line_is_still_the_allocators(tmp_path):
    """A paste that starts mid-line (`emory. Tried to allocate ...`): the allocator's own sentence names the OOM."""
    d = _investigate(tmp_path, {"paste.txt": [
        "emory. Tried to allocate 1.96 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free. "
        "Including non-PyTorch memory, this process has 78.07 GiB memory in use."]})
    assert d.category == "oom", d.headline


def test_a_workers_error_above_torchruns_report_of_one_failed_rank_is_that_ranks(tmp_path):
    d = _investigate(tmp_path, {"paste.txt": [
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-02-11_03:10:44",
        "  host      : dgx-a100-04",
        "  rank      : 6 (local_rank: 6)",
        "  exitcode  : 1 (pid: 77120)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]})
    assert d.category == "gpu_cuda" and d.culprit_ranks == [6] and d.culprit_nodes == ["dgx-a100-04"], d.headline


def test_sruns_out_of_memory_task_line_names_the_node(tmp_path):
    d = _investigate(tmp_path, {"slurm-4891784.out": [
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4891784.0. Some of the step tasks have been OOM Killed.",
        "srun: error: gpu-node-17: task 3: Out Of Memory"]})
    assert d.category == "oom" and d.culprit_nodes == ["gpu-node-17"], d.headline


def test_a_rendezvous_that_waited_for_a_pod_that_never_mounted_its_volume(tmp_path):
    d = _investigate(tmp_path, {
        "master.log": ["torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 12/16 "
                       "clients joined."],
        "worker-3-events.txt": ['  Warning  FailedMount  2m (x14 over 29m)   kubelet            MountVolume.SetUp '
                                'failed for volume "datasets" : mount failed: exit status 32',
                                "Output: mount.nfs: Connection timed out"]})
    assert d.category == "storage_io", d.headline


def test_an_undated_crash_printed_before_a_dated_line_of_its_file_precedes_a_later_rival(tmp_path):
    """Node a's OOM traceback has no stamp, but its launcher dated the SIGTERM it sent right after; node b's NCCL
    IB errors are dated a second later. The traceback was printed before its file's next dated line, so before the
    IB errors: it is the trigger, not dropped for being undated (the IB errors are what its death did to node b)."""
    a = ["I1105 10:58:02.004000 6611 torch/distributed/elastic/agent/server/api.py:707] [default] Rendezvous'ing "
         "worker group"] + OOM + [
        "W1105 11:58:30.120000 6611 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 6650 closing "
        "signal SIGTERM"]
    b = ["[2024-11-05 11:58:31] gpub:5160:5791 [2] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer "
         "10.0.1.11<51161> with status=12 opcode=32614 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.1.12 "
         "remoteGids::ffff:10.0.1.11 hca mlx5_0"]
    d = _investigate(tmp_path, {"node-a.log": a, "node-b.log": b})
    assert d.category == "oom" and d.culprit_ranks == [2], d.headline


_DUMPS = {"dump_node1.log": ['Thread 1439102 (idle): "MainThread"', "    get (queue.py:179)",
                             "    _try_get_data (torch/utils/data/dataloader.py:1011)"],
          "dump_node2.log": ['Thread 2201 (idle): "MainThread"',
                             "    broadcast (torch/distributed/distributed_c10d.py:1191)"]}
_TIME_LIMIT = "slurmstepd: error: *** JOB 4242 ON gpu-node-11 CANCELLED AT 2024-11-08T05:14:00 DUE TO TIME LIMIT ***"


def test_a_time_limit_that_ended_a_hang_is_the_end_not_the_cause(tmp_path):
    """Stack dumps show one process stuck in its data loader while the other waits in a collective; hours later the
    scheduler's time limit ended the job. The limit is dated and the dumps are not, but it only ended the hang."""
    d = _investigate(tmp_path, {**_DUMPS, "slurm-4242.out": ["step 100 loss 2.31", _TIME_LIMIT]})
    assert d.category == "data_loading_stall", d.headline


def test_a_time_limit_with_no_hang_shown_is_the_reading(tmp_path):
    d = _investigate(tmp_path, {"slurm-4242.out": ["step 100 loss 2.31", _TIME_LIMIT]})
    assert d.category == "infrastructure" and "time limit" in d.headline, d.headline


def test_what_the_teardown_after_a_time_limit_shows_is_not_a_hang_before_it(tmp_path):
    """The step was killed in the middle of its collectives: one rank's watchdog and the others' destroy warnings come
    after the limit. A reading drawn from those lines does not make the limit the end of a hang."""
    destroy = ("{r:2d}: [rank{r}]:[W1105 23:59:33.447712782 ProcessGroupNCCL.cpp:1250] Warning: WARNING: "
               "destroy_process_group() was not called before program exit, which can leak resources.")
    lines = [" 0: Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
             " 0: Epoch 3:  61%|██████    | 1464/2400 [1:11:52<45:57,  0.34it/s, v_num=4, train_loss=1.790]",
             "slurmstepd: error: *** STEP 4891784.0 ON gpu-d-011 CANCELLED AT 2024-11-05T23:59:31 DUE TO TIME LIMIT ***",
             "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."]
    lines += [destroy.format(r=r) for r in (3, 12, 0, 7)]
    lines += [" 5: [rank5]:[E1105 23:59:34.102211094 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
              "Exception (either an error or timeout) detected by watchdog at work: 88120, last enqueued NCCL work: "
              "88120, last completed NCCL work: 88119.",
              "srun: error: gpu-d-012: tasks 8-15: Terminated",
              "srun: error: gpu-d-011: tasks 0-7: Terminated"]
    d = _investigate(tmp_path, {"slurm-4891784.out": lines})
    assert d.category == "infrastructure" and "time limit" in d.headline, d.headline


def _dcp(printer: int, failed: int) -> list[str]:
    """A DCP save that failed on one rank, as another rank prints it (torch/distributed/checkpoint/api.py)."""
    p = f"[rank{printer}]: "
    return [p + "Traceback (most recent call last):",
            p + '  File "/workspace/train.py", line 210, in save',
            p + "    dcp.save(state_dict, checkpoint_id=path)",
            p + '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/utils.py", line 244, in '
                "all_gather",
            p + "    raise CheckpointException(step, node_failures)",
            p + f"torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([{failed}])",
            p + f"Traceback (most recent call last): (RANK {failed})",
            p + '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/filesystem.py", line '
                "602, in write_data",
            p + "    os.fsync(stream.fileno())",
            p + "OSError: [Errno 30] Read-only file system"]


def test_a_checkpoint_exception_is_read_through_to_the_rank_error_it_wraps(tmp_path):
    """DCP's CheckpointException is a wrapper (its table calls it a consequence); the `(RANK n)` traceback after it
    holds the failed rank's own error, and that rank is the culprit whichever rank printed the wrapper."""
    d = _investigate(tmp_path, {"rank_0.log": _dcp(0, 4)})
    assert d.category == "storage_io" and d.culprit_ranks == [4], d.headline


def test_a_dumps_stuck_loader_names_the_dumped_process_not_a_rank_that_waited(tmp_path):
    """py-spy's dump of pid 80378 waits on its DataLoader; NCCL's init line says pid 80378 on gn-05 is rank 42; rank 0
    timed out waiting in the collective. The stuck process is rank 42 (the dump's), never the rank whose watchdog
    line is cited beside it."""
    d = _investigate(tmp_path, {
        "gn-05.out": ["gn-05:80378:80549 [2] NCCL INFO ncclCommInitRank comm 0x55d4c8a00420 rank 42 nranks 64 cudaDev 2 "
                      "nvmlDev 2 busId 3a000 commId 0x9f3e2a1b7c6d5e4f - Init COMPLETE"],
        "gn-00.out": ["[rank0]:[E1105 21:40:01.477357240 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
                      "operation timeout: WorkNCCL(SeqNum=6102, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                      "Timeout(ms)=600000) ran for 600031 milliseconds before timing out."],
        "pyspy_gn05_local2.txt": ["Process 80378: /opt/conda/bin/python -u train_ddp.py",
                                  "Python v3.10.14 (/opt/conda/bin/python3.10)", "",
                                  'Thread 80378 (idle): "MainThread"',
                                  "    wait (threading.py:324)",
                                  "    get (queue.py:180)",
                                  "    _try_get_data (torch/utils/data/dataloader.py:1133)",
                                  "    __next__ (torch/utils/data/dataloader.py:701)",
                                  "    train_one_epoch (train_ddp.py:188)"]})
    assert d.category == "data_loading_stall" and d.culprit_ranks == [42], d.headline


IGNORED = ["Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3e1c2a8ee0>",
           "Traceback (most recent call last):",
           '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
           "    self._shutdown_workers()",
           '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/signal_handling.py", line 73, in '
           "handler",
           "    _error_if_any_worker_fails()",
           "RuntimeError: DataLoader worker (pid 31877) is killed by signal: Terminated. "]


def test_a_traceback_python_printed_and_ignored_is_no_failure(tmp_path):
    """CPython's `Exception ignored in: <...__del__>` and the traceback under it (the DataLoader iterator's
    destructor at interpreter shutdown, its workers already terminated): printed and ignored, after the trainer's
    end; the run completed. The same traceback without the header is a failure."""
    end = ["{'train_runtime': 3307.9021, 'train_samples_per_second': 75.59, 'train_loss': 0.5127, 'epoch': 5.0}",
           "100%|##########| 7815/7815 [55:07<00:00,  2.36it/s]"]
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"train.log": end + IGNORED})
    assert d.status.value == "completed", d.headline
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"train.log": end + IGNORED[1:]})
    assert d.status.value != "completed", d.headline


def _loader_paste(inner: list[str], exc: str) -> list[str]:
    """A paste of a DataLoader worker's failure that starts mid-traceback (the header was cut): the wrapper line,
    then the worker's Original Traceback."""
    return (['  File "/srv/.venv/lib/python3.10/site-packages/torch/_utils.py", line 694, in reraise',
             "    raise exception",
             f"{exc.split(':')[0]}: Caught {exc.split(':')[0]} in DataLoader worker process 0.",
             "Original Traceback (most recent call last):",
             '  File "/srv/.venv/lib/python3.10/site-packages/torch/utils/data/_utils/fetch.py", line 54, in fetch',
             "    return self.collate_fn(data)"] + inner + [exc])


def test_the_dataloader_wrapper_is_read_past_only_when_what_it_wraps_says_more(tmp_path):
    """`Caught RuntimeError in DataLoader worker process 0.` says where; the worker's `Cannot re-initialize CUDA in
    forked subprocess` says what (the program touched CUDA in a forked worker: software). A wrapped exception that
    says nothing more (`ValueError: expected the sample's image field`) leaves the wrapper's reading: a sample
    failed to load."""
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"log.txt": _loader_paste(
        ['  File "/srv/rl/train_reward.py", line 61, in collate', '    batch["r"] = torch.tensor(r, device="cuda")'],
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
        "the 'spawn' start method")})
    assert d.category == "software", d.headline
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"log.txt": _loader_paste(
        ['  File "/srv/rl/data.py", line 88, in decode', "    raise ValueError(msg)"],
        "ValueError: expected the sample's image field, got ['__key__', 'txt']")})
    assert d.category == "data", d.headline


def test_an_exception_read_by_where_it_was_raised_yields_to_the_table_that_documents_it(tmp_path):
    """Raised in the collate function (a sample's frames: data by where), but the message is one transformers
    documents: the tokenizer has no pad token, a setting of the run (config)."""
    d = _investigate(tmp_path, {"train.log": [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/home/m/train.py", line 88, in <module>',
        "[rank1]:     for batch in loader:",
        '[rank1]:   File "/home/m/.venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py", line 55, in '
        "fetch",
        "[rank1]:     return self.collate_fn(data)",
        '[rank1]:   File "/home/m/.venv/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", line 2924, '
        "in _get_padding_truncation_strategies",
        "[rank1]:     raise ValueError(",
        "[rank1]: ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to "
        "use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via "
        "`tokenizer.add_special_tokens({'pad_token': '[PAD]'})`."]})
    assert d.category == "config" and d.culprit_ranks == [1], d.headline


def test_jaxs_simplified_traceback_banner_is_not_the_exception(tmp_path):
    """JAX prints `jax.errors.SimplifiedTraceback: For simplicity, JAX has removed its internal frames ...` as the
    cause of every filtered traceback (the table's noise): the exception is the one after the direct-cause
    separator, here the TPU runtime failing to load the program into HBM (XLA's E0101)."""
    d = _investigate(tmp_path, {"train.log": [
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 212, in <module>',
        "    state, metrics = p_train_step(state, batch)",
        "jax.errors.SimplifiedTraceback: For simplicity, JAX has removed its internal frames from the traceback of "
        "the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 212, in <module>',
        "    state, metrics = p_train_step(state, batch)",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_train_step': Attempting "
        "to reserve 29.49G at the bottom of memory. That was not possible. There are 147.64M free, 0B reserved, and "
        "147.64M reservable."]})
    assert d.category == "oom", d.headline
    assert not any("SimplifiedTraceback" in e.text for f in d.chain[:1] for e in f.evidence), d.chain[0]


def test_an_errnos_words_raised_in_a_samples_frames_stay_the_samples(tmp_path):
    """`No such file or directory` raised in the dataset's __getitem__ is the sample's file gone (data): the errno
    table's generic reading (a wrong path: config) is no message of its own, and does not re-read where it was
    raised (the table re-reads only a message specific enough to say more)."""
    d = _investigate(tmp_path, {"rank2.log": [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "/workspace/train.py", line 301, in <module>',
        "[rank2]:     batch = next(it)",
        '[rank2]:   File "/workspace/data/shards.py", line 141, in __getitem__',
        "[rank2]:     with open(self.paths[i], 'rb') as fh:",
        "[rank2]: FileNotFoundError: [Errno 2] No such file or directory: '/data/tokenized/train-00913-of-01024.bin'"]})
    assert d.category == "data" and d.culprit_ranks == [2], d.headline


def test_a_fault_after_slurms_requeue_ended_the_job_not_the_cancel_before_it(tmp_path):
    """Slurm requeued the job after its time limit (`DUE TO JOB REQUEUE`) and the next run, appending to the same
    output, failed on its own: rank 12's NaN gradient norm (undated) ended the job, not the dated cancel that ended
    the run before. With nothing after the requeue, the cancel stays the answer."""
    first = [" 0: [2024-11-05 10:00:00] iteration 1000 | lm loss 2.31",
             "slurmstepd: error: *** JOB 4891784 ON gpu-c13 CANCELLED AT 2024-11-05T12:00:00 DUE TO TIME LIMIT ***",
             "slurmstepd: error: *** JOB 4891784 ON gpu-c13 CANCELLED AT 2024-11-05T12:00:01 DUE TO JOB REQUEUE ***"]
    second = [" 0: [2024-11-05 12:05:00] iteration 1000 | lm loss 2.31",
              "12: [rank12]: Traceback (most recent call last):",
              '12: [rank12]:   File "/workspace/megatron/core/distributed/param_and_grad_buffer.py", line 114, in '
              "start_grad_sync",
              "12: [rank12]: AssertionError: Rank 12: found NaN in local grad norm in backward pass before "
              "data-parallel communication collective. Device: 4, node: gpu-c14"]
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"slurm-4891784.out": first + second})
    assert d.category == "numerical", d.headline
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"slurm-4891784.out": first})
    assert d.category == "infrastructure", d.headline


_AUTOTUNE = "[default3]:[rank3]:E0314 10:03:05.881000 7103 torch/_inductor/select_algorithm.py:1683] [2/0] "


def _autotune_run(record: bool) -> list[str]:
    """A torchrun job whose rank 3 logs a CUDA error; `record`: inside max-autotune's multi-line record that says the
    failed kernel choice was dropped (torch/_inductor/select_algorithm.py: log.error("Runtime error during
    autotuning: \\n%s. \\nIgnoring this choice.", msg), every line under torch logging's header); else on its own."""
    err = "CUDA error: an illegal memory access was encountered"
    lines = ["[default0]:[titan] 2025-03-14 10:02:25,842 - root - INFO - Training starts at step 1"]
    if record:
        lines += [_AUTOTUNE + "Runtime error during autotuning: ", _AUTOTUNE + err, _AUTOTUNE,
                  _AUTOTUNE + "Either error in template or triton bug.", _AUTOTUNE + ". ",
                  _AUTOTUNE + "Ignoring this choice."]
    else:
        lines += ["[default3]:[rank3]: RuntimeError: " + err]
    return lines + [
        "[default0]:[titan] 2025-03-14 10:17:40,230 - root - INFO - step: 100  loss:  6.22000  grad_norm:  1.3500",
        "[default0]:[titan] 2025-03-14 10:17:43,254 - root - INFO - Training completed",
        "I0314 10:17:49.002000 7098 torch/distributed/elastic/agent/server/api.py:879] [default] worker group "
        "successfully finished. Waiting 300 seconds for other agents to finish."]


def test_an_error_quoted_by_a_handled_log_record_is_not_a_failure(tmp_path):
    """torch's logging repeats its header on each line of a record: the CUDA error that max-autotune caught, quoted
    inside `Runtime error during autotuning: ... Ignoring this choice.`, is that handled record's, and the run ended
    normally."""
    d = _investigate(tmp_path, {"run.log": _autotune_run(record=True)})
    assert d.status == Status.completed and d.category == "none", d.headline


def test_the_same_error_on_its_own_line_stays_a_fault(tmp_path):
    """Guard: the record's reading covers its own lines only; a rank's own CUDA error is a fault, end line or not."""
    d = _investigate(tmp_path, {"run.log": _autotune_run(record=False)})
    assert d.status != Status.completed and d.category == "gpu_cuda", d.headline


AGENT_CLOSED = [
    "[2025-03-04 10:12:01,004] torch.distributed.elastic.agent.server.api: [WARNING] [default] Worker group FAILED. "
    "3/3 attempts left; will restart worker group",
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", '
    "line 648, in run",
    "    raise RendezvousClosedError",
    "torch.distributed.elastic.rendezvous.api.RendezvousClosedError"]


def test_the_agents_closed_rendezvous_is_no_workers_failure(tmp_path):
    """RendezvousClosedError is the launcher's own traceback when another agent closed the rendezvous (its workers
    failed): a consequence, never the worker's exception on the other node."""
    d = _investigate(tmp_path, {"node0.log": LOADER, "node1.log": AGENT_CLOSED})
    assert d.category == "data" and d.culprit_ranks == [2], d.headline


def _stepping_until(hour: int) -> list[str]:
    """A job's step lines every 6 minutes from midnight to `hour`:00 (the step parser reads `s/it=`)."""
    out = []
    for i in range(hour * 10 + 1):
        h, m = divmod(i * 6, 60)
        out.append(f"[2024-11-18 {h:02d}:{m:02d}:11,100][INFO] step {14000 + 200 * i} loss=1.80 lr=1.0e-04 s/it=1.80")
    return out


LIMIT = "slurmstepd: error: *** JOB 5521818 ON gpu-t04 CANCELLED AT 2024-11-18T12:00:02 DUE TO TIME LIMIT ***"


def test_a_time_limit_that_ended_a_job_still_stepping_is_the_answer(tmp_path):
    """Guard: steps until minutes before the limit: the scheduler ended a job that was making progress."""
    d = _investigate(tmp_path, {"slurm-5521818.out": _stepping_until(11) + [
        "[2024-11-18 11:54:11,100][INFO] step 26000 loss=1.70 lr=1.0e-04 s/it=1.80", LIMIT]})
    assert d.status == Status.cancelled and d.category == "infrastructure" and d.confidence == "high", d.headline


def test_a_time_limit_hours_after_the_last_step_ended_a_hang(tmp_path):
    """The last step at 01:00, the limit at 12:00, nothing in between: the limit ended a job that had stopped; with
    nothing proving why it stopped, the answer says so (inconclusive, low), not a confident `cancelled`."""
    d = _investigate(tmp_path, {"slurm-5521818.out": _stepping_until(1) + [LIMIT]})
    assert d.status == Status.inconclusive and d.confidence == "low", d.headline
    assert "stopped making progress" in d.headline, d.headline


def _entry(rank: int, when: str, code: int, pid: int, tb: str) -> list[str]:
    """One torchrun failure entry (torch/distributed/elastic/multiprocessing/errors: ChildFailedError's table)."""
    return ["[0]:", f"  time      : {when}", "  host      : gpu-node-20", f"  rank      : {rank} (local_rank: 0)",
            f"  exitcode  : {code} (pid: {pid})", "  error_file: <N/A>", f"  traceback : {tb}"]


def test_an_undated_error_is_dated_by_its_ranks_exit_in_the_failure_entry(tmp_path):
    """Rank 40's I/O error has no stamp; torchrun's entry says rank 40 exited at 12:00:01. A SIGKILL of rank 3 at
    12:00:30 came later: the I/O error is the first fault, not the kill."""
    io = ["[default0]:[rank40]: Traceback (most recent call last):",
          '[default0]:[rank40]:   File "/workspace/train.py", line 412, in save',
          "[default0]:[rank40]:     torch.save(state, path)",
          "[default0]:[rank40]: OSError: [Errno 5] Input/output error: '/lustre/ckpt/run7/step_12000/rank40.pt'"]
    d = _investigate(tmp_path, {
        "node20.out": io + [
            "[default1]:[rank41]:[E319 12:10:02.115541639 ProcessGroupNCCL.cpp:632] [Rank 41] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600083 milliseconds before timing out.",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                            "Root Cause (first observed failure):"]
        + _entry(40, "2025-03-19_12:00:01", 1, 70280, "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"),
        "node1.out": ["E0319 12:00:30.771000 30011 torch/distributed/elastic/multiprocessing/api.py:869] failed "
                      "(exitcode: -9) local_rank: 3 (pid: 70034) of binary: /usr/bin/python",
                      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                      "Root Cause (first observed failure):"]
        + _entry(3, "2025-03-19_12:00:30", -9, 70034, "Signal 9 (SIGKILL) received by PID 70034")})
    assert d.category == "storage_io" and d.culprit_ranks == [40], d.headline


def test_ib_flush_errors_alone_follow_another_ranks_death(tmp_path):
    """Status 5 (IBV_WC_WR_FLUSH_ERR) only: the queue pair was already in error because its peer's process died;
    that rank's own OOM, undated, is the trigger."""
    flush = ("gpu-f01:6100:6180 [0] transport/net_ib.cc:2449 NCCL WARN NET/IB: Got completion from peer "
             "10.18.7.2<44000> with status=5 opcode=0 len=0 vendor err 249 (Recv) hca mlx5_0")
    d = _investigate(tmp_path, {"gpu-f01.log": ["[2024-11-05 09:14:02] " + flush],
                                "gpu-f02.log": [x.replace("rank2", "rank11") for x in OOM]})
    assert d.category == "oom" and d.culprit_ranks == [11], d.headline


def test_a_socket_close_on_a_node_whose_clock_lags_is_the_schedulers_kill(tmp_path):
    """Slurm's time limit at 10:00:00; the other node, its clock 90 s behind, logs its peer's socket reset at
    09:58:30: within the clocks' skew of the kill, the close is the teardown the kill caused."""
    d = _investigate(tmp_path, {
        "slurm-88240.out": [
            "slurmstepd: error: *** JOB 88240 ON gpu-node-00 CANCELLED AT 2025-03-19T10:00:00 DUE TO TIME LIMIT ***"],
        "node1.out": [
            "[2025-03-19 09:58:30] gpu-node-01:40199:40330 [5] misc/socket.cc:50 NCCL WARN socketProgress: "
            "Connection closed by remote peer gpu-node-00<51822>"]})
    assert d.category == "infrastructure", d.headline


def test_undated_socket_closes_just_above_a_preemption_banner_are_its_teardown(tmp_path):
    """srun's labelled console with no times on the tasks' lines: task 5's `Connection closed by remote peer` and its
    NCCL error sit just above slurmstepd's preemption banner in the same file. The preemption closed every socket:
    the closes are its teardown, not the fabric."""
    lines = [f" {r}: [rank{r}]: step 4100 loss 1.93" for r in range(8)] + [
        " 5: gpu-node-10:51205:51377 [1] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-node-09<41725>",
        " 5: [rank5]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5",
        "slurmstepd: error: *** STEP 77121.0 ON gpu-node-09 CANCELLED AT 2024-11-05T03:00:12 DUE TO PREEMPTION ***",
        "srun: error: gpu-node-09: tasks 0-3: Terminated"]
    d = _investigate(tmp_path, {"slurm-77121.out": lines})
    assert d.category == "infrastructure", d.headline


# two ranks on different nodes get TCP resets from each other mid-run (their own NCCL errors, 11:21), the others time
# out ten minutes later; rank 8 printed nothing but its start-up line (a log that stops: no state of its own)
RESET_MID_RUN = """ 0: gke-a2-0:410:480 [0] NCCL INFO Using network Socket
 8: gke-a2-1:418:488 [0] NCCL INFO Using network Socket
 0: [2025-04-02 11:00:00] step 15000 loss 2.200
 0: [2025-04-02 11:05:00] step 15250 loss 2.190
 0: [2025-04-02 11:10:00] step 15500 loss 2.180
 0: [2025-04-02 11:15:00] step 15750 loss 2.170
 6: gke-a2-0:416:526 [6] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from 10.128.0.52<43611> failed : Connection reset by peer
 6: [rank6]:[E402 11:21:16.958706123 ProcessGroupNCCL.cpp:1804] [Rank 6] Collective WorkNCCL(SeqNum=16210, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
 6: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
 6: Last error:
 6: socketProgressOpt: Call to recv from 10.128.0.52<43611> failed : Connection reset by peer
 6: Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027 (most recent call first):
14: gke-a2-1:424:534 [6] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from 10.128.0.51<39102> failed : Connection reset by peer
14: [rank14]:[E402 11:21:14.889584185 ProcessGroupNCCL.cpp:1804] [Rank 14] Collective WorkNCCL(SeqNum=16210, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
14: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
14: Last error:
14: socketProgressOpt: Call to recv from 10.128.0.51<39102> failed : Connection reset by peer
14: Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027 (most recent call first):
 0: [rank0]:[E402 11:31:12.339934329 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=16210, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) ran for 600025 milliseconds before timing out.
 0: [rank0]:[E402 11:31:12.320532352 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 16210, last enqueued NCCL work: 16210, last completed NCCL work: 16209.
 0: [rank0]:[E402 11:31:12.915160666 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
 0: [rank0]:[E402 11:31:12.780002346 ProcessGroupNCCL.cpp:636] [Rank 0] To avoid data inconsistency, we are taking the entire process down.
 9: [rank9]:[E402 11:31:12.054120657 ProcessGroupNCCL.cpp:616] [Rank 9] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=16210, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.
 9: [rank9]:[E402 11:31:12.512440385 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 9] Exception (either an error or timeout) detected by watchdog at work: 16210, last enqueued NCCL work: 16210, last completed NCCL work: 16209.
 9: [rank9]:[E402 11:31:12.420216518 ProcessGroupNCCL.cpp:630] [Rank 9] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
 9: [rank9]:[E402 11:31:12.969155452 ProcessGroupNCCL.cpp:636] [Rank 9] To avoid data inconsistency, we are taking the entire process down.
srun: error: gke-a2-0: tasks 0-7: Aborted (core dumped)
srun: error: gke-a2-1: tasks 8-15: Aborted (core dumped)
"""


def test_a_rank_with_no_lines_is_no_earlier_trigger_than_the_resets_and_no_death(tmp_path):
    """The straggler reading of a rank with no state (rank 8) neither comes "first" for being printed early in the
    file (its line is what it did last, not when the failure began) nor makes the resets its consequence (a hung rank
    closes no socket): the resets between ranks 6 and 14 are the fault."""
    d = _investigate(tmp_path, {"slurm-4411.out": RESET_MID_RUN.rstrip("\n").split("\n")})
    assert d.category == "network" and d.culprit_ranks == [6, 14], d.headline


def test_ranks_that_log_rarely_and_together_were_still_stepping_at_the_limit(tmp_path):
    """Guard: four ranks log every 40 minutes within a second of each other; the limit comes 35 minutes after their
    last step: a job that was stepping (the interval is one series' own, never two ranks' offset)."""
    lines = []
    for i in range(8):
        h, m = divmod(i * 40, 60)
        lines += [f"{r}: [2024-11-18 {h:02d}:{m:02d}:1{r},100][INFO] step {100 * i} loss=1.80 s/it=24.00" for r in range(4)]
    d = _investigate(tmp_path, {"slurm-5521818.out": lines + [
        "slurmstepd: error: *** JOB 5521818 ON gpu-t04 CANCELLED AT 2024-11-18T05:15:02 DUE TO TIME LIMIT ***"]})
    assert d.status == Status.cancelled and d.confidence == "high", d.headline


def _init(host: str, pid: int, rank: int) -> str:
    return (f"{rank}: {host}:{pid}:{pid} [{rank % 8}] NCCL INFO comm 0x55d3c8a7b600 rank {rank} nranks 16 cudaDev "
            f"{rank % 8} nvmlDev {rank % 8} busId 18000 commId 0x7b1c2a3e4f5d6a7b - Init COMPLETE")


def test_a_requeued_job_is_answered_by_its_last_attempt(tmp_path):
    """`sbatch --requeue` appends every attempt to one slurm-<job>.out. The time limit that ended the first attempt
    is not the job's end when the file shows the job starting again (Lightning's members registering, its resume
    from the checkpoint) and the requeued run's own end line; a node failure that ended the first attempt is not the
    cause of the second attempt's own failure (a data shard missing on rank 9: data, TAXONOMY)."""
    (tmp_path / "a").mkdir()
    d = _investigate(tmp_path / "a", {"slurm-6600917.out": [
        "0: Epoch 6:   48%|####      | 610/1250 [11:32<00:10, 0.88it/s, v_num=0, train_loss=0.870]",
        "slurmstepd: error: *** JOB 6600917 ON gpu-node-61 CANCELLED AT 2025-04-02T06:00:04 DUE TO TIME LIMIT ***",
        "0: [rank: 0] Received SIGTERM: 15",
        "0: Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4",
        "0: Restoring states from the checkpoint path at /scratch/vit/last.ckpt",
        "0: Epoch 9:  100%|##########| 1250/1250 [23:41<00:10, 0.88it/s, v_num=0, train_loss=0.750]",
        "0: `Trainer.fit` stopped: `max_epochs=10` reached."]})
    assert (d.status.value, d.category) == ("completed", "none"), d.headline
    assert "requeued" in d.headline
    (tmp_path / "b").mkdir()
    d = _investigate(tmp_path / "b", {"slurm-3150021.out": [
        _init("gpu-node-50", 2200, 0), _init("gpu-node-51", 2209, 9),
        "srun: error: Node failure on gpu-node-51",
        "slurmstepd: error: *** JOB 3150021 ON gpu-node-50 CANCELLED AT 2024-12-01T03:02:17 DUE TO NODE FAILURE, "
        "SEE SLURMCTLD LOG FOR DETAILS ***",
        _init("gpu-node-52", 2250, 0), _init("gpu-node-53", 2259, 9),
        "9: [rank9]: FileNotFoundError: [Errno 2] No such file or directory: "
        "'/lustre/data/pile/train-00417-of-01024.bin'",
        "srun: error: gpu-node-53: task 9: Exited with exit code 1"]})
    assert (d.category, d.culprit_ranks) == ("data", [9]), d.headline


# -- guards from the read of this change (each input once flipped the answer; now it must not) -----------------------
def test_nccl_s_abort_lines_after_a_kill_are_no_new_start(tmp_path):
    """NCCL's `... - Abort COMPLETE` after a preemption is the kill's teardown (same fields as an init line), not the
    job starting again: the preemption stays the answer, not the DataLoader error its SIGTERM caused."""
    lines = [_init("gpu-node-50", 2200 + r, r) for r in range(4)] + [f"{r}: [rank{r}]: iteration 100 | loss 1.93"
                                                                     for r in range(4)] + [
        "slurmstepd: error: *** STEP 3150021.0 ON gpu-node-50 CANCELLED AT 2024-12-01T03:13:17 DUE TO PREEMPTION ***",
        "3: [rank3]: RuntimeError: DataLoader worker (pid(s) 41234) exited unexpectedly"] + [
        f"{r}: gpu-node-50:{2200 + r}:{2300 + r} [{r}] NCCL INFO comm 0x55d3c8a7b600 rank {r} nranks 16 cudaDev {r} "
        "busId 18000 - Abort COMPLETE" for r in range(4)] + ["srun: error: gpu-node-50: tasks 0-3: Terminated"]
    d = _investigate(tmp_path, {"slurm-3150021.out": lines})
    assert d.category == "infrastructure", d.headline


def test_a_close_whose_task_had_exited_before_the_kill_is_no_teardown(tmp_path):
    """srun said task 5 exited on its own (`Exited with exit code 1`) before the time limit's banner: its socket
    close and NCCL error came first and are the fault, not the kill's teardown."""
    lines = [f" {r}: [rank{r}]: step 4100 loss 1.93" for r in range(8)] + [
        " 5: gpu-node-10:51205:51377 [1] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-node-09<41725>",
        " 5: [rank5]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5",
        "srun: error: gpu-node-10: task 5: Exited with exit code 1",
        "slurmstepd: error: *** STEP 77121.0 ON gpu-node-09 CANCELLED AT 2024-11-05T03:00:12 DUE TO TIME LIMIT ***",
        "srun: error: gpu-node-09: tasks 0-4,6-7: Terminated"]
    d = _investigate(tmp_path, {"slurm-77121.out": lines})
    assert d.category == "network", d.headline


def test_another_job_s_sacct_row_or_another_node_s_sinfo_row_is_not_this_job_s(tmp_path):
    """A `sacct -u $USER` listing holds other jobs' rows (TIMEOUT, OUT_OF_ME+) and `sinfo -R` the whole cluster's
    down nodes: only this job's (its id from its output's name, its nodes) count; the job's own KeyError stays."""
    d = _investigate(tmp_path, {
        "sacct.txt": ["JobID           JobName  Partition    Account  AllocCPUS      State ExitCode",
                      "5530911           vit-l14       a100     vision         64    TIMEOUT      0:0",
                      "5530912             bert       a100     vision         64 OUT_OF_ME+    0:125",
                      "5530913            sft-7       a100     vision         64     FAILED      1:0"],
        "sinfo_R.txt": ["REASON               USER      TIMESTAMP           NODELIST",
                        "Not responding       slurm     2025-03-01T02:11:09 gpu-h032"],
        "slurm-5530913.out": ["2: [rank2]: KeyError: 'input_ids'", "srun: error: gpu-e001: task 2: Exited with exit code 1"]})
    assert d.category == "software", d.headline


def test_of_two_equally_strong_undated_faults_the_one_printed_first_is_the_trigger(tmp_path):
    """One node's container never started (pyxis printed the enroot hook's error for its tasks, at the top of the
    job's output); half an hour later rank 0's TCPStore gave up waiting for that node's ranks. Neither line has a
    time: the file's order says which came first."""
    pyxis = [f"{t}: slurmstepd: error: pyxis: container start failed with error code: 1" for t in (16, 19)] + [
        f"{t}: slurmstepd: error: pyxis:     nvidia-container-cli: initialization error: nvml error: driver/library "
        "version mismatch" for t in (16, 19)]
    d = _investigate(tmp_path, {"slurm-551201.out": pyxis + [
        " 0: Traceback (most recent call last):",
        ' 0:   File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 189, in '
        "_create_c10d_store",
        " 0: torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 24/32 clients joined.",
        "srun: error: gpu-c03: task 0: Exited with exit code 1",
        "slurmstepd: error: *** STEP 551201.0 ON gpu-c03 CANCELLED AT 2025-09-02T08:36:33 ***",
        "srun: error: gpu-c05: tasks 16-23: Exited with exit code 1"]})
    assert d.category == "infrastructure", d.headline
    assert "gpu-c05" in d.culprit_nodes, d.headline


def _ds_sigterm(rank_failed_first: bool) -> dict[str, list[str]]:
    """A two-node DeepSpeed job through pdsh: w-2's launcher logs the SIGTERM it got (printed only when none of its
    own workers had failed), and w-1's ranks then see w-2's sockets close, undated under that line's time."""
    first = ["w-1: [2025-01-27 10:32:10,001] [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
             "4.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.02 GiB is free."] if rank_failed_first else []
    return {"pdsh_console.log": ["w-1: [2025-01-27 10:30:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=3100, "
                                 "skipped=0, lr=[0.0001]"] + first + [
        "w-2: [2025-01-27 10:32:12,062] [INFO] [launch.py:328:sigkill_handler] Main process received SIGTERM, exiting",
        "w-1: w-1:9120:9251 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "w-2.internal<43000>",
        "w-1: w-1:9138:9269 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "w-2.internal<43393>"]}


def test_a_launcher_signalled_from_outside_before_its_peers_sockets_closed_is_the_trigger(tmp_path):
    d = _investigate(tmp_path, _ds_sigterm(False))
    assert d.category == "infrastructure" and "DeepSpeed launcher received SIGTERM" in d.headline, d.headline


def test_a_launcher_s_sigterm_after_a_rank_failed_is_not_the_trigger(tmp_path):
    """A rank of the other node ran out of memory first: the SIGTERM is what stopping the job looked like."""
    d = _investigate(tmp_path, _ds_sigterm(True))
    assert d.category == "oom" and "received SIGTERM" not in d.headline, d.headline


def test_torch_s_warning_that_cuda_did_not_initialise_explains_the_loud_error_after_it(tmp_path):
    """A broken driver stack: torch.cuda warns that cuInit said `unknown error` and sees no GPU, and the Trainer's fp16
    check then raises a ValueError about devices. The warning is the fault (gpu_cuda), the ValueError what followed."""
    d = _investigate(tmp_path, {"paste.txt": [
        "/home/u/env/lib/python3.10/site-packages/torch/cuda/__init__.py:141: UserWarning: CUDA initialization: CUDA "
        "unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable "
        "CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. (Triggered internally at "
        "../c10/cuda/CUDAFunctions.cpp:108.)",
        "  return torch._C._cuda_getDeviceCount() > 0",
        "Traceback (most recent call last):",
        '  File "/home/u/ft/train.py", line 88, in <module>',
        "    args = TrainingArguments(output_dir=out, fp16=True)",
        "ValueError: FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation "
        "(`--fp16_full_eval`) can only be used on CUDA or NPU devices or certain XPU devices (with IPEX)."]})
    assert d.category == "gpu_cuda", d.headline
