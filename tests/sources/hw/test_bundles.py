"""Whole bundles through `tools.pipeline.run`, as `debugger ask` reads them: 8 ranks on 2 nodes and 1,024 ranks on
128 nodes (8 per node), worker logs in the eval cases' torchrun layout, snapshots in hw/<folder>/ with the
collect.json that `debugger collect` writes. One node bad: the answer names it, the ranks it ran, and cites the
snapshot line; snapshots alone are never `completed`; healthy snapshots raise nothing."""

from __future__ import annotations

import json

import pytest
from hw_samples import bundle

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

NO_SMI = ("ibstat", "perfquery", "nccl", "dcgmi", "topo")


def ask(root):
    with open_bundle(root) as b:
        return run(b).diagnosis


def snapshot_line(root, ev) -> str:
    return (root / ev.file).read_text().split("\n")[ev.line - 1]


CASES = [  # (bad, tools, category, a word of the cited line)
    ("port_down", NO_SMI, "network", "State: Down"),
    ("busbw", NO_SMI, "network", "# Avg bus bandwidth"),
    ("counters", NO_SMI, "network", "SymbolErrorCounter"),
    ("dcgmi", NO_SMI, "gpu_cuda", "Fail - GPU: 6"),
    ("ecc", ("nvsmi", "ibstat"), "gpu_cuda", "DRAM Uncorrectable"),
]


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [2, 128], ids=["8-ranks-2-nodes", "1024-ranks-128-nodes"])
@pytest.mark.parametrize("bad,tools,category,word", CASES)
def test_logs_and_snapshots_name_the_node_and_its_ranks(tmp_path, nodes, bad, tools, category, word):
    bad_node = nodes * 5 // 8  # 1 of 2, 80 of 128
    names = bundle(tmp_path, nodes, bad=bad, bad_node=bad_node, tools=tools)
    d = ask(tmp_path)
    node = names[bad_node]
    assert (d.status.value, d.category, d.culprit_nodes) == ("hung", category, [node]), d.headline
    assert d.culprit_ranks == list(range(8 * bad_node, 8 * bad_node + 8))
    ev = d.chain[0].evidence[0]
    assert ev.file.startswith("hw/") and word in ev.text and snapshot_line(tmp_path, ev) == ev.text
    assert node in d.headline and f"restart without node {node}" == d.restart


@pytest.mark.parametrize("bad,tools,category,word", CASES[:-1] + [
    ("ecc", ("nvsmi", "ibstat"), "gpu_cuda", "DRAM Uncorrectable"),
    ("throttle", ("nvsmi",), "gpu_cuda", "HW Slowdown"),
    ("topo", NO_SMI, "gpu_cuda", "SYS")])
def test_snapshots_alone_name_the_node_inconclusive(tmp_path, bad, tools, category, word):
    names = bundle(tmp_path, 128, logs=False, bad=bad, bad_node=77, tools=tools)
    d = ask(tmp_path)
    assert (d.status.value, d.category, d.culprit_nodes) == ("inconclusive", category, [names[77]]), d.headline
    assert d.culprit_ranks == []  # no worker logs: no rank is known to have run there, none is guessed
    ev = d.chain[0].evidence[0]
    assert word in ev.text and snapshot_line(tmp_path, ev) == ev.text


@pytest.mark.parametrize("tools", [NO_SMI, NO_SMI + ("nvsmi",)], ids=["no-smi", "with-smi"])
def test_healthy_snapshots_raise_nothing(tmp_path, tools):
    """Snapshots alone: inconclusive, nothing found. With the logs: the same answer as the logs alone give."""
    alone, logs_only, both = (tmp_path / x for x in ("alone", "logs_only", "both"))
    for d in (alone, logs_only, both):
        d.mkdir()
    bundle(alone, 16, logs=False, tools=tools)
    bundle(both, 16, tools=tools)
    bundle(logs_only, 16, tools=tools)
    import shutil
    shutil.rmtree(logs_only / "hw")
    d = ask(alone)
    assert (d.status.value, d.category, d.culprit_nodes) == ("inconclusive", "none", []), d.headline
    ref, got = ask(logs_only), ask(both)
    assert (got.status, got.category, got.culprit_ranks, got.culprit_nodes, got.headline) == (
        ref.status, ref.category, ref.culprit_ranks, ref.culprit_nodes, ref.headline)
    assert not any(f.id.startswith("hardware.") for f in got.chain)


