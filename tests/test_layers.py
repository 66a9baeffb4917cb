"""The module layout's import rules (STYLE.md, "Module layout"), enforced by walking every import with `ast`.

Why a test and not a review habit: each rule keeps one promise of the layout, and a single stray import breaks it
silently. tools/ is the deterministic core, so it never pulls in a front end or the LLM stack. Format modules under
tools/sources/ are what the registry and the scanner load, so they stay cheap: the model, tools/lines, the pattern
type and each other. Rules are pure functions, so they do no I/O. The agent graph must not know its front ends. The
agent and eval do not import each other, except the `debugger eval` command in agent/cli/. And nothing imports the
pre-namespace top-level names (`tools`, `agent`, ...): after install those are someone else's packages.

Every import counts, including imports inside functions. Relative imports are resolved to absolute names, and
`from pkg import mod` counts as `pkg.mod` when `mod` is a module, so both spellings of one import are caught.
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NS = "trainlog_debugger"
PACKAGES = ("tools", "agent", "eval", "prompts")

# Known violations, as (rule, file, imported module): to be removed by the layout refactor. A fixed entry fails
# test_allowlist_is_current, so this list can only shrink.
ALLOWLIST: set[tuple[str, str, str]] = set()  # (rule, file, imported module): known violations, to be removed


def module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((NS, *parts) if parts[0] in PACKAGES else parts)


FILES = sorted(p.relative_to(ROOT) for top in (*PACKAGES, "tests") for p in (ROOT / top).rglob("*.py"))
KNOWN = {module_name(p) for p in FILES if p.parts[0] in PACKAGES}


@lru_cache(maxsize=None)  # every rule re-reads the same files
def scan(rel: Path, source: str) -> tuple[list[tuple[int, str]], list[int]]:
    """(line, absolute module) for every import in the source, and the lines that call the builtin open()."""
    mod, imports, opens = module_name(rel), [], []
    package = mod if rel.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, str(rel))):
        if isinstance(node, ast.Import):
            imports += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{head}.{base}" if base else head
            for a in node.names:
                name = f"{base}.{a.name}" if f"{base}.{a.name}" in KNOWN else base
                if (node.lineno, name) not in imports:
                    imports.append((node.lineno, name))
        elif isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Name) and node.func.id == "open")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "open"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("builtins", "io", "os"))):
            opens.append(node.lineno)
    return imports, opens


def under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def is_format(rel: Path) -> bool:
    """tools/sources/__init__.py (the registry), pattern.py, detect.py and every <name>.py single-file source;
    <pkg>/format.py; and <pkg>/__init__.py, which runs whenever <pkg>.format is imported."""
    p = rel.parts
    return p[:2] == ("tools", "sources") and (len(p) == 3 or (len(p) == 4 and p[3] in ("format.py", "__init__.py")))


FORMAT_MODULES = {module_name(p) for p in FILES if is_format(p)}
T = f"{NS}.tools"
IO_MODULES = ("os", "io", "pathlib", "subprocess", "shutil", "socket", "tempfile", "glob", "urllib", "http")


def format_ok(name: str) -> bool:
    return (name.split(".")[0] in sys.stdlib_module_names or name in FORMAT_MODULES
            or under(name, f"{T}.model", f"{T}.lines"))


def rules_ok(name: str) -> bool:
    """Rules read the model, other rules, pure helpers (lines, ranks), the catalog's data (format modules) and
    analyses' result types (`report` / `result` modules, and the Investigation that holds them)."""
    if under(name, *IO_MODULES):
        return False
    if not under(name, NS):
        return True
    return (format_ok(name) or under(name, f"{T}.rules", f"{T}.ranks", f"{T}.investigation")
            or (under(name, T) and name.rsplit(".", 1)[-1] in ("report", "result")))


def scan_bundle_ok(name: str) -> bool:
    """The scanner and the bundle layer know no source (issue 26): of tools/ they import themselves, the model and
    pure helpers (grouped evidence: tools.groups), and of the sources only the registry and the format floor. What a source adds to a scan (per-hit
    hooks, post-scan steps, re-read verifiers, extra readers) reaches them through the registry or from the caller."""
    if not under(name, T):
        return True
    return format_ok(name) or under(name, f"{T}.scan", f"{T}.bundle", f"{T}.evidence", f"{T}.ranks",
                                    f"{T}.jsonable", f"{T}.groups")


def reaches(name: str, target: tuple[str, ...], seen: set[str] | None = None) -> str | None:
    """The chain of imports by which module `name` (one of ours) ends up importing one of `target`, or None."""
    seen = set() if seen is None else seen
    if name in seen or name not in KNOWN:
        return None
    seen.add(name)
    rel = next(p for p in FILES if module_name(p) == name)
    for _, imp in scan(rel, SOURCES[rel])[0]:
        if under(imp, *target):
            return f"{name} -> {imp}"
        via = reaches(imp, target, seen)
        if via:
            return f"{name} -> {via}"
    return None


