"""Diagnosis rules, one family per module; each rule is a pure function Facts → [Candidate].

Adding a rule: write the function in its family module, add it to that module's RULES, add a table row to
tests/rules/test_<family>.py. The registry below is the only list the diagnosis reads.
"""

from tools.rules import collective, config, data, gpu, infra, network, oom, perf, scheduler, software, storage
from tools.rules.base import Candidate, Facts

FAMILIES = (gpu, oom, network, collective, storage, scheduler, config, data, infra, software, perf)
RULES = [r for fam in FAMILIES for r in fam.RULES]

__all__ = ["RULES", "FAMILIES", "Candidate", "Facts"]
