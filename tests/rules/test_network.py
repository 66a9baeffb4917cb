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
