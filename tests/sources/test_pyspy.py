"""tools/sources/pyspy/format.py: frames of py-spy and faulthandler stack dumps that place a thread in the DataLoader's
queue wait or inside a torch.distributed collective. Lines as the tools print them (py-spy 0.3: `func (file:line)`,
faulthandler: `File "path", line N in func`); near-misses that must not match."""

from __future__ import annotations

import pytest
from matching import check, params

LOADER = "pyspy.loader_wait"
COLL = "pyspy.in_collective"

FRAMES = [
    ("py-spy: main thread waiting on the loader queue",
     "    _try_get_data (torch/utils/data/dataloader.py:1011)", {LOADER: dict(func="_try_get_data")}),
    ("py-spy: one frame up",
     "    _next_data (torch/utils/data/dataloader.py:1207)", {LOADER: dict(func="_next_data")}),
    ("py-spy, absolute site-packages path",
     "    _get_data (/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py:1163)",
     {LOADER: dict(func="_get_data")}),
    ("faulthandler",
     '  File "/usr/local/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1011 in _try_get_data',
     {LOADER: dict(func="_try_get_data")}),
    ("py-spy: inside a collective",
     "    broadcast (torch/distributed/distributed_c10d.py:1191)", {COLL: dict(func="broadcast")}),
    ("faulthandler: inside a collective",
     '  File "/opt/torch/distributed/distributed_c10d.py", line 2050 in all_reduce', {COLL: dict(func="all_reduce")}),
    ("probing: the python.backtrace table's header, bordered",
     "| func          | file                          | lineno | depth | frame_type |", {"pyspy.probing_table": {}}),
    ("probing: as CSV", "func,file,lineno,depth", {"pyspy.probing_table": {}}),
    ("faulthandler's header of another thread, under srun's label",
     "11: Thread 0x00007f38c27fc700 (most recent call first):", {"pyspy.fh_thread": {}}),
    ("faulthandler's header of the thread that dumped", "Current thread 0x00007f3a9c7ff740 (most recent call first):",
     {"pyspy.fh_thread": {}}),
]

NEAR_MISSES = [
    ("the iterator's __next__ alone is not a wait", "    __next__ (torch/utils/data/dataloader.py:530)", {}),
    ("a collective in a user's module, not c10d", "    broadcast_data (megatron/mpu/data.py:88)", {}),
    ("a log line naming the loader", "[rank0]: UserWarning: torch/utils/data/dataloader.py: num_workers is large", {}),
    ("prose about a function's file and line", "the func, file and lineno of the caller are logged", {}),
    ("a Python traceback's header: the traceback's, not a dump's", "Traceback (most recent call last):",
     {"python.traceback": {}}),
]


@pytest.mark.parametrize("line, expected", params(FRAMES))
def test_frames(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
