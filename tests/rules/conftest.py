"""RuleInputs for rule tests, built the real way: lines written to files, scanned, analysed. A rule test is then a
table of (log lines → the rule that must or must not fire)."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.investigation import Investigation
from trainlog_debugger.tools.sources.pytorch.collectives import analyze
from trainlog_debugger.tools.rules import RuleInputs
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.sources.messages import catalog


@pytest.fixture
def facts_from(tmp_path):
    def make(files: dict[str, list[str]]) -> RuleInputs:
        d = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        for name, lines in files.items():
            (d / name).write_text("\n".join(lines) + "\n")
        with open_bundle(d) as b:
            scan = scan_bundle(b)
        return RuleInputs(Investigation(scan=scan, nccl=analyze(scan)), messages=catalog)
    return make
