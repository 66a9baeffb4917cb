"""The generated at-scale hang (eval/bench/logs.py, scenario "cascade"): the bundle the 4,096- and 10,000-rank
targets of issue 28 are judged on.

Why: those targets ("ask names the culprit", JSON sizes, time per rank file) only mean something if the bundle is
what it claims to be: the world size the logs state is the number of ranks, exactly one rank carries a cause (and
the manifest names it), every other rank ends in the watchdog cascade, the per-node layout really holds 8 ranks per
file with torchrun's prefixes, the same seed gives the same bytes, and the default bundles stay byte for byte
those every earlier benchmark figure was measured on.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from trainlog_debugger.eval.bench.logs import NODE_GPUS, SEQ, generate

SIZE = 0.0005  # GiB: ~16 KB a rank at 32 ranks, some 60 lines each


def _digest(root: Path, man: dict) -> str:
    h = hashlib.sha256()
    for f in sorted(man["files"], key=lambda f: f["file"]):
        h.update(f["file"].encode() + b"\0" + (root / f["file"]).read_bytes())
    return h.hexdigest()


def _text(root: Path) -> str:
    return "".join(p.read_text() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize("layout", ["rank", "node"])
def test_one_culprit_and_a_cascade_on_every_other_rank(tmp_path, layout):
    root, man = generate(tmp_path, SIZE, seed=7, ranks=32, scenario="cascade", layout=layout)
    culprit, pats, text = man["plan"]["culprit"], man["patterns"], _text(root)
    assert 0 <= culprit < 32 and man["scenario"] == "cascade" and man["layout"] == layout
    # the logs state the real world size, not the default scenario's 256
    assert re.findall(r"using world size: (\d+), data-parallel size: (\d+)", text) == [("32", "4")]
    assert set(re.findall(r"nranks (\d+)", text)) == {"32"} and set(re.findall(r"nRanks (\d+)", text)) == {"32"}
    # every rank but the culprit times out in SEQ, having enqueued it; the culprit only retries its read and is told
    others = {str(r) for r in range(32) if r != culprit}
    assert set(pats["pytorch.watchdog_timeout"]["ranks"]) == others
    assert set(pats["pytorch.watchdog_pg_status"]["ranks"]) == others
    assert set(pats["io.retrying"]["ranks"]) == {str(culprit)} and pats["io.retrying"]["count"] == 5
    assert set(pats["pytorch.dump_signal_received"]["ranks"]) == {str(culprit)}
    assert f"Last enqueued NCCL work: {SEQ - 1}, last completed NCCL work: {SEQ - 1}." in text
    assert text.count(f"last enqueued work: {SEQ}, last completed work: {SEQ - 1}") == 31
    assert "retrying 5/5" in text
    # no other needle: no exception, no Xid, no IB error, no OOM
    for pid in ("python.traceback", "cuda.oom", "kernel.xid", "nccl.ib_completion_error", "io.connection_reset"):
        assert pid not in pats
    assert sum(f["bytes"] for f in man["files"]) == man["bytes"] == sum(p.stat().st_size for p in root.rglob("*")
                                                                        if p.is_file())


def test_per_node_files_hold_8_ranks_with_torchrun_prefixes(tmp_path):
    root, man = generate(tmp_path, SIZE, seed=7, ranks=32, scenario="cascade", layout="node")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    assert len(files) == len(man["files"]) == 32 // NODE_GPUS
    for n, f in enumerate(sorted(man["files"], key=lambda f: f["rank"])):
        lines = (root / f["file"]).read_text().splitlines()
        # torchrun's `[defaultN]:` on every line; c10's `[rankR]:` after it on all but the C++ `terminate` block
        heads = {re.match(r"\[default(\d)\]:(?:\[rank(\d+)\]:)?", ln).groups() for ln in lines}
        assert {lr for lr, _ in heads} == {str(lr) for lr in range(NODE_GPUS)}
        assert {(lr, r) for lr, r in heads if r} == {(str(r % NODE_GPUS), str(r))
                                                     for r in range(n * NODE_GPUS, (n + 1) * NODE_GPUS)}
        assert f["ranks"] == list(range(n * NODE_GPUS, (n + 1) * NODE_GPUS))
        # the 8 local ranks interleave: rank n*8's first lines are not all before rank n*8+1's first line
        first = [next(i for i, ln in enumerate(lines) if ln.startswith(f"[default{lr}]:")) for lr in range(NODE_GPUS)]
        assert max(first) < len(lines) // 4


def test_same_seed_same_bytes_and_another_seed_another_culprit(tmp_path):
    a_root, a = generate(tmp_path / "a", SIZE, seed=7, ranks=32, scenario="cascade")
    b_root, b = generate(tmp_path / "b", SIZE, seed=7, ranks=32, scenario="cascade")
    assert _digest(a_root, a) == _digest(b_root, b)
    culprits = {generate(tmp_path / f"s{s}", SIZE, seed=s, ranks=32, scenario="cascade")[1]["plan"]["culprit"]
                for s in range(4)}
    assert len(culprits) > 1


def test_the_default_scenario_is_unchanged(tmp_path):
    """The default bundle's bytes and manifest (no scenario/layout keys, a 256-rank job's lines whatever the file
    count) are those of GEN_VERSION 2, so existing bench-data bundles and their figures stay valid."""
    root, man = generate(tmp_path, SIZE, seed=7, ranks=32)
    assert "scenario" not in man and "layout" not in man and root.name == "logs-0.0005gib-32r-s7"
    text = _text(root)
    assert "using world size: 256, data-parallel size: 32" in text and set(re.findall(r"nranks (\d+)", text)) == {"256"}
    assert {"pytorch.watchdog_timeout", "python.traceback", "kernel.xid", "cuda.oom"} <= set(man["patterns"])
    again = json.loads((tmp_path / f"{root.name}.manifest.json").read_text())
    assert generate(tmp_path, SIZE, seed=7, ranks=32)[1] == again  # reused, not rewritten
    # the digest of this bundle made by logs.py before the scenario knob existed (git show 601c4eb:eval/bench/logs.py)
    assert _digest(root, man) == "cec95e61631931af39cbdd3f5668fd451b8a69a38122485ff4808d8dcb018cd7"


def test_a_node_layout_needs_the_cascade_and_whole_nodes(tmp_path):
    with pytest.raises(ValueError):
        generate(tmp_path, SIZE, ranks=36, scenario="cascade", layout="node")
    with pytest.raises(ValueError):
        generate(tmp_path, SIZE, ranks=32, layout="node")

