"""agent/render/markdown.py and plain.py: the Markdown post-mortem, and the phrases every format shares, without
rich: the Slack bot attaches the same document to its thread (tests/slack/test_blocks_and_cli.py checks that the
bot renders it without loading rich)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.agent.render.markdown import to_markdown
from trainlog_debugger.agent.render.plain import cite, short, verdict_line

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "cases" / "gen-slurm-8r-a"


@pytest.fixture(scope="module")
def diag():
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import run
    with open_bundle(CASE) as b:
        return run(b).diagnosis


def test_the_post_mortem_says_the_verdict_and_cites_every_chain_step(diag):
    md = to_markdown(diag)
    assert md.startswith("# Post-mortem: hung — data_loading_stall\n") and md.endswith("\n")
    assert "- culprit: rank 5; node gpu-node-18" in md
    ev = diag.chain[0].evidence[0]
    assert f"    - `{cite(ev)}`: `{ev.text.strip()}`" in md  # the trigger line, nested under its step (4 spaces)
    assert "## Timeline" in md and "| time | rank | file:line | event |" in md
    assert verdict_line(diag).startswith("HUNG  data_loading_stall  culprit: rank 5")


def test_a_bar_in_an_event_cannot_split_the_timeline_table(diag):
    t = diag.timeline[0].model_copy(update={"what": "read a|b failed"})
    md = to_markdown(diag.model_copy(update={"timeline": [t]}))
    row = next(ln for ln in md.splitlines() if "read a" in ln)
    assert "read a\\|b failed" in row and row.replace("\\|", "").count("|") == 5  # GFM's escaped bar


def test_short_marks_the_cut_and_carriage_returns():
    assert short("x" * 200, 10) == "x" * 9 + "…"
    assert short("a\rb") == "a␍b"


def test_the_post_mortem_keeps_every_citation_and_the_terminals_words(diag):
    """Issue 29: the post-mortem uses the terminal's words (plain.py) and keeps every citation of every step."""
    from trainlog_debugger.agent.render.plain import job, ranks_line
    md = to_markdown(diag)
    for f in diag.chain:
        assert f.summary in md
        for ev in f.evidence:
            assert f"`{ev.cite()}`" in md
    for t in diag.timeline:
        assert f"`{t.evidence.cite()}`" in md
    assert f"- job: {job(diag)}" in md and f"- {ranks_line(diag)}" in md


def test_log_text_and_narrative_cannot_break_out_of_the_post_mortem(diag):
    """Issue 30: a backtick in a cited line ended its code span and the `<img>` after it rendered live; log text
    and the narrative went in unescaped; control characters reached the file."""
    from trainlog_debugger.agent.render.markdown import code, md
    ev = diag.chain[0].evidence[0].model_copy(update={
        "text": "GET `x` failed <img src=https://evil.example/p.png> [click](https://evil.example) \x1b]52;c;aGk=\x07"})
    f = diag.chain[0].model_copy(update={"evidence": [ev], "summary": "read <b>failed</b> see https://evil.example"})
    out = to_markdown(diag.model_copy(update={"chain": [f]}))
    line = next(ln for ln in out.splitlines() if "GET" in ln)
    assert "``GET `x` failed <img src=https://evil.example/p.png>" in line  # one span, opened by two backticks
    assert "\x1b" not in out and "\x07" not in out and "␛]52" in out
    assert "\\<b\\>failed\\</b\\>" in out and "`https://evil.example`" in out
    assert code("a ``b`` c") == "```a ``b`` c```" and code("`x") == "`` `x ``"
    assert md("[x](javascript:alert(1))") == "\\[x\\](`javascript:alert(1))`"
