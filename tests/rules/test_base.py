"""tools/rules/base.py: RuleInputs is a read-only view over the Investigation. The reports are read through (a
follow-up stage's report, filled after the view was made, is what the rules see when the answer is drawn again),
the scan is indexed once, and a rule cannot write into what the other rules read."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.investigation import Investigation
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.rules.software import exception

CUT = ["[rank0]: step 10 loss 2.31", '  File "/opt/train/loader.py", line 212, in __next__',
       "    batch = next(self._it)"]
REPORTS = ("scan", "nccl", "fr", "ais", "steps", "diff", "stacks", "hardware", "tails")


def test_reports_are_read_through_from_the_investigation(facts_from):
    f = facts_from({"rank0.log": CUT})
    assert [getattr(f, name) is getattr(f.inv, name) for name in REPORTS] == [True] * len(REPORTS)
    assert f.nccl is not None and f.fr is None and f.stacks == [] and f.tails == []


def test_a_follow_up_report_is_seen_without_a_new_view(facts_from):
    """The tails stage fills Investigation.tails after the first answer: the same view's rules see them."""
    f = facts_from({"rank0.log": CUT})
    assert exception(f) == []
    f.inv.tails = [Evidence(file="rank0.log", line=2, text=CUT[1], kind="generic", rank=0)]
    got = exception(f)
    assert [c.rule for c in got] == ["software.traceback_cut"] and got[0].evidence[0].line == 2


@pytest.mark.parametrize("name", REPORTS)
def test_a_rule_cannot_write_a_report(facts_from, name):
    f = facts_from({"rank0.log": CUT})
    with pytest.raises(AttributeError):
        setattr(f, name, None)


def test_the_scan_is_indexed_for_rules(facts_from):
    f = facts_from({"rank_3.log": ["[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered"]})
    hits = f.by_pattern
    pid = next(p for p in hits if p.startswith("pytorch.") or p.startswith("cuda."))
    ev = f.hits(pid)[0]
    assert ev.file == "rank_3.log" and ev.line == 1 and ev.rank == 3
    assert f.kinds == {"rank_3.log": f.inv.scan.files[0].kind}
    assert f.ranks_of(pid) == [3] and f.count(pid) == 1
    assert isinstance(f.fields_of(ev, pid), dict)


def test_a_view_of_an_investigation_made_by_hand(facts_from):
    """What tests and tools outside the pipeline build: the scan alone, no collective state."""
    scan = facts_from({"rank0.log": CUT}).scan
    f = RuleInputs(Investigation(scan=scan))
    assert f.nccl is None and f.messages is None and f.last_lines()[0].text == CUT[-1]


_SPAWN = [
    "Traceback (most recent call last):",
    '  File "/workspace/train_ddp.py", line 210, in <module>',
    "    mp.spawn(main, args=(world_size,), nprocs=world_size, join=True)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 203, in join',
    "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
    "torch.multiprocessing.spawn.ProcessRaisedException: ",
    "",
    "-- Process 3 terminated with the following error:",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 90, in _wrap',
    "    fn(i, *args)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 849, in save',
    "    with _open_zipfile_writer(f) as opened_zipfile:",
    "OSError: [Errno 122] Disk quota exceeded"]


def test_mp_spawn_s_child_traceback_is_its_process_index_s(facts_from):
    """torch.multiprocessing.spawn's parent names the child whose traceback follows (`-- Process 3 terminated with the
    following error:`): that traceback's lines are index 3's, the index spawn passed the child as its rank; the
    parent's own traceback above it is no child's."""
    f = facts_from({"output.txt": _SPAWN})
    inner = next(e for e in f.hits("python.traceback") if e.line == 9)
    assert f.spawned_index(inner) == 3
    assert f.spawned_index(next(e for e in f.hits("python.traceback") if e.line == 1)) is None
    from trainlog_debugger.tools.rules.base import candidate
    last = Evidence(file="output.txt", line=14, text=_SPAWN[-1])
    assert candidate("storage.disk_full", "storage_io", "quota", 0.85, [last], f).ranks == [3]
