"""nccl-tests output (`all_reduce_perf`, `all_gather_perf`, ...): the run's average bus bandwidth, the rows per
message size, and the hosts its ranks ran on. One file per node or per node pair, as engineers run them.

Format (NVIDIA/nccl-tests `src/common.cu`):

    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  12345 on    node-17 device  0 [0x18] NVIDIA H100 80GB HBM3
    #                                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
      8589934592    2147483648     float     sum      -1    90330  118.87  222.88      0    91945  116.78  218.96      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 220.921
    #
    # Collective test concluded: all_reduce_perf

Versions: before 2.13 the rank line has no `Group` field (`#  Rank  0 Pid  12345 on node-17 device ...`) and the
last column is `error` (a float such as `1e-07`, or `N/A` without validation) instead of `#wrong`; before 2.11 the
table has no `redop`/`root` columns for all_gather. The out-of-place busbw is read as the 6th cell from the right of
a row, so all layouts read the same. Sources: nccl-tests README and published outputs.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of, to_float, to_int

TOOL = "nccl-tests"
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d{1,7})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S{1,128})\s+device\s+(\d{1,3})")
_ROW = re.compile(r"^\s*(\d{1,15})\s+(\d{1,15})\s+(\w+)\s+(.*)$")
_TEST = re.compile(r"^#\s*Collective test concluded:\s*(\w{1,40})")
_HEADER = re.compile(r"^# nThread \d+ nGpus \d+ minBytes (\d{1,15}) maxBytes (\d{1,15})")
MAX_HOSTS = 4096


def parse(file: str, text: str) -> list[Record]:
    """One Record for the run (`avg_busbw`, `max_size_busbw`, `test`; `max_bytes` from its header and `last_row`,
    the size of its last result row, to tell where a run that never concluded stopped), hosts from the rank lines in
    order of first appearance."""
    rec = Record(TOOL, file, "run")
    hosts: list[str] = []
    best: tuple[int, float, int, str] | None = None  # (size, busbw, line, raw)
    for i, raw in enumerate(lines_of(text), 1):
        if m := _RANK.match(raw):
            if m.group(2) not in hosts and len(hosts) < MAX_HOSTS:
                hosts.append(m.group(2))
            if "hosts_line" not in rec.values:
                rec.values["hosts_line"] = Value(m.group(2), evidence(file, i, raw))
        elif m := _AVG.match(raw):
            bw = to_float(m.group(1))
            if bw is not None:
                rec.values["avg_busbw"] = Value(bw, evidence(file, i, raw))
        elif m := _TEST.match(raw):
            rec.values["test"] = Value(m.group(1), evidence(file, i, raw))
        elif m := _HEADER.match(raw):
            rec.values["max_bytes"] = Value(to_int(m.group(2)), evidence(file, i, raw))
        elif not raw.startswith("#") and (m := _ROW.match(raw)):
            nums = m.group(4).split()
            bw = _busbw(nums)
            size = to_int(m.group(1))
            if bw is not None and size is not None and (best is None or size >= best[0]):
                best = (size, bw, i, raw)
            if bw is not None and size is not None:
                rec.values["last_row"] = Value(size, evidence(file, i, raw))
    if best:
        rec.values["max_size_busbw"] = Value(best[1], evidence(file, best[2], best[3]))
        rec.values["max_size"] = Value(best[0], evidence(file, best[2], best[3]))
    rec.hosts = tuple(hosts)
    return [rec] if "avg_busbw" in rec.values or best else []


def _busbw(cells: list[str]) -> float | None:
    """The out-of-place busbw of a size row: after `type`, the cells are [redop [root]] time algbw busbw wrong
    time algbw busbw wrong. Counted from the right (8 cells for both halves), so the optional columns do not
    matter; None for a row that is not a result row."""
    if len(cells) < 8:
        return None
    return to_float(cells[-6])
