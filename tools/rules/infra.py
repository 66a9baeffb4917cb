"""Host infrastructure: shared memory (/dev/shm) too small for NCCL or DataLoader workers, bus errors."""

from __future__ import annotations

from tools.rules.base import Facts, cand


def shm(f: Facts):
    evs = f.hits("nccl.shm_no_space", "loader.shm_insufficient")
    evs += [e for e in f.hits("io.no_space") if "/dev/shm" in e.text]
    if not evs:
        return []
    return [cand("infra.shm", "infrastructure", "shared memory (/dev/shm) exhausted: the container's /dev/shm is too "
                 "small", 0.85, evs[:3], f, recommendations=["run the container with a larger /dev/shm (docker "
                                                             "--shm-size / --ipc=host; k8s emptyDir medium Memory)",
                                                             "NCCL_SHM_DISABLE=1 as a workaround (slower)"])]


def bus_error(f: Facts):
    evs = f.hits("process.sigbus")
    return [cand("infra.sigbus", "infrastructure", "bus error (SIGBUS), typically shared memory exhausted", 0.6, evs[:2],
                 f, recommendations=["increase /dev/shm"])] if evs else []


RULES = [shm, bus_error]
