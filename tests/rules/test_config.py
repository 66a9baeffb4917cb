"""Printed settings are checked (tools/rules/config.py, tools/sources/env.py): a misspelt NCCL/TORCH variable, an
interface the logs show missing, a timeout left at its default while a long phase outlasted it. Small realistic
bundles, written to disk and run through the real pipeline; plus the false alarms each check must not raise."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.diagnose import candidates
from trainlog_debugger.tools.investigation import Investigation
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.sources.pytorch.collectives import analyze


def _write(tmp_path, files: dict[str, list[str]]):
    d = tmp_path / "bundle"
    d.mkdir(exist_ok=True)
    for name, lines in files.items():
        (d / name).write_text("\n".join(lines) + "\n")
    return d


def _diagnose(tmp_path, files):
    with open_bundle(_write(tmp_path, files)) as b:
        return investigate(b)


def _candidates(tmp_path, files):
    with open_bundle(_write(tmp_path, files)) as b:
        scan = scan_bundle(b)
    return candidates(RuleInputs(Investigation(scan=scan, nccl=analyze(scan))))


H = "node1:2345:2345 [0] NCCL INFO "
# a realistic `env | grep -E 'NCCL|TORCH'` dump: every name here is a real NCCL or PyTorch variable
REAL_ENV = ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET", "NCCL_SOCKET_IFNAME=^docker,lo,veth", "NCCL_IB_HCA=mlx5_0,mlx5_1",
            "NCCL_IB_GID_INDEX=3", "NCCL_IB_TIMEOUT=22", "NCCL_IB_RETRY_CNT=7", "NCCL_IB_QPS_PER_CONNECTION=2",
            "NCCL_NET_GDR_LEVEL=PHB", "NCCL_CROSS_NIC=0", "NCCL_ALGO=Ring,Tree", "NCCL_PROTO=Simple",
            "NCCL_MIN_NCHANNELS=4", "NCCL_BUFFSIZE=8388608", "NCCL_P2P_LEVEL=NVL", "NCCL_NVLS_ENABLE=0",
            "NCCL_CUMEM_ENABLE=0", "NCCL_NET_PLUGIN=none", "NCCL_TUNER_PLUGIN=libnccl-tuner.so",
            "NCCL_TOPO_FILE=/etc/nccl/topo.xml", "NCCL_IGNORE_CPU_AFFINITY=1", "NCCL_ASYNC_ERROR_HANDLING=1",
            "NCCL_BLOCKING_WAIT=0", "NCCL_OFI_NIC_DUP_CONNS=4", "TORCH_NCCL_ASYNC_ERROR_HANDLING=3",
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "TORCH_NCCL_DUMP_ON_TIMEOUT=1", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=600",
            "TORCH_NCCL_ENABLE_MONITORING=1", "TORCH_NCCL_AVOID_RECORD_STREAMS=1", "TORCH_DISTRIBUTED_DEBUG=DETAIL",
            "GLOO_SOCKET_IFNAME=eth0"]

SOCKET_FAILURE = [
    H + "NCCL version 2.21.5+cuda12.4",
    H + "Bootstrap : Using docker0:172.17.0.1<0>",
    H + "NET/Socket : Using [0]docker0:172.17.0.1<0> [1]veth12ab:fe80::1%veth12ab<0>",
    "node1:2345:2400 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.17.0.3<44313> failed : "
    "Software caused connection abort",
    "node1:2345:2400 [0] NCCL INFO misc/socket.cc:565 -> 2",
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
]
OOM = ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.88 GiB memory in use."]


def test_a_misspelt_interface_variable_then_a_socket_failure_is_config(tmp_path):
    d = _diagnose(tmp_path, {"rank_0.log": ["+ export NCCL_DEBUG=INFO", "+ export NCCL_SOCKET_IFNAM=ib0",
                                            "+ export NCCL_IB_DISABLE=1"] + SOCKET_FAILURE})
    assert d.category == "config", d.headline
    assert "NCCL_SOCKET_IFNAM=ib0" in d.headline and "did you mean NCCL_SOCKET_IFNAME" in d.headline
    assert any("rename NCCL_SOCKET_IFNAM to NCCL_SOCKET_IFNAME" in r for r in d.recommendations)
    assert d.verified


def test_a_misspelt_variable_does_not_outrank_an_unrelated_crash(tmp_path):
    d = _diagnose(tmp_path, {"rank_0.log": ["NCCL_SOCKET_IFNAM=ib0", "NCCL_DEBUG=INFO", "[rank0]: step 10 loss 2.31"] + OOM})
    assert d.category == "oom", d.headline
    weak = [c for c in _candidates(tmp_path, {"rank_0.log": ["NCCL_SOCKET_IFNAM=ib0"] + OOM})
            if c.rule == "config.unknown_variable"]
    assert weak and all(c.strength < 0.5 for c in weak) and "NCCL_SOCKET_IFNAME" in weak[0].summary


def test_a_long_dump_of_real_variables_raises_no_config_claim(tmp_path):
    files = {"rank_0.log": REAL_ENV + [H + "NCCL_SOCKET_IFNAME set by environment to ^docker,lo,veth",
                                       H + "NET/Socket : Using [0]eth0:10.0.0.1<0>",
                                       "mpirun -x NCCL_DEBUG=INFO -x NCCL_IB_HCA=mlx5_0 -np 16 python train.py"]
             + SOCKET_FAILURE[3:] + OOM}
    assert [c.rule for c in _candidates(tmp_path, files) if c.category == "config"] == []


def test_nothing_is_said_about_variables_on_a_run_that_did_not_fail(tmp_path):
    cands = _candidates(tmp_path, {"rank_0.log": ["NCCL_SOCKET_IFNAM=ib0", "NCCL_TIMEOUT=3600", "[rank0]: step 10 loss 2.31"]})
    assert not [c for c in cands if c.rule.startswith("config.")]


def test_nccl_timeout_is_named_as_read_by_nothing_but_stays_weak(tmp_path):
    wd = ("[rank1]:[E1105 12:14:45.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
          "timeout: WorkNCCL(SeqNum=67, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
          "milliseconds before timing out.")
    cands = [c for c in _candidates(tmp_path, {"rank_1.log": ["NCCL_TIMEOUT=3600", wd]}) if c.category == "config"]
    assert len(cands) == 1 and cands[0].strength < 0.5 and "init_process_group" in cands[0].summary


def test_the_printed_interface_that_does_not_exist_is_named(tmp_path):
    d = _diagnose(tmp_path, {"rank_0.log": ["NCCL_SOCKET_IFNAME=eth9", H + "NCCL_SOCKET_IFNAME set by environment to eth9",
                                            "node1:2345:2400 [0] transport/net_socket.cc:61 NCCL WARN NET/Socket : no "
                                            "interface found"]})
    assert d.category == "config" and "NCCL_SOCKET_IFNAME=eth9" in d.headline, d.headline


def test_gloo_interface_that_does_not_exist(tmp_path):
    d = _diagnose(tmp_path, {"rank_0.log": ["GLOO_SOCKET_IFNAME=eth1", "[rank0]: Traceback (most recent call last):",
                                            '[rank0]:   File "train.py", line 12, in <module>',
                                            "[rank0]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/"
                                            "tcp/device.cc:83] ifa != nullptr. Unable to find address for: eth1"]})
    assert d.category == "config" and "GLOO_SOCKET_IFNAME=eth1" in d.headline, d.headline


def test_a_printed_interface_that_nccl_did_not_use_before_a_socket_failure(tmp_path):
    d = _diagnose(tmp_path, {"rank_0.log": ["NCCL_SOCKET_IFNAME=ib0"] + SOCKET_FAILURE})
    assert d.category == "config" and "did not reach" in d.headline, d.headline


# -- the default timeout and a long phase ------------------------------------------------------------------------

def _wd(rank: int, ms: int = 600000, t: str = "12:14:45") -> str:
    return (f"[rank{rank}]:[E1105 {t}.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={ms}) ran "
            f"for {ms + 31} milliseconds before timing out.")


def _index_build_bundle(ms: int = 600000, finished: bool = False) -> dict[str, list[str]]:
    r0 = ["[rank0]: > building train, validation, and test datasets ...",
          "[rank0]: \tBuild and save the document index to 6a1c0b2e-GPTDataset-train-document_index.npy"]
    if finished:
        r0 += ["[rank0]: \t> time elapsed: 812.300000 seconds"]
    return {"rank_0.log": r0, **{f"rank_{r}.log": [f"[rank{r}]: > building train, validation, and test datasets ...",
                                                  _wd(r, ms)] for r in (1, 2, 3)}}


def test_a_long_phase_that_outlasted_the_default_timeout_is_config(tmp_path):
    d = _diagnose(tmp_path, _index_build_bundle())
    assert d.category == "config", d.headline
    assert "default 10 min" in d.headline and "dataset index build" in d.headline
    assert any("timeout" in r and "init_process_group" in r for r in d.recommendations)


def test_a_default_timeout_without_a_running_phase_is_no_config_claim(tmp_path):
    cands = _candidates(tmp_path, {f"rank_{r}.log": [f"[rank{r}]: iteration 100 loss 2.1", _wd(r)] for r in (1, 2, 3)})
    assert not [c for c in cands if c.category == "config"]
    # the phase finished before the timeout: not what the collective waited for
    cands = _candidates(tmp_path, _index_build_bundle(finished=True))
    assert not [c for c in cands if c.rule == "config.default_timeout"]


def test_a_raised_timeout_is_not_the_default(tmp_path):
    cands = _candidates(tmp_path, _index_build_bundle(ms=5_400_000))
    assert not [c for c in cands if c.rule == "config.default_timeout"]


def test_a_decisive_fault_beats_the_long_phase(tmp_path):
    files = _index_build_bundle()
    files["rank_2.log"] = [OOM[0].replace("[rank0]", "[rank2]").replace("GPU 0", "GPU 2")] + files["rank_2.log"]
    d = _diagnose(tmp_path, files)
    assert d.category == "oom" and d.status != Status.completed, d.headline
