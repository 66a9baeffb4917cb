"""Every test runs without the user's Anthropic credentials or agent settings: a developer's key must never make a
test call the real API. Tests that exercise the agent set what they need themselves (a stand-in URL, a fake key)."""

import pytest


@pytest.fixture(autouse=True)
def _no_anthropic_env(monkeypatch, tmp_path_factory):
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "DEBUGGER_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DEBUGGER_HOME", str(tmp_path_factory.getbasetemp() / "debugger-home"))
