"""The --html page in a real headless browser (issue 12, item 4): Plotly's scripts run and draw every chart, and
the culprit's label is on the rank × time chart, at 8, 128 and 1,024 ranks. Skipped where no Chromium is installed
(CI has none; Debian: `apt-get install chromium`); `python -m trainlog_debugger.eval.screenshots DIR` takes the
pictures."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="--html needs the [html] extra (Plotly)")

from trainlog_debugger.agent.render.html import to_html  # noqa: E402
from trainlog_debugger.eval.screenshots import browser, rendered_dom, screenshot  # noqa: E402
from trainlog_debugger.tools.bundle.open import open_bundle  # noqa: E402
from trainlog_debugger.tools.pipeline import run  # noqa: E402

CASES = Path(__file__).resolve().parents[2] / "cases"
EXE = browser()
pytestmark = pytest.mark.skipif(EXE is None, reason="no Chromium on PATH")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["gen-slurm-8r-a", "gen-128r-026", "gen-1024r-027"])
def test_charts_are_drawn_by_the_browser(case, tmp_path):
    with open_bundle(CASES / case) as b:
        inv = run(b)
    page = tmp_path / "report.html"
    page.write_text(to_html(inv.diagnosis, inv), encoding="utf-8")
    dom = rendered_dom(EXE, page)
    # before the scripts run the page holds no svg at all: each drawn chart adds its own main-svg layers
    assert dom.count('class="main-svg"') >= 4, "Plotly did not draw the charts"
    assert 'class="plot-container plotly"' in dom
    for r in inv.diagnosis.culprit_ranks[:3]:
        assert f">rank {r}<" in dom, f"the culprit rank {r} is not labelled on the chart"
    assert inv.diagnosis.status.upper() in dom and inv.diagnosis.category in dom


@pytest.mark.slow
def test_a_screenshot_is_taken(tmp_path):
    with open_bundle(CASES / "gen-slurm-8r-a") as b:
        inv = run(b)
    page = tmp_path / "report.html"
    page.write_text(to_html(inv.diagnosis, inv), encoding="utf-8")
    png = tmp_path / "report.png"
    assert screenshot(EXE, page, png, 1200, 1600)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000  # a blank page is ~10 kB