FRONT_ENDS = ("rich", "typer", "slack_bolt")
# rule -> (which files it applies to, which imported names are allowed)
RULES = {
    "a_tools_core": (lambda p: p.parts[0] == "tools", lambda n: not under(
        n, f"{NS}.agent", f"{NS}.eval", f"{NS}.prompts", *FRONT_ENDS, "langgraph", "langchain_anthropic", "anthropic")),
    "b_source_formats": (is_format, format_ok),
    "c_rules_pure": (lambda p: p.parts[:2] == ("tools", "rules"), rules_ok),
    "d_graph_no_front_ends": (lambda p: p.parts[:2] == ("agent", "graph"), lambda n: not under(
        n, *FRONT_ENDS, f"{NS}.agent.cli", f"{NS}.agent.render", f"{NS}.agent.slack")),
    "e_render_not_cli": (lambda p: p.parts[:2] == ("agent", "render"), lambda n: not under(n, f"{NS}.agent.cli")),
    "e_agent_not_eval": (lambda p: p.parts[0] == "agent" and p.parts[1] != "cli",
                         lambda n: not under(n, f"{NS}.eval")),
    "e_eval_not_agent": (lambda p: p.parts[0] == "eval", lambda n: not under(n, f"{NS}.agent")),
    "f_no_old_names": (lambda p: True, lambda n: not under(n, *PACKAGES)),
    # The Slack bot is a front end: of tools/ it uses only the public entry points (open a bundle, run the
    # pipeline, the model, redaction), never an analysis's internals; and it does not import the CLI.
    "g_slack_front_end": (lambda p: p.parts[:2] == ("agent", "slack"), lambda n: not under(n, f"{NS}.agent.cli") and (
        not under(n, T) or under(n, f"{T}.pipeline", f"{T}.model", f"{T}.redact", f"{T}.bundle.open"))),
    "h_scan_bundle_no_analysis": (lambda p: p.parts[:2] in (("tools", "scan"), ("tools", "bundle")), scan_bundle_ok),
    # Slack renders Markdown without rich, which is a terminal library: not imported directly nor through any module
    # of ours that the bot imports (the Markdown renderer is rich-free)
    "i_slack_no_rich": (lambda p: p.parts[:2] == ("agent", "slack"),
                        lambda n: not under(n, "rich") and not (under(n, NS) and reaches(n, ("rich",)))),
}


REPORT_FIELDS = ("scan", "nccl", "fr", "ais", "steps", "diff", "stacks", "hardware")


def _report(node: ast.AST) -> bool:
    """`inv.<report>` or `<x>.inv.<report>`: one of the Investigation's reports (the Diagnosis is the model, read
    directly)."""
    if not (isinstance(node, ast.Attribute) and node.attr in REPORT_FIELDS):
        return False
    v = node.value
    return (isinstance(v, ast.Name) and v.id == "inv") or (isinstance(v, ast.Attribute) and v.attr == "inv")


