#!/usr/bin/env bash
# Wheel check (called by .ci/run; runs alone too: `bash .ci/wheel_check.sh`). What a user gets from `pip install .`:
#   1. build the wheel (pip wheel, from a copy of the packaged files: no stale build/ dir, nothing written here);
#   2. a FRESH venv that already holds another distribution owning a top-level `tools` package, our wheel installed
#      beside it with the LOWEST typer of the pinned range (pyproject.toml says why that one);
#   3. from a directory outside the repository: `debugger --help`, `debugger ask --help`, `--version`,
#      `debugger slack --manifest` (package data), and `debugger ask cases/gen-slurm-8r-a --json` must give that
#      case's truth.yaml category, culprits and status;
#   4. the other `tools` is still importable and is its own, and our wheel put nothing at the top of site-packages
#      but `trainlog_debugger` (no tools/ agent/ eval/ prompts/ there).
# Needs python3 >= 3.11 and the package registry (the wheel's dependencies); about a minute on 2 cores.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
TYPER_LOWEST=${TYPER_LOWEST:-0.16.0}  # keep equal to the floor of `typer>=...` in pyproject.toml (checked below)
CASE=$REPO/cases/gen-slurm-8r-a
T=$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")
trap 'rm -rf "$T"' EXIT
t0=$SECONDS
say() { echo "wheel-check: $*"; }
die() { echo "wheel-check: FAIL: $*" >&2; exit 1; }
unset PYTHONPATH PYTHONHOME  # the venv must see only what is installed in it

floor=$(sed -n 's/^ *"typer>=\([0-9.]*\).*/\1/p' "$REPO/pyproject.toml")
[[ "$TYPER_LOWEST" == "$floor" || "$TYPER_LOWEST" == "$floor.0" ]] \
  || die "TYPER_LOWEST=$TYPER_LOWEST but pyproject.toml says typer>=$floor: keep them equal"

