"""Wording families that need no rule of their own: a catalog pattern with a `weight` is, by itself, a root
candidate of its category.

Why: most of the catalog's breadth (another launcher's way of saying a worker died, another trainer's NaN check,
nvidia-smi's view of a lost GPU) means exactly what its category says, and a rule per wording is how a catalog
turns into one rule per incident. A pattern that needs context to mean something (a count, a rank asymmetry, a
cross-source chain) keeps a specific rule and no weight.
"""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate
from trainlog_debugger.tools.sources import patterns


def weighted_patterns(f: RuleInputs):
    out = []
    for p in patterns():
        if p.weight is None or p.category is None:  # P() gives every weighted pattern a category
            continue
        evs = f.hits(p.id)
        if evs:
            # a line that names the node it is about (`Remote daemon: ... on node gpu-node-12`, Megatron's `found NaN
            # ... node: gpu-b02`): that node, not the one of the file that printed it (mpirun's own)
            hosts = list(dict.fromkeys(h for e in evs[:3] if (h := f.fields_of(e, p.id).get("host"))))
            out.append(candidate(f"catalog.{p.id}", p.category, p.summary, p.weight, evs[:3], f, status=p.status,
                                 nodes=hosts or None, recommendations=[p.advice] if p.advice else []))
    return out


RULES = [weighted_patterns]
