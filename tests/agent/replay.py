"""The agent tests' cassettes: eval/cassettes.py's vcrpy set-up (replay only, key headers filtered, matched on
method, path and JSON body), and a missing cassette failing with how to make one."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.agent.llm.cassettes import replayer

CASSETTES = Path(__file__).resolve().parent / "cassettes"
HOW_TO_RECORD = ("record it: `python tests/agent/make_cassettes.py NAME` writes the hand-written ones from their "
                 "scripted replies; with ANTHROPIC_API_KEY set, `python tests/agent/make_cassettes.py --real NAME` "
                 "records one against the real API")

__all__ = ["CASSETTES", "HOW_TO_RECORD", "cassette", "replayer"]


def cassette(name: str):
    """The replay context for cassettes/NAME.yaml; pytest.fail with how to record it when it is missing."""
    path = CASSETTES / f"{name}.yaml"
    if not path.exists():
        pytest.fail(f"no cassette {path.name}: {HOW_TO_RECORD}", pytrace=False)
    return replayer("none").use_cassette(str(path), allow_playback_repeats=False)
