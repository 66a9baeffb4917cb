"""Issue 13's done-when, the combined case: a bundle with stack dumps AND hardware snapshots (what `debugger collect`
writes per node), at 8 and 1,024 ranks, no worker logs. Either kind of evidence can name the culprit; together they
must not contradict each other:
- every rank inside the same collective (the dumps cannot say who) and one node's IB port down → that node, network;
- one rank reading data while the others wait, healthy snapshots → that rank, data_loading_stall (the snapshots
  raise nothing against it)."""

from __future__ import annotations

import json

import pytest
from hw_samples import bundle, node_name

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

WAITING = ["    wait (torch/distributed/distributed_c10d.py:4130)",
           "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
           "    train_step (/workspace/train.py:210)", "    <module> (/workspace/train.py:301)"]
LOADING = ["    _try_get_data (torch/utils/data/dataloader.py:1011)", "    _next_data (torch/utils/data/dataloader.py:1318)",
           "    __next__ (torch/utils/data/dataloader.py:630)", "    train_step (/workspace/train.py:188)",
           "    <module> (/workspace/train.py:301)"]


def add_stacks(root, nodes: int, *, odd: int | None = None, per_node: int = 8):
    """py-spy dumps in collect's layout: hw/snap-<i>/stacks/rank-<R>.pid-<P>.pyspy.txt beside its collect.json."""
    for i in range(nodes):
        d = root / "hw" / f"snap-{i:03d}" / "stacks"
        d.mkdir(parents=True, exist_ok=True)
        for lr in range(per_node):
            r, pid = i * per_node + lr, 20032 + lr
            frames = LOADING if r == odd else WAITING
            (d / f"rank-{r}.pid-{pid}.pyspy.txt").write_text(
                "\n".join([f"Process {pid}: /usr/bin/python3 -u train.py", "Python v3.10.12 (/usr/bin/python3.10)", "",
                           f'Thread {pid} (idle): "MainThread"', *frames]) + "\n")


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [2, 128], ids=["8-ranks", "1024-ranks"])
def test_dumps_all_in_one_collective_and_a_port_down_name_the_node(tmp_path, nodes):
    names = bundle(tmp_path, nodes, logs=False, bad="port_down", bad_node=1)
    add_stacks(tmp_path, nodes)
    with open_bundle(tmp_path) as b:
        d = run(b).diagnosis
    assert d.category == "network" and d.culprit_nodes == [names[1]], d.headline
    assert d.status.value in ("hung", "inconclusive") and d.status.value != "completed"
    ev = d.chain[0].evidence[0]
    assert "ibstat" in ev.file and "Down" in (tmp_path / ev.file).read_text().split("\n")[ev.line - 1]


@pytest.mark.slow
@pytest.mark.parametrize("nodes,odd", [(2, 5), (128, 901)], ids=["8-ranks", "1024-ranks"])
def test_a_rank_outside_the_collective_wins_over_healthy_snapshots(tmp_path, nodes, odd):
    bundle(tmp_path, nodes, logs=False, bad=None)
    add_stacks(tmp_path, nodes, odd=odd)
    with open_bundle(tmp_path) as b:
        d = run(b).diagnosis
    assert (d.category, d.culprit_ranks, d.status.value) == ("data_loading_stall", [odd], "hung"), d.headline
    assert d.culprit_nodes == [node_name(odd // 8)]
    assert d.chain[0].evidence[0].file.endswith(f"rank-{odd}.pid-{20032 + odd % 8}.pyspy.txt")
    assert json.loads(d.model_dump_json())["verified"] is True