def report_reaches(source: str, rel: str) -> list[tuple[int, str]]:
    """(line, what) where agent code reads a report other than through `to_json()` (issue 26): an attribute other
    than to_json, a subscript, or binding the report to a name (after which its fields could be read unseen). The
    report may be tested for None and passed on whole."""
    out = []
    for node in ast.walk(ast.parse(source, rel)):
        if isinstance(node, ast.Attribute) and _report(node.value) and node.attr != "to_json":
            out.append((node.lineno, f"reads .{node.attr} of inv.{node.value.attr}"))
        elif isinstance(node, ast.Subscript) and _report(node.value):
            out.append((node.lineno, f"subscripts inv.{node.value.attr}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                and _report(node.value):
            out.append((node.lineno, f"binds inv.{node.value.attr} to a name"))
    return out


def test_agent_reads_reports_through_to_json():
    """The LLM agent sees what a report's `to_json()` says, so a report's internals can change without the agent's
    tools silently reading stale fields; the renderers (agent/render) draw reports and may read them."""
    found = [f"{p}:{line}: {what}" for p, src in SOURCES.items() if p.parts[:2] == ("agent", "graph")
             for line, what in report_reaches(src, str(p))]
    assert not found, "\n  ".join(found)


@pytest.mark.parametrize("source,caught", [
    ("rows = box.inv.nccl.rows\n", True), ("x = inv.scan.files[0]\n", True), ("rep = inv.nccl\n", True),
    ("d = inv.nccl.to_json()\n", False), ("if box.inv.diff is None: pass\n", False), ("return_(inv.scan)\n", False),
    ("v = inv.diagnosis.category\n", False)])
def test_report_reach_checker(source, caught):
    assert bool(report_reaches(source, "x.py")) is caught


def violations(rule: str, rel: Path, source: str) -> list[tuple[str, str]]:
    """(message, imported module) per violation; the message names file:line and the import."""
    applies, ok = RULES[rule]
    if not applies(rel):
        return []
    imports, opens = scan(rel, source)
    out = [(f"{rel}:{line}: imports {name}", name) for line, name in imports if not ok(name)]
    if rule == "c_rules_pure":
        out += [(f"{rel}:{line}: calls open()", "open()") for line in opens]
    return out


SOURCES = {p: (ROOT / p).read_text(encoding="utf-8") for p in FILES}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_layer_rule(rule):
    found = [m for p, src in SOURCES.items() for m, name in violations(rule, p, src)
             if (rule, p.as_posix(), name) not in ALLOWLIST]
    assert not found, f"{rule}:\n  " + "\n  ".join(found)


def test_allowlist_is_current():
    for rule, file, name in ALLOWLIST:
        hits = [n for _, n in violations(rule, Path(file), SOURCES[Path(file)])]
        assert name in hits, f"{file} no longer imports {name} ({rule}): remove it from ALLOWLIST"


def test_walk_is_not_empty():
    assert sum(p.parts[0] in PACKAGES for p in FILES) > 50
    assert len(FORMAT_MODULES) >= 8 and f"{T}.sources.nccl" in FORMAT_MODULES
    assert f"{T}.sources.ais.analyze" not in FORMAT_MODULES


SYNTHETIC = [  # (rule, file, source, the import that must be caught): proves the walker is not blind
    ("a_tools_core", "tools/rules/x.py", "def f():\n    from ...agent import cli\n", f"{NS}.agent.cli"),
    ("a_tools_core", "tools/x.py", "import rich.console\n", "rich.console"),
    ("b_source_formats", "tools/sources/x.py", f"from {T}.scan import summary\n", f"{T}.scan.summary"),
    ("b_source_formats", "tools/sources/ais/format.py", "from . import analyze\n", f"{T}.sources.ais.analyze"),
    ("c_rules_pure", "tools/rules/x.py", "from pathlib import Path\n", "pathlib"),
    ("c_rules_pure", "tools/rules/x.py", "def f():\n    return open('x')\n", "open()"),
    ("d_graph_no_front_ends", "agent/graph/x.py", f"from {NS}.agent import render\n", f"{NS}.agent.render"),
    ("e_render_not_cli", "agent/render/x.py", "from ..cli import app\n", f"{NS}.agent.cli.app"),
    ("e_agent_not_eval", "agent/render/x.py", f"import {NS}.eval.run\n", f"{NS}.eval.run"),
    ("e_eval_not_agent", "eval/x.py", f"from {NS}.agent.render import text\n", f"{NS}.agent.render.text"),
    ("f_no_old_names", "eval/x.py", "import tools.model\n", "tools.model"),
    ("g_slack_front_end", "agent/slack/x.py", f"from {T}.scan.driver import scan_bundle\n", f"{T}.scan.driver"),
    ("g_slack_front_end", "agent/slack/x.py", "from ..cli.options import fail\n", f"{NS}.agent.cli.options"),
    ("h_scan_bundle_no_analysis", "tools/scan/x.py", f"from {T}.steps.parse import FileSteps\n", f"{T}.steps.parse"),
    ("h_scan_bundle_no_analysis", "tools/bundle/x.py",
     f"def f():\n    from {T}.sources.flight_recorder.analyze import verify_entry\n",
     f"{T}.sources.flight_recorder.analyze"),
    ("i_slack_no_rich", "agent/slack/x.py", "from rich.console import Console\n", "rich.console"),
    ("i_slack_no_rich", "agent/slack/x.py", f"from {NS}.agent.render import text\n", f"{NS}.agent.render.text"),
]


@pytest.mark.parametrize("rule,file,source,name", SYNTHETIC)
def test_checker_catches_forbidden_imports(rule, file, source, name):
    assert [n for _, n in violations(rule, Path(file), source)] == [name]


def test_checker_allows_the_intended_imports():
    ok = f"from .pattern import P\nfrom {T}.lines.timestamps import Stamp\nimport re\n"
    assert violations("b_source_formats", Path("tools/sources/x.py"), ok) == []
    assert violations("e_agent_not_eval", Path("agent/cli/x.py"), f"from {NS}.eval.run import main\n") == []
    assert violations("a_tools_core", Path("tools/x.py"), "def f():\n    from ..agent import cli\n")[0][0] == \
        f"tools/x.py:2: imports {NS}.agent.cli"
