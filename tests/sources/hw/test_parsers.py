"""Each hardware parser on its tool's real format (hw_samples.py; versions where they differ), and on a few lines
copied from public outputs: every value it reads cites the line it came from, and bad input yields no records,
never an exception."""

from __future__ import annotations

import pytest
from hw_samples import dcgmi, ibstat, ibv_devinfo, nccl_tests, nvsmi_q, perfquery, topo

from trainlog_debugger.tools.sources.hw import dcgmi as dcgmi_mod
from trainlog_debugger.tools.sources.hw import ib, nccl_tests as nt, nvsmi_q as nq, perfquery as pq, topo as tp
from trainlog_debugger.tools.sources.collect.attribute import node_of
from trainlog_debugger.tools.sources.hw.parse import parse_any, which


def cited(text: str, rec, key: str) -> str:
    """The cited line must be the file's own line at that number."""
    ev = rec.ev(key)
    assert ev is not None and ev.file == "f.txt"
    assert text.split("\n")[ev.line - 1].replace("\x1b[4m", "").replace("\x1b[0m", "") == ev.text
    return ev.text


def by_subject(recs):
    return {r.subject: r for r in recs}


@pytest.mark.parametrize("old", [False, True], ids=["driver535-sram-dram", "driver470-single-double-bit"])
def test_nvsmi_q_reads_ecc_per_gpu(old):
    text = nvsmi_q(dram_unc={3: 2}, old=old)
    recs = by_subject(nq.parse("f.txt", text))
    assert len(recs) == 8
    bad, good = recs["GPU 00000000:5D:00.0"], recs["GPU 00000000:18:00.0"]
    assert (bad.get("ecc.volatile.uncorrectable"), good.get("ecc.volatile.uncorrectable")) == (2, 0)
    line = cited(text, bad, "ecc.volatile.uncorrectable")
    assert line.strip().startswith("Total" if old else "DRAM Uncorrectable") and line.rstrip().endswith("2")
    if old:
        assert bad.get("retired.dbe") == 2 and bad.get("retired.pending") is True and good.get("retired.dbe") == 0
    else:
        assert bad.get("remap.pending") is True and good.get("remap.pending") is False
        assert "retired.dbe" not in bad.values  # N/A is unknown, never 0


def test_nvsmi_q_throttle_remap_failure_and_temperature():
    text = nvsmi_q(throttle=5, remap_fail=2)
    recs = by_subject(nq.parse("f.txt", text))
    t = recs["GPU 00000000:AB:00.0"]
    assert {k for k in t.values if k.startswith("throttle:")} == {"throttle:hw slowdown", "throttle:hw thermal slowdown"}
    assert "HW Slowdown" in cited(text, t, "throttle:hw slowdown")
    assert not any(k.startswith("throttle:") for k in recs["GPU 00000000:18:00.0"].values)
    assert recs["GPU 00000000:3A:00.0"].get("remap.failure") is True
    assert t.get("temp_c") == 34 and t.get("product") == "NVIDIA H100 80GB HBM3"


def test_nvsmi_q_from_a_published_a100_snippet():
    # lines as printed on an A100 (driver 470.103) in a public Xid 63 write-up
    text = "\n".join(["GPU 00000000:07:00.0", "    ECC Errors", "        Volatile",
                      "            SRAM Correctable              : 0", "            SRAM Uncorrectable            : 0",
                      "            DRAM Correctable              : 177", "            DRAM Uncorrectable            : 0",
                      "    Remapped Rows", "        Correctable Error                 : 1",
                      "        Uncorrectable Error               : 0", "        Pending                           : Yes",
                      "        Remapping Failure Occurred        : No"])
    (r,) = nq.parse("f.txt", text)
    assert (r.get("ecc.volatile.uncorrectable"), r.get("remap.correctable"), r.get("remap.pending"),
            r.get("remap.failure")) == (0, 1, True, False)


def test_topo_reads_each_pair_once():
    text = topo(broken=(2, 5))
    recs = by_subject(tp.parse("f.txt", text))
    assert len(recs) == 28  # 8 GPUs: 8*7/2 pairs; NIC rows and affinity columns are not pairs
    assert (recs["GPU2-GPU5"].get("link"), recs["GPU2-GPU5"].get("nvlinks")) == ("SYS", 0)
    assert recs["GPU0-GPU7"].get("nvlinks") == 18
    assert cited(text, recs["GPU2-GPU5"], "link").startswith("GPU2\t")


def test_topo_of_an_older_driver_without_nic_columns():
    text = "\n".join(["\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity", "GPU0\t X \tNV2\tNV2\tNV1\t0-19",
                      "GPU1\tNV2\t X \tNV1\tNV2\t0-19", "GPU2\tNV2\tNV1\t X \tNV2\t0-19",
                      "GPU3\tNV1\tNV2\tNV2\t X \t0-19", "", "Legend:", "", "  X    = Self",
                      "  NV#  = Connection traversing a bonded set of # NVLinks"])
    recs = by_subject(tp.parse("f.txt", text))
    assert len(recs) == 6 and recs["GPU0-GPU3"].get("nvlinks") == 1 and which(text) == "gpu_topo"


def test_ibstat_ports():
    text = ibstat(down=1)
    recs = by_subject(ib.parse_ibstat("f.txt", text))
    assert recs["mlx5_0 port 1"].values.keys() >= {"state", "physical_state", "rate", "link_layer"}
    down = recs["mlx5_1 port 1"]
    assert (down.get("state"), down.get("physical_state")) == ("Down", "Disabled")
    assert cited(text, down, "state") == "\t\tState: Down"
    assert recs["mlx5_0 port 1"].get("rate") == 400


