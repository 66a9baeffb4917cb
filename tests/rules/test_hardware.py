"""tools/rules/hardware.py and tools/sources/hw/report.py: which node is out of line with its peers, and what the rule
makes of it (category, strength, the node's ranks, the status the worker logs support). Records come from the
parsers over real-format snapshots (tests/hw/hw_samples.py), with their node set as read.py would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources" / "hw"))
from hw_samples import dcgmi, ibstat, ibv_devinfo, nccl_tests, nvsmi_q, perfquery, topo, worker_log  # noqa: E402

from trainlog_debugger.tools.sources.hw.report import compare  # noqa: E402
from trainlog_debugger.tools.sources.hw.parse import parse_any  # noqa: E402
from trainlog_debugger.tools.rules.hardware import out_of_line  # noqa: E402

NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def records(make, bad_make=None, bad: int = 2, nodes=NODES):
    out = []
    for i, n in enumerate(nodes):
        text = (bad_make if i == bad and bad_make else make)()
        for r in parse_any(f"hw/{n}/snap.txt", text):
            r.node, r.node_basis = n, "test"
            out.append(r)
    return out


FIRE = [  # (healthy snapshot, the bad node's, rule id, category, strength, a word of the first cited line)
    (nvsmi_q, lambda: nvsmi_q(dram_unc={1: 3}), "hardware.ecc_uncorrectable", "gpu_cuda", 0.85,
     "DRAM Uncorrectable"),
    (nvsmi_q, lambda: nvsmi_q(remap_fail=4), "hardware.row_remap_failure", "gpu_cuda", 0.85,
     "Remapping Failure Occurred"),
    (lambda: nvsmi_q(old=True), lambda: nvsmi_q(old=True, dram_unc={0: 1}), "hardware.ecc_uncorrectable",
     "gpu_cuda", 0.85, "Total"),
    (nvsmi_q, lambda: nvsmi_q(throttle=7), "hardware.hw_throttle", "gpu_cuda", 0.6, "HW Slowdown"),
    (ibstat, lambda: ibstat(down=0, polling=True), "hardware.ib_port_down", "network", 0.85, "State: Down"),
    (ibstat, lambda: ibstat(rate={1: 200}), "hardware.ib_port_rate", "network", 0.7, "Rate: 200"),
    (ibv_devinfo, lambda: ibv_devinfo(down=1), "hardware.ib_port_down", "network", 0.85, "PORT_DOWN"),
    (perfquery, lambda: perfquery(errors={"LinkDownedCounter": 2}), "hardware.ib_link_errors", "network",
     0.7, "LinkDownedCounter"),
    (perfquery, lambda: perfquery(errors={"PortXmitDiscards": 40}), "hardware.ib_link_errors", "network",
     0.5, "PortXmitDiscards"),
    (lambda: nccl_tests(["x"]), lambda: nccl_tests(["x"], busbw=200.0), "hardware.low_busbw", "network", 0.7,
     "# Avg bus bandwidth"),
    (dcgmi, lambda: dcgmi(fail_gpu=0, layout="4"), "hardware.dcgm_diag_fail", "gpu_cuda", 0.8, "| Fail"),
    (topo, lambda: topo(broken=(0, 3)), "hardware.nvlink_missing", "gpu_cuda", 0.6, "SYS"),
]


@pytest.mark.parametrize("good,bad,rule,category,strength,word", FIRE, ids=[f"{r[2]}-{i}" for i, r in enumerate(FIRE)])
def test_the_odd_node_is_named_with_its_ranks(facts_from, good, bad, rule, category, strength, word):
    logs = {f"error-1-{i}.out": worker_log(n, 8 * i, 32).splitlines() for i, n in enumerate(NODES)}
    f = facts_from(logs)
    f.inv.hardware = records(good, bad)
    got = out_of_line(f)
    assert got, "nothing fired"
    c = got[0]
    assert (c.rule, c.category, c.strength, c.nodes, c.ranks) == (rule, category, strength, ["gpu-node-03"],
                                                                   list(range(16, 24)))
    assert word in c.evidence[0].text and c.evidence[0].file == "hw/gpu-node-03/snap.txt"
    assert c.status == "hung" and c.restart == "restart without node gpu-node-03"
    assert "gpu-node-03" in c.summary and "ranks 16-23" in c.summary
    if rule == "hardware.dcgm_diag_fail":  # the row naming the failed GPU is cited too
        assert "GPU0: Fail" in c.evidence[1].text and c.facts["gpus"] == [0]


@pytest.mark.parametrize("good", [nvsmi_q, ibstat, ibv_devinfo, perfquery, lambda: nccl_tests(["x"]), dcgmi, topo])
def test_healthy_peers_raise_nothing(good):
    assert compare(records(good)) == []


def test_snapshots_alone_are_inconclusive_and_name_no_rank(facts_from):
    f = facts_from({"notes.txt": ["collected by the on-call engineer"]})
    f.inv.hardware = records(ibstat, lambda: ibstat(down=1))
    (c,) = out_of_line(f)
    assert (c.status, c.nodes, c.ranks) == ("inconclusive", ["gpu-node-03"], [])


def test_one_node_gets_absolute_checks_only():
    one = NODES[:1]
    got = {o.check for o in compare(records(lambda: nvsmi_q(dram_unc={2: 1}, throttle=3), nodes=one)
                                    + records(lambda: ibstat(down=1), nodes=one)
                                    + records(lambda: perfquery(errors={"SymbolErrorCounter": 9}), nodes=one)
                                    + records(lambda: dcgmi(fail_gpu=1), nodes=one))}
    # uncorrectable ECC and a diag Fail are bad anywhere; a throttle, a port down, a counter need peers to compare
    assert got == {"ecc_uncorrectable", "dcgm_diag_fail"}


def test_what_most_nodes_share_is_the_fleet_not_one_node():
    # 3 of 4 nodes have link errors and a throttled GPU: no node is out of line
    recs = records(lambda: perfquery(errors={"SymbolErrorCounter": 30}), perfquery, bad=0)
    recs += records(lambda: nvsmi_q(throttle=1), nvsmi_q, bad=0)
    assert compare(recs) == []
    # a counter every node has, one node ten times more: that node
    recs = records(lambda: perfquery(errors={"SymbolErrorCounter": 3}),
                   lambda: perfquery(errors={"SymbolErrorCounter": 3000}))
    assert [(o.node, o.check) for o in compare(recs)] == [("gpu-node-03", "ib_link_errors")]


@pytest.mark.parametrize("bw,fires", [(300.0, False), (255.0, False), (250.0, True)])
def test_busbw_threshold_is_relative_to_the_peers_median(bw, fires):
    recs = records(lambda: nccl_tests(["x"], busbw=360.0), lambda: nccl_tests(["x"], busbw=bw))
    assert bool(compare(recs)) == fires  # 0.7 x 360 = 252


def test_unattributed_snapshot_is_compared_and_said_so(facts_from):
    recs = records(ibstat, lambda: ibstat(down=0))
    for r in recs:
        if r.node == "gpu-node-03":
            r.node = None
    f = facts_from({"notes.txt": ["x"]})
    f.inv.hardware = recs
    (c,) = out_of_line(f)
    assert c.nodes == [] and "unattributed" in c.summary and "restart" in c.restart
    assert any("collect.json" in r for r in c.recommendations)
