"""Every test runs without the user's Anthropic credentials, agent settings or cluster: a developer's key must never
make a test call the real API, nor a DEBUGGER_CLUSTER send the suite's scans to their Dask cluster. Tests that
exercise the agent or the cluster set what they need themselves (a stand-in URL, a fake key, a local cluster)."""

import pytest


@pytest.fixture(autouse=True)
def _no_anthropic_env(monkeypatch, tmp_path_factory):
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "DEBUGGER_MODEL",
              "DEBUGGER_CLUSTER", "DEBUGGER_CLUSTER_TIMEOUT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DEBUGGER_HOME", str(tmp_path_factory.getbasetemp() / "debugger-home"))
