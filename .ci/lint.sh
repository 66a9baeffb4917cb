#!/usr/bin/env bash
# Lint and type checks (issue 26): ruff on the whole repository (the rule set is in pyproject.toml), mypy on tools/.
# Why a mypy root in a temp dir: the repository's top-level folders install as `trainlog_debugger.<folder>` through
# setup.py's package_dir, which mypy cannot follow from an editable install; a folder of symlinks named
# trainlog_debugger/ gives it the same import names the code uses, without writing into the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
ruff check .
ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT
mkdir "$ROOT/trainlog_debugger"
for top in tools agent eval prompts; do ln -s "$REPO/$top" "$ROOT/trainlog_debugger/$top"; done
cd "$ROOT"
mypy --config-file "$REPO/pyproject.toml" --cache-dir "$ROOT/.mypy_cache" -p trainlog_debugger.tools
