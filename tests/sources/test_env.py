"""tools/sources/env.py: printed settings (NCCL's `set by environment`, env dumps, PyTorch's deprecation warning), the
interface NCCL/gloo picked or could not find, and the start/end lines of long phases.

Each row: a line exactly as emitted, the pattern ids the scanner records for it, and the fields each id extracts
(a subset; None = absent)."""

from __future__ import annotations

import pytest
from matching import check, params

A = "env.assignment"

SETTINGS = [
    ("NCCL set by environment", "node1:2345:2345 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
     {"env.nccl_set_by_env": dict(name="NCCL_SOCKET_IFNAME", value="eth0")}),
    ("param.cc prints a trailing period", "node1:2345:2345 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
     {"env.nccl_set_by_env": dict(name="NCCL_IB_DISABLE", value="1")}),
    ("env | grep NCCL", "NCCL_DEBUG=INFO", {A: dict(name="NCCL_DEBUG", value="INFO")}),
    ("bash -x export", "+ export NCCL_SOCKET_IFNAME=ib0", {A: dict(name="NCCL_SOCKET_IFNAME", value="ib0")}),
    ("torchrun-prefixed dump", "[default0]:TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
     {A: dict(name="TORCH_NCCL_ASYNC_ERROR_HANDLING", value="1")}),
    ("gloo interface", "GLOO_SOCKET_IFNAME=eth1", {A: dict(name="GLOO_SOCKET_IFNAME", value="eth1")}),
    ("a launcher line: recorded, no single-assignment fields",
     "mpirun -x NCCL_SOCKET_IFNAME=lo -np 2 -H localhost:2 ./build/all_reduce_perf -b 8 -e 128M",
     {A: dict(name=None)}),
    ("torch deprecation (2.3, getCvarString)",
     "[rank7]:[W Utils.hpp:108] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarString)",
     {"env.deprecated_torch": dict(name="NCCL_ASYNC_ERROR_HANDLING", replacement="TORCH_NCCL_ASYNC_ERROR_HANDLING")}),
    ("the allocation's node count in an echoed environment",
     "SLURM_JOB_ID=735400 SLURM_JOB_NUM_NODES=2 SLURM_NODELIST=gpu-g-[001-002]",
     {"env.slurm_nodes": dict(name="SLURM_JOB_NUM_NODES", nodes=2), "env.slurm_nodelist": dict(nodelist="gpu-g-[001-002]")}),
    ("the allocation's host list", "SLURM_JOB_NODELIST=gpu-h[031-032]", {"env.slurm_nodelist": dict(nodelist="gpu-h[031-032]")}),
    ("env | grep SLURM", "SLURM_NNODES=16", {"env.slurm_nodes": dict(name="SLURM_NNODES", nodes=16)}),
    ("NCCL >=2.29 unused env", "node1:1:1 [0] NCCL INFO Warning: ENV NCCL_NET_SHARED_COMMS is unused. Setting it has no effect.",
     {"env.nccl_env_unused": dict(name="NCCL_NET_SHARED_COMMS", state="unused")}),
]

INTERFACES = [
    ("bootstrap pick, old wording", "node1:2345:2345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
     {"env.nccl_iface_using": dict(what="Bootstrap", iface="eth0")}),
    ("socket transport pick", "node1:2345:2345 [0] NCCL INFO NET/Socket : Using [0]ib0:10.1.0.1<0> [1]eth0:10.0.0.1<0>",
     {"env.nccl_iface_using": dict(what="NET/Socket", iface="ib0")}),
    ("socket transport found none", "node1:2345:2400 [0] transport/net_socket.cc:61 NCCL WARN NET/Socket : no interface found",
     {"env.nccl_iface_missing": dict(iface=None)}),
    ("OOB interface not found", "node1:2345:2400 [0] bootstrap.cc:577 NCCL WARN no device found matching ib9, verify NCCL_OOB_NET_IFNAME",
     {"env.nccl_iface_missing": dict(iface="ib9")}),
    ("gloo", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: eth1",
     {"env.gloo_iface_missing": dict(iface="eth1")}),
]

# a healthy run prints these every few hundred steps: they are not scanned (tools/rules/config.py reads them on the
# line where a rank's log stops), so the scan records nothing for them
PHASES = [
    ("megatron save start", " saving checkpoint at iteration    1000 to /ckpt/gpt in torch_dist format", {}),
    ("deepspeed torch engine", "[2024-05-01 10:00:00,000] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving /ckpt/global_step100/mp_rank_00_model_states.pt...", {}),
    ("mcore index build", "\tBuild and save the document index to 6a1c0b2e-GPTDataset-train-document_index.npy", {}),
]

NEAR_MISSES = [
    ("a variable named in prose without a value", "Set TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.", {}),
    ("CUDA variables are not judged here", "CUDA_VISIBLE_DEVICES=0,1,2,3", {}),
    ("loading, not saving", " loading checkpoint from /ckpt/gpt at iteration 1000", {"job.resumed": {}}),
]


@pytest.mark.parametrize("line, expected", params(SETTINGS + INTERFACES + PHASES + NEAR_MISSES))
def test_env_lines(line, expected):
    check(line, expected)