@pytest.mark.parametrize("verbose", [True, False], ids=["ibv_devinfo-v", "ibv_devinfo"])
def test_ibv_devinfo_normalised_to_ibstat_words(verbose):
    text = ibv_devinfo(down=0, verbose=verbose, slow=1)
    recs = by_subject(ib.parse_devinfo("f.txt", text))
    assert recs["mlx5_0 port 1"].get("state") == "Down" and recs["mlx5_1 port 1"].get("state") == "Active"
    assert "PORT_DOWN" in cited(text, recs["mlx5_0 port 1"], "state")
    if verbose:
        assert recs["mlx5_0 port 1"].get("physical_state") == "Polling"
        assert recs["mlx5_1 port 1"].get("rate") == 200  # 4X at 50 Gbps
    else:
        assert "rate" not in recs["mlx5_1 port 1"].values  # not printed without -v: unknown, not guessed


def test_perfquery_basic_and_extended_blocks_are_one_port():
    text = perfquery(7, errors={"SymbolErrorCounter": 65535, "LinkDownedCounter": 3}) + perfquery(7, extended=True)
    (r,) = pq.parse("f.txt", text)
    assert r.subject == "Lid 7 port 1" and r.get("SymbolErrorCounter") == 65535 and r.get("LinkDownedCounter") == 3
    assert cited(text, r, "LinkDownedCounter").startswith("LinkDownedCounter:...")
    assert cited(text, r, "SymbolErrorCounter").split(":")[0] == "SymbolErrorCounter"


def test_perfquery_x_of_older_versions_has_no_error_counters():
    assert pq.parse("f.txt", perfquery(7, extended=True, new=False)) == []
    (r,) = pq.parse("f.txt", perfquery(7, extended=True, new=True, errors={"PortRcvErrors": 12}))
    assert r.get("PortRcvErrors") == 12


@pytest.mark.parametrize("new", [True, False], ids=["2.13-group-wrong", "older-no-group-error"])
def test_nccl_tests_avg_busbw_rows_and_hosts(new):
    text = nccl_tests(["node-3", "node-4"], busbw=187.5, new=new)
    (r,) = nt.parse("f.txt", text)
    assert r.get("avg_busbw") == 187.5 and r.hosts == ("node-3", "node-4") and r.get("test") == "all_reduce_perf"
    assert cited(text, r, "avg_busbw").startswith("# Avg bus bandwidth")
    assert r.get("max_size") == 8589934592 and r.get("max_size_busbw") == pytest.approx(187.5 * 1.05, abs=0.01)


def test_nccl_tests_row_from_a_published_run():
    text = "\n".join([
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        " 10737418240    2684354560     float     sum      -1    90330  118.87  222.88      0    91945  116.78  218.96      0",
        "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 220.921 "])
    (r,) = nt.parse("f.txt", text)
    assert (r.get("avg_busbw"), r.get("max_size_busbw")) == (220.921, 222.88)


@pytest.mark.parametrize("layout", ["3", "4"])
def test_dcgmi_diag_fail_and_pass(layout):
    text = dcgmi(fail_gpu=6, layout=layout)
    recs = by_subject(dcgmi_mod.parse("f.txt", text))
    mem = recs["GPU Memory" if layout == "3" else "memory"]
    assert mem.get("result") == "Fail" and mem.get("failed_gpus") == [6]
    assert "Fail" in cited(text, mem, "result") and mem.get("detail")
    assert all(r.get("result") in ("Pass", "Skip") for s, r in recs.items() if r is not mem)
    assert "Diagnostic" not in recs or recs["Diagnostic"].get("result") == "Pass"  # 3.x's test, not the header
    healthy = dcgmi_mod.parse("f.txt", dcgmi(layout=layout))
    assert healthy and not any(r.get("result") == "Fail" for r in healthy)


@pytest.mark.parametrize("make,tool", [(nvsmi_q, "nvidia_smi"), (topo, "gpu_topo"), (ibstat, "ib_status"),
                                       (ibv_devinfo, "ib_status"), (perfquery, "ib_counters"),
                                       (lambda: nccl_tests(["n1"]), "nccl_tests"), (dcgmi, "dcgm_diag")])
def test_each_format_is_recognised_by_content_and_survives_truncation(make, tool):
    text = make()
    assert which(text) == tool
    for cut in (len(text) // 3, len(text) // 2, len(text) - 7):
        parse_any("f.txt", text[:cut])  # a snapshot cut anywhere: records of what is there, no exception
    assert parse_any("f.txt", "\x00\xff garbage : : |||\n| | |\n# Port counters: x port 99999999\n") == []


def test_node_attribution_order():
    manifests = {"hw/a": "gpu-node-07"}
    known = {"gpu-node-1", "gpu-node-17", "gpu-node-07"}
    assert node_of("hw/a/sub/ibstat.txt", manifests, known)[0] == "gpu-node-07"  # a parent folder's manifest
    assert node_of("hw/gpu-node-17/ibstat.txt", {}, known)[0] == "gpu-node-17"
    assert node_of("hw/ibstat.gpu-node-17.txt", {}, known)[0] == "gpu-node-17"  # not gpu-node-1
    assert node_of("bundle.tgz!gpu-node-1/topo.txt", {}, known)[0] == "gpu-node-1"
    assert node_of("hw/nccl.log", {}, known, ("node-9",))[0] == "node-9"
    node, why = node_of("hw/nccl.log", {}, known, ("node-9", "node-10"))
    assert node is None and why.startswith("unattributed")
