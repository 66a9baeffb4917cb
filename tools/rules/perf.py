"""Slow, not failed: step times that regressed, or a rank slower than its group (tools/steps*.py).

There is no "performance" category: a straggler rank slower than its group points at its node (GPU clocks,
thermals, PCIe, a noisy neighbour) → infrastructure; a job-wide slowdown is read through the step split when the
timers give one (communication-bound → network, data-bound → data_loading_stall, else infrastructure).
"""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate, restart_without

BY_BOUND = {"communication": "network", "data": "data_loading_stall"}


def slowdown(f: RuleInputs):
    rep = f.steps
    if rep is None:
        return []
    out = []
    for fd in rep.findings():
        if fd.id == "steps.straggler":
            out.append(candidate("perf.straggler", "infrastructure", fd.summary, 0.55, fd.evidence, f, status="slow",
                            ranks=fd.ranks, nodes=fd.nodes, restart=restart_without(fd.nodes[0])
                            if fd.nodes else "restart as is",
                            recommendations=["check that rank's GPU (clocks, temperature, ECC, PCIe width) and node "
                                             "(other jobs, CPU/memory pressure)"]))
        elif fd.id == "steps.regression":
            kind = rep.bound.kind if rep.bound else "unknown"
            out.append(candidate("perf.regression", BY_BOUND.get(kind, "infrastructure"), fd.summary, 0.5, fd.evidence, f,
                            status="slow", ranks=fd.ranks, nodes=fd.nodes, restart="restart as is",
                            recommendations=[f"the step time is {kind}-bound: look at what changed at that time "
                                             "(node, network, input pipeline, checkpointing)"]))
    return out[:4]


RULES = [slowdown]
