"""Where the logs stop is evidence (issue 10, mechanisms 1 and 4): a job whose every log stops while NCCL is still
connecting its ranks hung in the bootstrap/transport setup (NCCL prints no error for a connection that waits
forever), and that says `network`, weakly, with the hosts named; the same lines followed by a ready communicator
and training are not that story."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate

SETUP = ["{h}:{p}:{p} [{d}] NCCL INFO Bootstrap : Using eth0:10.1.4.{d}<0>",
         "{h}:{p}:{p} [{d}] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
         "{h}:{p}:{p} [{d}] NCCL INFO NET/IB : No device found.",
         "{h}:{p}:{p} [{d}] NCCL INFO NET/Socket : Using [0]eth0:10.1.4.{d}<0>"]
READY = "{h}:{p}:{p} [{d}] NCCL INFO comm 0x55d0c8a0 rank {d} nranks 2 cudaDev {d} busId 1000 - Init COMPLETE"


def _write(tmp_path, extra: list[str]):
    for d, pid in ((0, 4410), (1, 4411)):
        lines = ["epoch 0: building model", "NCCL version 2.18.5+cuda12.2"]
        lines += [x.format(h="trn-a17", p=pid, d=d) for x in SETUP + extra]
        (tmp_path / f"rank_{d}.log").write_text("\n".join(lines) + "\n")


def test_every_log_stopping_in_nccl_setup_points_at_the_network(tmp_path):
    _write(tmp_path, [])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "network" and d.status == Status.inconclusive and d.confidence == "low", d.headline
    assert d.culprit_nodes == ["trn-a17"]
    assert {e.file for e in d.chain[0].evidence} == {"rank_0.log", "rank_1.log"} and d.verified
    assert any("NCCL_SOCKET_IFNAME" in r for r in d.recommendations)


def test_a_communicator_that_came_up_is_not_a_setup_hang(tmp_path):
    _write(tmp_path, [READY, "step 1 loss 2.31"])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "none" and d.status == Status.inconclusive, d.headline


def test_one_log_still_in_setup_while_another_trains_is_not_that_story(tmp_path):
    _write(tmp_path, [])
    with (tmp_path / "rank_1.log").open("a") as fh:
        fh.write("step 1 loss 2.31\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category != "network", d.headline


# --- the ranks not seen waiting (tools/rules/network.not_seen_waiting) ------------------------------------------
# A paste of watchdog timeouts is the waiting ranks' lines: the rank they waited for, busy elsewhere (rank 0 scanning
# a dataset, evaluating, saving), printed none. c10's own wording (torch 1.x ProcessGroupNCCL), one line per rank.
TIMEOUT = ("[E ProcessGroupNCCL.cpp:567] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=60000) ran for 67438 milliseconds before timing out.")


def _paste(tmp_path, ranks: list[int], extra: dict[int, list[str]] | None = None):
    lines = []
    for r in ranks:
        lines += (extra or {}).get(r, [])
        lines.append(TIMEOUT.format(r=r))
    (tmp_path / "combined.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


def test_the_one_rank_below_the_highest_that_printed_no_timeout_is_named_weakly(tmp_path):
    d = _paste(tmp_path, [1, 2, 3])
    assert d.culprit_ranks == [0], d.headline
    assert d.status == Status.inconclusive and d.confidence == "low"
    assert "rank(s) 0 printed nothing here" in d.chain[0].summary
    assert any("rank(s) 0" in r for r in d.recommendations)


def test_more_absent_ranks_than_present_ones_name_nobody(tmp_path):
    d = _paste(tmp_path, [2, 3])  # 0 and 1 absent: half a paste, no lead
    assert d.culprit_ranks == [], d.headline


def test_a_rank_that_did_something_else_is_the_story_not_the_absent_one(tmp_path):
    crash = ["[rank2]: Traceback (most recent call last):", "[rank2]: ValueError: bad sample in shard 17"]
    d = _paste(tmp_path, [1, 2, 3], {2: crash})
    assert 0 not in d.culprit_ranks, d.headline


# NCCL's socket connect error (misc/socket.cc socketStartConnect; older include/socket.h without the function name)
_NCCL_SYS = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333,"
             " unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6")


def _connect_failed(tmp_path, peer: str, errno_text: str, extra: list[str] = ()):
    (tmp_path / "node1.log").write_text("\n".join([
        "trn-b02:5120:5120 [0] NCCL INFO Bootstrap : Using eth0:10.1.4.2<0>",
        *extra,
        _NCCL_SYS,
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        f"socketStartConnect: Connect to {peer}<52822> failed : {errno_text}"]) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


def test_no_route_while_nccl_sets_up_is_the_address_it_chose(tmp_path):
    """No route to the peer before any communicator came up: the interface or address NCCL picked (config), with
    NCCL_SOCKET_IFNAME the first advice; the peer is not blamed."""
    d = _connect_failed(tmp_path, "192.168.19.14", "No route to host")
    assert d.category == "config" and d.chain[0].id == "config.unroutable_address", d.headline
    assert d.culprit_nodes == [] and any("NCCL_SOCKET_IFNAME" in r for r in d.recommendations)


def test_a_peer_reached_at_the_docker_bridge_address_was_given_the_wrong_interface(tmp_path):
    d = _connect_failed(tmp_path, "172.17.0.1", "Connection refused")
    assert d.category == "config" and "Docker" in d.chain[0].summary, d.headline


def test_a_refused_connect_to_a_routable_peer_stays_the_network_reading(tmp_path):
    """Refused by a real address: the peer's process, its port or its link; not this reading."""
    d = _connect_failed(tmp_path, "10.1.4.7", "Connection refused")
    assert d.category == "network" and d.chain[0].id == "network.socket", d.headline


def test_no_route_after_the_communicator_came_up_is_the_network(tmp_path):
    """The path existed (a communicator completed) and then broke: the network's."""
    d = _connect_failed(tmp_path, "192.168.19.14", "No route to host",
                        ["trn-b02:5120:5120 [0] NCCL INFO comm 0x55d0c8a0 rank 1 nranks 2 cudaDev 0 busId 1000 - "
                         "Init COMPLETE"])
    assert d.category == "network", d.headline