def test_snapshot_named_by_folder_and_unattributed_snapshots(tmp_path):
    # no manifests: folders named after the nodes the worker logs know attribute the snapshots
    names = bundle(tmp_path, 4, bad="port_down", bad_node=2, manifest=False, tools=("ibstat",))
    d = ask(tmp_path)
    assert d.culprit_nodes == [names[2]] and d.culprit_ranks == list(range(16, 24))
    # the same snapshots in folders that name nothing, no logs: compared, the answer says the node is unknown
    other = tmp_path / "other"
    other.mkdir()
    for i, n in enumerate(names):
        (other / f"snap{i}").mkdir()
        (other / f"snap{i}" / "ibstat.txt").write_text((tmp_path / "hw" / n / "ibstat.txt").read_text())
    d = ask(other)
    assert d.culprit_nodes == [] and d.category == "network" and "unattributed" in d.headline
    assert any("name no node" in n for n in d.notes)


def test_nccl_tests_between_node_pairs_blame_the_shared_node(tmp_path):
    from hw_samples import nccl_tests
    nodes = [f"node-{i}" for i in range(6)]
    pairs = [(nodes[i], nodes[(i + 1) % 6]) for i in range(6)]  # a ring: node-3 is in two pairs
    for a, b in pairs:
        slow = "node-3" in (a, b)
        (tmp_path / f"nccl_{a}_{b}.log").write_text(nccl_tests([a, b], busbw=80.0 if slow else 190.0))
    d = ask(tmp_path)
    assert (d.category, d.culprit_nodes) == ("network", ["node-3"]), d.headline


def test_json_of_ask_names_the_node(tmp_path):
    from typer.testing import CliRunner

    from trainlog_debugger.agent.cli.app import app
    names = bundle(tmp_path, 2, bad="port_down", tools=("ibstat",))
    res = CliRunner().invoke(app, ["ask", str(tmp_path), "--json"])
    got = json.loads(res.stdout)
    assert got["culprit_nodes"] == [names[1]] and got["culprit_ranks"] == list(range(8, 16))
    assert got["chain"][0]["evidence"][0]["file"] == "hw/snap-001/ibstat.txt"


def _stopped(text: str, after: int) -> str:
    """nccl-tests output cut after the result row of `after` bytes: the run never reached its average or its end."""
    out = []
    for line in text.splitlines():
        out.append(line)
        if line.strip().startswith(f"{after} "):
            break
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("hosts,category", [(["gpu-a"], "gpu_cuda"), (["gpu-a", "gpu-b"], "network")])
def test_nccl_tests_that_stop_mid_sweep_hung_on_the_path_it_tests(tmp_path, hosts, category):
    """A sweep that stops after a row below its maxBytes, with no average and no end, hung at the next size: within one
    host on the GPUs' peer-to-peer path, across hosts on the fabric; weakly (a cut paste reads the same). The file
    is recognised with the command that ran it pasted as a comment above its output."""
    from hw_samples import nccl_tests
    cut = _stopped(nccl_tests(hosts, gpus_per_host=2), 32768)
    (tmp_path / "combined.log").write_text("#  ./build/all_reduce_perf -b 8 -e 8G -f 8 -g 2\n" + cut)
    d = ask(tmp_path)
    assert (d.category, d.status.value, str(d.confidence)) == (category, "inconclusive", "low"), d.headline
    assert "32,768-byte row" in d.headline and "8,589,934,592" in d.headline
    assert d.chain[0].evidence[0].text.strip().startswith("32768 ")
    assert d.culprit_nodes == (hosts if len(hosts) == 1 else [])


def test_a_whole_nccl_tests_sweep_did_not_stop(tmp_path):
    from hw_samples import nccl_tests
    (tmp_path / "combined.log").write_text("#  ./build/all_reduce_perf -b 8 -e 8G -f 8 -g 2\n"
                                            + nccl_tests(["gpu-a"], gpus_per_host=2))
    assert "stopped" not in ask(tmp_path).headline
