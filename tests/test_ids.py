"""Every dotted id written in code names something that exists: a catalog pattern, a rule, or an analysis finding.

Why: ids are plain strings. `f.hits("nccl.ib_completion_eror")` or `fd.id == "steps.stragler"` never raises. It
just never matches, so a rule goes quiet and no other test notices. The catalog (`sources.patterns()`) is the truth
for pattern ids. Rule ids are the first argument of `candidate(...)` (or `Candidate(rule=...)`) in tools/rules/. Analyses
declare their own Finding ids with `Finding(id=...)` or an `{"id": ...}` dict (flight recorder). An f-string id
(`f"scheduler.{x}"`) declares a family by its static prefix. A literal is checked when it looks like `source.event`
and its first segment is a known prefix. File names and module paths are not ids and are skipped.
Ids must also be unambiguous: a Diagnosis chain mixes pattern, rule and analysis Findings by id.
"""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict
from pathlib import Path


from trainlog_debugger.tools import sources
from trainlog_debugger.tools.sources.pytorch.collectives import ROLE_ORDER

ROOT = Path(__file__).parents[1]
ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_.]+$")
FILE_SUFFIXES = {"py", "log", "json", "jsonl", "yaml", "yml", "md", "txt", "out", "err", "gz", "tar", "zip", "pkl",
                 "csv", "toml", "sh", "html"}
PATTERN_IDS = [p.id for mod in sources.SOURCES.values() for p in getattr(mod, "PATTERNS", ())]
SOURCE_PREFIXES = {i.split(".")[0] for i in PATTERN_IDS}
# f-string families directly under a source prefix would hide that whole source from the check, so each is
# expanded here (a new one fails test_dynamic_families_are_expanded until it is listed).
EXPANDED = {"nccl.": ROLE_ORDER, "ais.": ("target_side", "proxy_side", "cluster_wide")}  # collectives; ais/report


def walk(rel: str, source: str, out: dict) -> None:
    """Collect literals, rule ids (with their rule function), Finding ids, f-string families and imported names."""
    tree = ast.parse(source, rel)
    fstring_parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}

    def declare(kind: str, node: ast.AST, where: str) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out[kind][node.value].add(where)
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            out["families"][node.values[0].value].add(f"{rel}:{node.lineno}")

    for top in tree.body:
        for n in ast.walk(top):
            name = getattr(getattr(n, "func", None), "id", None) or getattr(getattr(n, "func", None), "attr", None)
            if isinstance(n, ast.Call) and rel.startswith("tools/rules/") and name in ("candidate", "Candidate"):
                args = n.args[:1] + [k.value for k in n.keywords if k.arg == "rule"]
                for a in args:
                    declare("rules", a, f"{rel}:{getattr(top, 'name', '?')}")
            elif isinstance(n, ast.Call) and name == "Finding":
                for k in n.keywords:
                    if k.arg == "id":
                        declare("findings", k.value, rel)
            elif isinstance(n, ast.Dict):
                for k, v in zip(n.keys, n.values):
                    if isinstance(k, ast.Constant) and k.value == "id" and rel.startswith("tools/"):
                        declare("findings", v, rel)
            elif isinstance(n, ast.Import | ast.ImportFrom):
                out["modules"].update(a.name for a in n.names)
                out["modules"].add(getattr(n, "module", None) or "")
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in fstring_parts:
                out["literals"].append((f"{rel}:{n.lineno}", n.value))


def collect(files: dict[str, str]) -> dict:
    out = {"rules": defaultdict(set), "findings": defaultdict(set), "families": defaultdict(set),
           "modules": set(), "literals": []}
    for rel, src in files.items():
        walk(rel, src, out)
    return out


FILES = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
         for top in ("tools", "agent", "eval") for p in sorted((ROOT / top).rglob("*.py"))}
CODE = collect(FILES)


def unknown_ids(code: dict) -> list[str]:
    """file:line 'literal' for every id-shaped literal that names no pattern, rule or finding."""
    known = set(PATTERN_IDS) | set(code["rules"]) | set(code["findings"])
    known |= {f"{fam}{x}" for fam, xs in EXPANDED.items() for x in xs}
    open_families = tuple(f for f in code["families"] if f not in EXPANDED)
    prefixes = SOURCE_PREFIXES | {i.split(".")[0] for i in known}
    out = []
    for where, v in code["literals"]:
        if (not ID.match(v) or v.split(".")[0] not in prefixes or v.startswith("trainlog_debugger.")
                or v in code["modules"] or v.rsplit(".", 1)[-1] in FILE_SUFFIXES):
            continue
        if v not in known and not v.startswith(open_families):
            out.append(f"{where} {v!r}")
    return out


def test_every_id_literal_is_known():
    bad = unknown_ids(CODE)
    assert not bad, "ids that are no catalog pattern, rule or Finding id:\n  " + "\n  ".join(bad)


def test_pattern_ids_are_unique_and_dotted():
    assert len(PATTERN_IDS) > 50
    assert [i for i, n in Counter(PATTERN_IDS).items() if n > 1] == []
    assert [i for i in PATTERN_IDS if not ID.match(i)] == []


def test_rule_ids_are_unique():
    """One id, one rule function (a function may emit its id from several branches)."""
    assert len(CODE["rules"]) > 30, "the walker found almost no rule ids"
    shared = {r: sorted(fns) for r, fns in CODE["rules"].items() if len(fns) > 1}
    assert not shared, f"rule ids emitted by more than one rule: {shared}"


def test_ids_do_not_collide():
    """A rule id never equals a pattern id (no deliberate overlap exists: diagnose puts both in one chain). A
    Finding id equals a pattern id only in diagnose.py, where that Finding reports the pattern's own lines."""
    patterns = set(PATTERN_IDS)
    assert set(CODE["rules"]) & patterns == set()
    assert [f for f in CODE["families"] if f.rstrip(".") in SOURCE_PREFIXES and f not in EXPANDED] == []
    assert {f"{fam}{x}" for fam, xs in EXPANDED.items() for x in xs} & patterns == set()
    assert {f: w for f, w in CODE["findings"].items() if f in patterns and w != {"tools/diagnose.py"}} == {}


def test_dynamic_families_are_expanded():
    for fam in EXPANDED:
        assert fam in CODE["families"], f"no f-string id family {fam!r} left: drop it from EXPANDED"


def test_unknown_id_is_caught():
    src = ('def f(x):\n    x.hits("nccl.ib_completion_eror", "nccl.ib_completion_error")\n'
           '    return "slurm.log", "gpu.xid", "nccl.crashed"\nimport torch.distributed\nT = "torch.distributed"\n')
    code = collect({"tools/rules/x.py": src, "tools/rules/y.py": 'def g():\n    candidate("gpu.xid")\n'})
    assert unknown_ids(code) == ["tools/rules/x.py:2 'nccl.ib_completion_eror'"]
