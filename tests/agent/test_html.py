"""`debugger ask --html FILE` (issue 12, item 4): one self-contained page at 8, 128 and 1,024 ranks. What can be
checked without a browser is checked here: nothing is fetched from the network, the charts are in the page with
every rank in them, the NCCL grid has a cell per rank, and every timeline row links to its cited line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="--html needs the [html] extra (Plotly)")

from trainlog_debugger.agent.render.html import nccl_grid_figure, rank_time_figure, to_html  # noqa: E402
from trainlog_debugger.tools.bundle.open import open_bundle  # noqa: E402
from trainlog_debugger.tools.pipeline import run  # noqa: E402

CASES = Path(__file__).resolve().parents[2] / "cases"


@pytest.fixture(scope="module", params=["gen-slurm-8r-a", "gen-128r-026", "gen-1024r-027"])
def inv(request):
    with open_bundle(CASES / request.param) as b:
        return run(b)


def test_the_page_is_self_contained(inv):
    page = to_html(inv.diagnosis, inv)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""<(?:script|link|img|iframe)[^>]+(?:src|href)=["']?(?:https?:)?//""", page), \
        "something is loaded from the network"
    assert page.count("<script") >= 2 and "Plotly.newPlot" in page  # the library inline, then the charts


def test_every_rank_is_drawn(inv):
    fig = rank_time_figure(inv.diagnosis, inv)
    seen = len(inv.scan.coverage.seen_ranks)
    assert fig is not None and len(fig.data[1].x) == seen
    grid = nccl_grid_figure(inv)
    if grid is not None:
        cells = sum(1 for row in grid.data[0].z for v in row if v is not None)
        assert cells >= seen


def test_the_culprit_is_marked_and_the_timeline_links_to_its_lines(inv):
    d = inv.diagnosis
    fig = rank_time_figure(d, inv)
    colors = list(fig.data[1].marker.color)
    assert colors.count("#e53935") == len([r for r in d.culprit_ranks if r in inv.scan.ranks])
    page = to_html(d, inv)
    for t in d.timeline:
        anchor = re.escape("L-" + "".join(c if c.isalnum() else "-" for c in t.evidence.cite()))
        assert re.search(rf'href="#{anchor}"', page) and re.search(rf'id="{anchor}"', page)


def test_log_text_is_escaped(tmp_path):
    (tmp_path / "rank_0.log").write_text(
        '[rank0]: 2025-05-01 10:00:00,000 INFO train: <script>alert("x")</script>\n'
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB <b>bold</b>\n")
    with open_bundle(tmp_path) as b:
        i = run(b)
    page = to_html(i.diagnosis, i)
    assert '<script>alert("x")</script>' not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_rows_are_labelled_by_global_rank_in_natural_node_order(inv):
    """Issue 29: nodes sorted as strings put `gpu-node-100` first, so rank 2 sat on row 362 of 1,024, and the
    rows had no rank labels."""
    fig = rank_time_figure(inv.diagnosis, inv)
    ys = list(fig.data[1].y)
    hover = list(fig.data[1].hovertext)
    row_of = {int(re.match(r"rank (\d+) ", h).group(1)): y for h, y in zip(hover, ys)}
    for r in (0, 2, max(row_of)):
        assert abs(row_of[r] - r) <= 8, (r, row_of[r])  # scheduler placement: row ≈ rank
    labels = list(fig.layout.yaxis.ticktext)
    assert labels and all(re.match(r"(?:rank )?\d+", t) for t in labels), labels[:5]
    assert labels[0].startswith(("0-", "rank 0"))


def test_the_nccl_grid_is_by_global_rank_with_integer_columns(inv):
    grid = nccl_grid_figure(inv)
    if grid is None:
        return
    w = len(grid.data[0].z[0])
    text = grid.data[0].text
    for r in (0, 2, len(inv.scan.coverage.seen_ranks) - 1):
        assert text[r // w][r % w].startswith(f"rank {r} "), (r, text[r // w][r % w])
    assert grid.layout.xaxis.dtick in (1, 4) and grid.layout.yaxis.ticktext[0] == f"ranks 0-{w - 1}"
    culprits = inv.diagnosis.culprit_ranks
    assert {a.text for a in grid.layout.annotations} >= {f"rank {r}" for r in culprits[:8]}
