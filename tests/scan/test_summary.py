"""tools/scan/summary.py: the merge runs the steps the sources declare (SCAN_STEPS by phase, WORLD_SIZE as data)
without naming a source. A synthetic source, put into the registry for the test, states a world size and places
ranks on nodes; its steps are called in their phases and their statements merged (the first per rank kept)."""

from __future__ import annotations

import sys
import types

import pytest

from trainlog_debugger.tools import sources
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.sources.pattern import P, WorldSize

# A DeepSpeed launcher's summary of the job it starts (launch.py), as a synthetic source reads it
LAUNCH = P("synthetic.launch", 0, None, "context", r"launching \d+ processes on \S+ as ranks", "launching ",
           "[INFO] [launch.py:163:main] launching 4 processes on gpu-node-3 as ranks 4-7, world 8",
           "the launcher says which ranks a node runs",
           fields=r"launching \d+ processes on (?P<host>\S+) as ranks (?P<first>\d+)-(?P<last>\d+), world (?P<world>\d+)",
           ints=("first", "last", "world"))

calls: list[tuple] = []


def local_ranks(files, world):
    calls.append(("local_ranks", len(files), world))
    return [f"synthetic: world {world}"]


def file_nodes(f):
    calls.append(("file_nodes", f.rel))
    return [(h.line, r, Evidence(file=f.rel, line=h.line, text=h.text, rank=r, node=h.fields["host"], kind=f.kind))
            for h in f.hits if h.pattern == "synthetic.launch"
            for r in range(h.fields["first"], h.fields["last"] + 1)]


def nodes(files, world):
    calls.append(("nodes", world))
    return [(r, Evidence(file="late", line=1, text="late", rank=r, node="late-node")) for r in range(world or 0)]


@pytest.fixture
def synthetic(monkeypatch):
    sources.patterns()  # the catalog cached as it is: the synthetic pattern is scanned only where passed in
    steps = types.ModuleType("synthetic_steps")
    steps.local_ranks, steps.file_nodes, steps.nodes = local_ranks, file_nodes, nodes
    monkeypatch.setitem(sys.modules, "synthetic_steps", steps)
    fmt = types.ModuleType("synthetic_format")
    fmt.PATTERNS = [LAUNCH]
    fmt.WORLD_SIZE = {"synthetic.launch": WorldSize("world", 0, "the launcher's world")}
    fmt.SCAN_STEPS = {"local_ranks": "synthetic_steps:local_ranks", "file_nodes": "synthetic_steps:file_nodes",
                      "nodes": "synthetic_steps:nodes"}
    monkeypatch.setitem(sources.SOURCES, "synthetic", fmt)
    calls.clear()


def test_declared_steps_run_in_their_phases(tmp_path, synthetic):
    (tmp_path / "launcher.log").write_text(
        "[2024-05-01 10:00:00,000] [INFO] [launch.py:163:main] launching 4 processes on gpu-node-3 as ranks 4-7, "
        "world 8\n"
        "[2024-05-01 10:00:00,100] [INFO] [launch.py:163:main] launching 4 processes on gpu-node-9 as ranks 6-9, "
        "world 8\n")
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=1, pats=[*sources.patterns(), LAUNCH])
    assert calls == [("local_ranks", 1, 8), ("file_nodes", "launcher.log"), ("nodes", 8)]
    assert "synthetic: world 8" in res.notes
    assert res.coverage.expected_ranks == 8 and res.coverage.expected_from == "the launcher's world"
    # ranks 4-7 from the first line (6 and 7 not taken again by the second), 8-9 from the second; 0-3 from the late
    # phase, which places only the ranks no file statement placed
    assert {r: ev.node for r, ev in res.rank_nodes.items()} == {
        0: "late-node", 1: "late-node", 2: "late-node", 3: "late-node", 4: "gpu-node-3", 5: "gpu-node-3",
        6: "gpu-node-3", 7: "gpu-node-3", 8: "gpu-node-9", 9: "gpu-node-9"}
    assert res.rank_nodes[6].line == 1


def test_the_catalog_declares_the_world_sizes_in_trust_order():
    from trainlog_debugger.tools.scan.summary import steps, world_sizes
    ws = world_sizes()
    assert ws["job.world_size"].trust == ws["job.lightning_member"].trust == 0 < ws["nccl.comm_init"].trust
    assert [s.__module__.rsplit(".", 2)[-2] for s in steps("file_nodes")] == ["torchrun", "slurm"]
