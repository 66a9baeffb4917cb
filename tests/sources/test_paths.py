"""tools/sources/paths.py: what a file's path states (rank, local rank, node, restart, job), from every source's
PATH_HINTS found through the registry, plus the generic labels; combined hints keep their order of first use."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.sources import SOURCES
from trainlog_debugger.tools.sources.declare import PathRule
from trainlog_debugger.tools.sources.paths import GENERIC, PathHint, attribute_path, rules

DECLARED = [(src, r) for src, mod in SOURCES.items() for r in getattr(mod, "PATH_HINTS", ())] + \
    [("generic", r) for r in GENERIC]


def test_the_sources_declare_their_path_hints():
    assert {"torchrun", "ais", "slurm", "cloud"} <= {s for s, _ in DECLARED}
    parts, whole = rules()
    assert len(parts) + len(whole) == len(DECLARED)


@pytest.mark.parametrize("src,rule", DECLARED, ids=[f"{s}-{r.place}" for s, r in DECLARED])
def test_every_path_rule_recognises_its_example_through_the_registry(src, rule):
    assert isinstance(rule, PathRule) and rule.scope in ("part", "path")
    hit = rule.test(rule.example) if rule.scope == "path" else next(
        (h for p in rule.example.replace("!", "/").split("/") if (h := rule.test(p))), None)
    assert hit is not None, f"{src}: {rule.example} not recognised"
    hint = attribute_path(rule.example)
    assert hit[0] in (hint.style or "").split("+")
    assert all(getattr(hint, k) == v for k, v in hit[1].items())


@pytest.mark.parametrize("rel,hint", [
    ("logs/7310_ab/attempt_2/3/stderr.log", PathHint(local_rank=3, attempt=2, style="torchrun_logdir")),
    ("job.tgz!logs/7310_ab/attempt_0/1/error.json", PathHint(local_rank=1, attempt=0, style="torchrun_logdir")),
    # not a file torchrun writes there, and not a log-dir layout: no hint
    ("logs/7310_ab/attempt_0/3/notes.txt", PathHint()), ("logs/my_attempt_0/3/stderr.log", PathHint()),
    ("slurm-4891784.out", PathHint(job_id="4891784", style="slurm_job")),
    ("error-4891784-3.out", PathHint(job_id="4891784", node_index=3, style="slurm_node_file")),
    ("job_4891784/rank_5.log", PathHint(rank=5, job_id="4891784", style="slurm_job+rank_name")),
    ("aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171", PathHint(node="KqRt8081", style="aistore")),
    ("vertex/workerpool0-1/stderr", PathHint(node="workerpool0-1", style="vertex_task")),
    ("worker_3.log", PathHint()), ("node_3.log", PathHint()),
])
def test_attribute_path(rel, hint):
    assert attribute_path(rel) == hint
