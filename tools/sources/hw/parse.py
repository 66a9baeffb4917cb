"""Which tool printed a snapshot, from its content (names lie: `node3.txt`, `out.log`), and its records. Pure.
The content tests are the source detector's (tools/sources/hw/format.py HW_CONTENT), so a file is read by the parser
of the kind it was sniffed as, and a renamed file still finds its parser."""

from __future__ import annotations

from trainlog_debugger.tools.sources.hw import dcgmi, ib, nccl_tests, nvsmi_q, perfquery, topo
from trainlog_debugger.tools.sources.hw.record import Record
from trainlog_debugger.tools.sources.hw.format import (DCGM_DIAG, GPU_TOPO, IB_COUNTERS, IB_STATUS, NCCL_TESTS,
                                                       NVIDIA_SMI, hardware_kind)


def _ib(file: str, text: str) -> list[Record]:
    return ib.parse_devinfo(file, text) if "hca_id:" in text else ib.parse_ibstat(file, text)


PARSERS = {DCGM_DIAG: dcgmi.parse, NCCL_TESTS: nccl_tests.parse, IB_COUNTERS: perfquery.parse, IB_STATUS: _ib,
           GPU_TOPO: topo.parse, NVIDIA_SMI: nvsmi_q.parse}


def which(text: str) -> str | None:
    """The snapshot kind of `text` (a kind of tools/sources/hw/format.py), None when no hardware tool printed it."""
    return hardware_kind(text)


def parse_any(file: str, text: str) -> list[Record]:
    """Records of the parser of the text's kind; [] for text no parser knows (never an exception: a truncated or
    foreign file yields what it holds)."""
    fn = PARSERS.get(hardware_kind(text) or "")
    if fn is None:
        return []
    try:
        return fn(file, text)
    except (ValueError, IndexError, KeyError, TypeError):
        return []
