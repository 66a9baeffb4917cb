"""tests/hostile: hostile inputs run through the real CLI (harness.py). The harness is importable as `harness`
(`from harness import run_cli, assert_clean, snapshot`) from every test file here: this directory is put on
sys.path, since pytest runs with --import-mode=importlib (no package __init__)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def cli_env(tmp_path):
    """Environment for run_cli: the agent's home inside tmp_path, no model key (the answer is the offline one)."""
    home = tmp_path / "debugger-home"
    home.mkdir(exist_ok=True)
    return {"DEBUGGER_HOME": str(home)}
