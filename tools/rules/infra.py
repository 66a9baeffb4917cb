"""Host infrastructure: shared memory (/dev/shm) too small for NCCL or DataLoader workers, bus errors."""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate


def shm(f: RuleInputs):
    evs = f.hits("nccl.shm_no_space", "loader.shm_insufficient")
    evs += [e for e in f.hits("io.no_space") if "/dev/shm" in e.text]
    if not evs:
        return []
    return [candidate("infra.shm", "infrastructure", "shared memory (/dev/shm) exhausted: the container's /dev/shm is too "
                 "small", 0.85, evs[:3], f, recommendations=["run the container with a larger /dev/shm (docker "
                                                             "--shm-size / --ipc=host; k8s emptyDir medium Memory)",
                                                             "NCCL_SHM_DISABLE=1 as a workaround (slower)"])]


def bus_error(f: RuleInputs):
    evs = f.hits("process.sigbus")
    return [candidate("infra.sigbus", "infrastructure", "bus error (SIGBUS), typically shared memory exhausted", 0.6, evs[:2],
                 f, recommendations=["increase /dev/shm"])] if evs else []


def killed_from_outside(f: RuleInputs):
    """A worker ended by SIGKILL (exit -9) whose own log shows no error: something outside the process killed it
    (the kernel OOM killer, a cgroup limit, an operator, a node agent). -15 is the launcher's own stop and -6 the
    NCCL watchdog's abort: both are cascade, not this."""
    killed = []
    for e in f.hits("torchrun.exitcode", "torchrun.signal_received"):
        fx = f.fields_of(e, "torchrun.exitcode") or f.fields_of(e, "torchrun.signal_received")
        if (fx.get("exitcode") == -9 or fx.get("signal") == "SIGKILL") and e.rank is not None:
            killed.append(e)
    if not killed:
        return []
    ranks = sorted({e.rank for e in killed})
    own_errors = {e.rank for pid, s in f.summaries.items() if s.role == "root_candidate" and s.tier in (1, 2)
                  and not pid.startswith("torchrun.") for e in f.hits(pid) if e.rank in ranks}
    silent = [r for r in ranks if r not in own_errors]
    if not silent:
        return []
    evs = [e for e in killed if e.rank in silent][:2]
    return [candidate("infra.killed_from_outside", "infrastructure", f"rank(s) {', '.join(map(str, silent))} were killed "
                 f"with SIGKILL and their own logs show no error: killed from outside the process", 0.6, evs, f,
                 ranks=silent, recommendations=["check the host's kernel log for the OOM killer or a cgroup limit at "
                                                "that time (dmesg / journalctl -k), and the scheduler's events"])]


RULES = [shm, bus_error, killed_from_outside]
