"""The README's sample outputs are the current code's (eval/readme_samples.py regenerates them): a stale sample
fails here, so the README a new user reads cannot drift from what the tool prints."""

from __future__ import annotations

import pytest

from trainlog_debugger.eval import readme_samples


@pytest.mark.slow
def test_every_readme_sample_is_current(capsys):
    code = readme_samples.main(["--check"])
    assert code == 0, capsys.readouterr().out
