"""Diagnosis rules, one family per module; each rule is a pure function RuleInputs → [Candidate], where RuleInputs
is the read-only view over the Investigation (tools/rules/base.py).

Adding a rule: write the function in its family module, add it to that module's RULES, add a table row to
tests/rules/test_<family>.py. The registry below is the only list the diagnosis reads.
"""

from trainlog_debugger.tools.rules import asymmetry
from trainlog_debugger.tools.rules import catalog
from trainlog_debugger.tools.rules import collective
from trainlog_debugger.tools.rules import config
from trainlog_debugger.tools.rules import data
from trainlog_debugger.tools.rules import gpu
from trainlog_debugger.tools.rules import hardware
from trainlog_debugger.tools.rules import infra
from trainlog_debugger.tools.rules import meaning
from trainlog_debugger.tools.rules import network
from trainlog_debugger.tools.rules import oom
from trainlog_debugger.tools.rules import perf
from trainlog_debugger.tools.rules import scheduler
from trainlog_debugger.tools.rules import software
from trainlog_debugger.tools.rules import storage
from trainlog_debugger.tools.rules.base import Candidate, RuleInputs

FAMILIES = (gpu, hardware, oom, network, collective, storage, scheduler, config, data, infra, software, perf, catalog, asymmetry, meaning)
RULES = [r for fam in FAMILIES for r in fam.RULES]

__all__ = ["RULES", "FAMILIES", "Candidate", "RuleInputs"]
