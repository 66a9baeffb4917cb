"""Culprit precision (issue 10, mechanism 5): the culprit's node is named wherever the bundle states it, and only
there. NCCL's communicator-init line states the host of rank R of a communicator; for the communicator of the whole
world that is global rank R, for a smaller group it is not."""

from __future__ import annotations

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate

OOM = ("[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {d} has a total "
       "capacity of 79.10 GiB of which 1.23 GiB is free.")


def _node_file(tmp_path, name: str, host: str, first: int, nranks: int, extra: list[str] = ()):
    lines = [f"{host}:{4000 + d}:{4100 + d} [{d}] NCCL INFO ncclCommInitRank comm 0x7f{d:02x} rank {first + d} "
             f"nranks {nranks} cudaDev {d} nvmlDev {d} busId {d}1000 commId 0xabc - Init COMPLETE" for d in range(4)]
    (tmp_path / name).write_text("\n".join(lines + list(extra)) + "\n")


def test_the_culprit_node_comes_from_the_world_communicator_init_line(tmp_path):
    _node_file(tmp_path, "job.part-a.txt", "trn-r3-12", 0, 8)
    _node_file(tmp_path, "job.part-b.txt", "trn-r3-13", 4, 8, [OOM.format(r=6, d=2)])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "oom" and d.culprit_ranks == [6] and d.culprit_nodes == ["trn-r3-13"], d.headline


def test_a_subgroup_rank_number_is_not_a_global_rank(tmp_path):
    """Tensor-parallel groups of 4: `rank 2 nranks 4` on trn-r3-12 says nothing about global rank 2's host."""
    _node_file(tmp_path, "tp.txt", "trn-r3-12", 0, 4)
    (tmp_path / "rank_2.log").write_text("".join(f"[rank{r}]: step 10\n" for r in range(8)) + OOM.format(r=2, d=2) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [2] and d.culprit_nodes == [], d.headline


ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_hardware_fault_with_no_host_anywhere_asks_for_the_node(tmp_path):
    """A bare paste: the category is certain, the node is not in it. The answer names no node and asks for one."""
    (tmp_path / "paste.log").write_text(ECC + "\nCUDA kernel errors might be asynchronously reported at some other "
                                              "API call, so the stacktrace below might be incorrect.\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "gpu_cuda" and d.culprit_nodes == [], d.headline
    assert any("no line in the bundle names a host" in m for m in d.missing), d.missing


def test_a_hardware_fault_on_a_named_host_does_not_ask_for_it(tmp_path):
    _node_file(tmp_path, "job.part-a.txt", "trn-r3-12", 0, 4, [f"[rank2]: {ECC}"])
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "gpu_cuda" and d.culprit_nodes == ["trn-r3-12"], d.headline
    assert not any("names a host" in m for m in d.missing), d.missing
