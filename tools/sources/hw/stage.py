"""The hardware stage: every hardware and fabric snapshot of the bundle as records, each with its node, into
Investigation.hardware (tools/rules/hardware.py names the node out of line with its peers).

Why a stage: a snapshot (`nvidia-smi -q`, `ibstat`, `perfquery`, nccl-tests, `dcgmi diag`, `nvidia-smi topo -m`) is
a table of values per device, not log lines; only a bundle holding some pays for reading them. Their nodes are
matched with the ones the worker logs state (the scan), so a bad node's ranks are named too.
"""

from __future__ import annotations

from trainlog_debugger.tools.investigation import Context, Stage
from trainlog_debugger.tools.sources.detect import HW_KINDS


def has_snapshots(ctx: Context) -> bool:
    return any(s.kind in HW_KINDS for s in ctx.bundle.sources)


def read_snapshots(ctx: Context) -> tuple[object, list[str]]:
    """(the records; the notes of what could not be read, what was cut, which snapshots name no node)."""
    from trainlog_debugger.tools.sources.hw.read import read_hardware
    return read_hardware(ctx.bundle, ctx.inv.scan, HW_KINDS)


STAGE = Stage("hardware", when=has_snapshots, run=read_snapshots)
