"""tools/__init__.py's public surface: every name in __all__ resolves (httpx's exported-members test)."""

from trainlog_debugger import tools


def test_every_public_name_resolves():
    for name in tools.__all__:
        assert getattr(tools, name) is not None, name
