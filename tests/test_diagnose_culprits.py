"""Culprit precision (issue 10, mechanism 5): the culprit's node is named wherever the bundle states it, and only
there. NCCL's communicator-init line states the host of rank R of a communicator; for the communicator of the whole
world that is global rank R, for a smaller group it is not."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate

OOM = ("[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {d} has a total "
       "capacity of 79.10 GiB of which 1.23 GiB is free.")


def _node_file(tmp_path, name: str, host: str, first: int, nranks: int, extra: list[str] = ()):
    lines = [f"{host}:{4000 + d}:{4100 + d} [{d}] NCCL INFO ncclCommInitRank comm 0x7f{d:02x} rank {first + d} "
             f"nranks {nranks} cudaDev {d} nvmlDev {d} busId {d}1000 commId 0xabc - Init COMPLETE" for d in range(4)]
    (tmp_path / name).write_text("\n".join(lines + list(extra)) + "\n")


def test_the_culprit_node_comes_from_the_world_communicator_init_line(tmp_path):
    _node_file(tmp_path, "job.part-a.txt", "trn-r3-12", 0, 8)
    _node_file(tmp_path, "job.part-b.txt", "trn-r3-13", 4, 8, [OOM.format(r=6, d=2)])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [6] and d.culprit_nodes == ["trn-r3-13"], d.headline


def test_a_subgroup_rank_number_is_not_a_global_rank(tmp_path):
    """Tensor-parallel groups of 4: `rank 2 nranks 4` on trn-r3-12 says nothing about global rank 2's host."""
    _node_file(tmp_path, "tp.txt", "trn-r3-12", 0, 4)
    (tmp_path / "rank_2.log").write_text("".join(f"[rank{r}]: step 10\n" for r in range(8)) + OOM.format(r=2, d=2) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [2] and d.culprit_nodes == [], d.headline


ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_hardware_fault_with_no_host_anywhere_asks_for_the_node(tmp_path):
    """A bare paste: the category is certain, the node is not in it. The answer names no node and asks for one."""
    (tmp_path / "paste.log").write_text(ECC + "\nCUDA kernel errors might be asynchronously reported at some other "
                                              "API call, so the stacktrace below might be incorrect.\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "gpu_cuda" and d.culprit_nodes == [], d.headline
    assert any("no line in the bundle names a host" in m for m in d.missing), d.missing


def test_a_hardware_fault_on_a_named_host_does_not_ask_for_it(tmp_path):
    _node_file(tmp_path, "job.part-a.txt", "trn-r3-12", 0, 4, [f"[rank2]: {ECC}"])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "gpu_cuda" and d.culprit_nodes == ["trn-r3-12"], d.headline
    assert not any("names a host" in m for m in d.missing), d.missing


IB_WARN = ("{host}:{pid}:{tid} [{d}] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer "
           "10.44.2.19<51161> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.44.2.12 "
           "remoteGids::ffff:10.44.2.19 hca mlx5_4")


def _timeouts(ranks) -> list[str]:
    return [f"[rank{r}]:[E1105 14:40:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            f"for 600010 milliseconds before timing out." for r in ranks]


def test_an_ib_error_names_the_rank_whose_process_printed_it_by_its_nccl_init_line(tmp_path):
    """NCCL's WARN has no rank prefix, only `host:pid`: the world communicator's init line of that pid on that host
    names the rank (the other node runs the same pid for another rank)."""
    _node_file(tmp_path, "node0.txt", "gpu-c00", 0, 8, _timeouts([0, 1]))
    _node_file(tmp_path, "node1.txt", "gpu-c01", 4, 8, [IB_WARN.format(host="gpu-c01", pid=4002, tid=4402, d=2)]
               + _timeouts([4]))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "network" and d.culprit_ranks == [6] and d.culprit_nodes == ["gpu-c01"], d.headline


def test_an_ib_error_that_a_rank_quotes_as_its_last_error_is_that_ranks(tmp_path):
    """c10d prints NCCL's last error under the rank's `remote process exited or there was a network error`: the WARN
    line that says it word for word is that rank's process's own, with no init line at all."""
    warn = IB_WARN.format(host="gpu-c02", pid=120417, tid=121002, d=4)
    (tmp_path / "node2.log").write_text("\n".join([
        "[2025-11-05 14:29:58] " + warn,
        "[rank12]:[E1105 14:29:58.441022101 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 12] Process "
        "group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.21.5",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "Last error:", warn.split("NCCL WARN ", 1)[1]] + _timeouts([3, 9])) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "network" and d.culprit_ranks == [12], d.headline


def test_ib_errors_from_two_ranks_name_no_rank(tmp_path):
    """Guard: two ranks that each saw the link fail first-hand: the hosts are the suspects, not one rank."""
    _node_file(tmp_path, "node0.txt", "gpu-c00", 0, 8, [IB_WARN.format(host="gpu-c00", pid=4001, tid=4401, d=1)])
    _node_file(tmp_path, "node1.txt", "gpu-c01", 4, 8, [IB_WARN.format(host="gpu-c01", pid=4002, tid=4402, d=2)])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "network" and d.culprit_ranks == [], d.headline


def test_the_kernels_oom_victim_is_the_rank_whose_dataloader_worker_it_was(tmp_path):
    """The kernel names a pid; the rank that printed `DataLoader worker (pid P) is killed` owned that worker."""
    (tmp_path / "dmesg.txt").write_text(
        "[Tue Nov  5 10:21:38 2024] pt_main_thread invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
        "order=0, oom_score_adj=0\n"
        "[Tue Nov  5 10:21:38 2024] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,"
        "global_oom,task_memcg=/user.slice,task=pt_data_worker,pid=48211,uid=1000\n"
        "[Tue Nov  5 10:21:38 2024] Out of memory: Killed process 48211 (pt_data_worker) total-vm:98234112kB, "
        "anon-rss:61234080kB, file-rss:81920kB, shmem-rss:2048kB, UID:1000 pgtables:121344kB oom_score_adj:0\n")
    (tmp_path / "console.txt").write_text("\n".join(
        [f"[default{r}]:[rank{r}]: step 100 loss 2.1" for r in range(4)]
        + ["[default2]:[rank2]: RuntimeError: DataLoader worker (pid 48211) is killed by signal: Killed. "]) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [2], d.headline


def test_the_rank_that_waited_for_the_rendezvous_is_not_its_culprit(tmp_path):
    """`4/8 clients joined` is printed by the store's host, the side that waited: the members that never joined are
    at fault, and the line does not say which."""
    (tmp_path / "n1.log").write_text(
        "[rank0]: torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 4/8 clients "
        "joined.\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "config" and d.culprit_ranks == [], d.headline


def test_ib_errors_of_many_nodes_toward_one_peer_name_the_peers_host(tmp_path):
    """Every other node's queue pair to one address failed: the host that bootstrapped on that address is the
    suspect, not the fifteen reporters."""
    for n in range(4):
        lines = [f"gpu-node-0{n}:4{n}000:4{n}000 [0] NCCL INFO Bootstrap : Using ib0:10.10.{n}.10<0>"]
        if n != 3:
            lines += [f"gpu-node-0{n}:4{n}000:4{n}131 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion "
                      f"from peer 10.10.3.10<4639{n}> with status=12 opcode=0 len=0 vendor err 129 (Send)"]
        (tmp_path / f"node{n}.out").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "network" and d.culprit_nodes == ["gpu-node-03"], d.headline