# 1. The wheel, from the files the package is made of (tracked and new, not ignored, not deleted).
mkdir "$T/src" "$T/dist"
(cd "$REPO" && git ls-files -z -co --exclude-standard -- pyproject.toml setup.py README.md entry agent tools eval prompts \
  | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$T/src"
# The other distribution: `dummy-tools`, which owns a top-level package named `tools`.
mkdir -p "$T/dummy/tools"
cat > "$T/dummy/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"
[project]
name = "dummy-tools"
version = "1.0"
[tool.setuptools]
packages = ["tools"]
EOF
echo 'OWNER = "dummy-tools"' > "$T/dummy/tools/__init__.py"
"$PY" -m pip wheel -q --no-deps -w "$T/dist" "$T/src" "$T/dummy" 2>&1 | grep -v "^\[notice\]" || true
WHEEL=$(ls "$T"/dist/trainlog_debugger-*.whl 2>/dev/null) || die "no trainlog_debugger wheel built"
DUMMY=$(ls "$T"/dist/dummy_tools-*.whl 2>/dev/null) || die "no dummy-tools wheel built"
say "built $(basename "$WHEEL") ($((SECONDS - t0))s)"

# 2. A fresh venv: the other `tools` first, then our wheel (with its dependencies) and the lowest typer.
"$PY" -m venv "$T/venv"
V=$T/venv/bin
"$V/python" -m pip install -q --disable-pip-version-check "$DUMMY"
"$V/python" -m pip install -q --disable-pip-version-check "$WHEEL" "typer==$TYPER_LOWEST"
say "installed in a fresh venv with typer $("$V/python" -c 'import typer; print(typer.__version__)') ($((SECONDS - t0))s)"

# 3. The CLI, from outside the repository.
mkdir "$T/elsewhere"
cd "$T/elsewhere"
"$V/debugger" --help > help.txt || die "debugger --help exited $?"
grep -q "ask" help.txt && grep -q "catalog" help.txt || die "debugger --help does not list the commands: $(cat help.txt)"
# The agent's package data (the bundled tokenizer, the prompts, the graph) loads from the wheel with no network.
"$V/python" -c "
from trainlog_debugger.agent.llm.tokens import count
from trainlog_debugger.prompts import load
from trainlog_debugger.agent.graph.graph import build_graph
assert count('NCCL WARN') > 0 and 'submit_answer' in load('investigator')
" || die "the agent's package data (tokenizer, prompts) did not load from the wheel"
say "agent package data loads (tokenizer, prompts, graph)"
"$V/debugger" ask --help > ask-help.txt || die "debugger ask --help exited $?"
grep -q -- "--json" ask-help.txt || die "debugger ask --help does not show --json: $(cat ask-help.txt)"
"$V/debugger" --version | grep -q "^debugger [0-9]" || die "debugger --version: $("$V/debugger" --version 2>&1)"
"$V/python" -m trainlog_debugger --version | grep -q "^debugger [0-9]" \
  || die "python -m trainlog_debugger --version: $("$V/python" -m trainlog_debugger --version 2>&1)"
"$V/debugger" schema scan | grep -q '"schema_version": 2' || die "debugger schema scan: the schemas are package data"
"$V/debugger" ask "$CASE" --json > ask.json || die "debugger ask $CASE --json exited $?"
# the Slack app manifest is package data: `debugger slack --manifest` prints it from the wheel, with no token
env -u SLACK_BOT_TOKEN -u SLACK_APP_TOKEN "$V/debugger" slack --manifest > manifest.yaml \
  || die "debugger slack --manifest exited $?"
"$V/python" -c "import sys, yaml; m = yaml.safe_load(open('manifest.yaml')); \
sys.exit(0 if 'chat:write' in m['oauth_config']['scopes']['bot'] and m['features']['slash_commands'] else 1)" \
  || die "debugger slack --manifest printed no usable manifest: $(head -c 300 manifest.yaml)"
say "slack --manifest prints the app manifest"
# the upstream message tables and the lexicon are package data: shipped, and read from the wheel
"$V/python" -c "from trainlog_debugger.tools.sources.messages import catalog as c; import sys; \
n = len(c.messages()); sys.exit(0 if n > 1500 and c.lexicon() and not c.LOAD_ERRORS else 1)" \
  || die "the message tables or the lexicon are missing from the wheel"
"$V/python" - "$CASE/truth.yaml" ask.json <<'EOF' || die "debugger ask gave the wrong answer (above)"
import json, sys
import yaml
truth = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
got = json.load(open(sys.argv[2], encoding="utf-8"))
tags = set(truth.get("tags") or [])
want = {"status": "completed" if truth["category"] == "none" else "hung" if "hang" in tags else None,
        "category": truth["category"], "culprit_ranks": truth.get("culprit_ranks") or [],
        "culprit_nodes": truth.get("culprit_nodes") or []}
bad = {k: (got.get(k), v) for k, v in want.items() if v is not None and got.get(k) != v}
if bad:
    sys.exit("wheel-check: got != truth.yaml: " + ", ".join(f"{k}: {g!r} != {w!r}" for k, (g, w) in bad.items()))
print("wheel-check: ask --json matches truth.yaml:", {k: got[k] for k in want})
EOF

# 4. Nothing of ours at the top of site-packages; the other `tools` untouched.
"$V/python" - <<'EOF' || die "site-packages check (above)"
import importlib.metadata as md, sys, sysconfig
from pathlib import Path
import tools
site = Path(sysconfig.get_paths()["purelib"])
assert getattr(tools, "OWNER", None) == "dummy-tools", f"`import tools` is not dummy-tools': {tools.__file__}"
assert Path(tools.__file__).resolve() == (site / "tools" / "__init__.py").resolve(), tools.__file__
ours = [str(f) for f in md.files("trainlog-debugger")]
top = sorted({f.split("/")[0] for f in ours if not f.startswith("..")})
assert all(t == "trainlog_debugger" or t.startswith("trainlog_debugger-") for t in top), f"our wheel's top level: {top}"
for name in ("agent", "eval", "prompts"):
    assert not (site / name).exists(), f"site-packages/{name} exists"
assert "tools/__init__.py" in [str(f) for f in md.files("dummy-tools")], "dummy-tools no longer owns tools/"
assert not [f for f in ours if f.split("/")[0] in ("tools", "agent", "eval", "prompts")], "ours at the top level"
import trainlog_debugger.tools.pipeline, trainlog_debugger.agent.cli.app, trainlog_debugger.eval.run  # noqa: E401,F401
print(f"wheel-check: site-packages top level of ours: {top}; `tools` is dummy-tools' ({tools.__file__})")
EOF
say "ok ($((SECONDS - t0))s)"
