"""tools/sources/mpi.py: Open MPI's mpirun and Horovod, as they print a death or a stall; near-misses."""

from __future__ import annotations

import pytest
from matching import check, params

LINES = [
    ("mpirun: a rank killed by a signal",
     "mpirun noticed that process rank 3 with PID 0 on node gpu-07 exited on signal 9 (Killed).",
     {"mpi.process_exited": dict(failed_rank=3, host="gpu-07", signal=9)}),
    ("a distribution's wrapper names itself (Debian's mpirun.real), as does Open MPI 5's prterun",
     "mpirun.real noticed that process rank 1 with PID 39 on node mpi-test-2-mpijob-worker-1 exited on signal 9 (Killed).",
     {"mpi.process_exited": dict(failed_rank=1, host="mpi-test-2-mpijob-worker-1", signal=9)}),
    ("prterun", "prterun noticed that process rank 0 with PID 4242 on node gpu-07 exited on signal 6 (Aborted).",
     {"mpi.process_exited": dict(failed_rank=0, host="gpu-07", signal=6)}),
    ("mpirun: a non-zero exit (Open MPI prints two spaces)", "Primary job  terminated normally, but 1 process returned",
     {"mpi.nonzero_exit": {}}),
    ("Horovod shut down", "[1,0]<stderr>:Horovod has been shut down. This was caused by an exception on one of the "
     "ranks or an asynchronous completion of an operation.", {"horovod.shutdown": {}}),
    ("Horovod stall inspector", "[2024-03-01 10:00:00.000000: W /tmp/pip-install/horovod/common/stall_inspector.cc:107] "
     "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
     "for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
     "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock.",
     {"horovod.stall": {}}),
]

NEAR_MISSES = [
    ("mpirun starting", "mpirun -np 16 -H gpu-07:8,gpu-08:8 -bind-to none -map-by slot python train.py", {}),
    ("Horovod init", "[1,0]<stdout>:Horovod initialized: rank 0 of 16", {}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)
