"""agent/render/registry.py: output formats as data. Every report type has its text and JSON renderers, every
renderer named there exists, every view is a method of the report it is taken from, and the registry itself loads
nothing (the fast path of `debugger scan --json` imports it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainlog_debugger.agent.render import registry
from trainlog_debugger.agent.render.registry import FORMATS, RENDERERS, NoRenderer, formats, renderer, resolve

REPORTS = {"diagnosis", "scan", "grep", "nccl", "diff", "fr", "ais", "steps", "catalog"}


def test_every_report_type_has_text_and_json_and_text_comes_first():
    assert set(RENDERERS) == REPORTS
    for report in RENDERERS:
        assert formats(report)[:2] == ["text", "json"], report  # text: the default of every command
    assert formats("diagnosis") == ["text", "json", "markdown", "html"]
    assert formats("scan") == ["text", "json"]


def test_every_format_named_is_a_known_format_of_a_known_kind():
    assert set(FORMATS.values()) == {"console", "json", "document"}
    for report, table in RENDERERS.items():
        assert set(table) <= set(FORMATS), report


@pytest.mark.parametrize("report", sorted(RENDERERS))
def test_every_renderer_exists(report):
    if "html" in RENDERERS[report]:
        pytest.importorskip("plotly")
    for fmt, spec in RENDERERS[report].items():
        assert callable(resolve(spec)), (report, fmt, spec.ref)


def test_every_view_is_a_method_of_the_report():
    from trainlog_debugger.tools.scan.result import ScanResult  # the one report type with views today
    views = {(r, f): spec.view for r, t in RENDERERS.items() for f, spec in t.items() if spec.view}
    assert views == {("scan", "text"): "without_hits", ("scan", "json"): "to_json"}
    assert all(callable(getattr(ScanResult, v)) for v in views.values())


def test_a_missing_renderer_names_the_choices():
    assert renderer("nccl", "json") is registry.JSON
    with pytest.raises(NoRenderer, match=r"scan has no markdown output; choose one of: text, json"):
        renderer("scan", "markdown")
    with pytest.raises(NoRenderer, match="choose one of: text, json, markdown, html"):
        renderer("diagnosis", "xml")


def test_scan_json_is_dumped_as_the_plain_data_it_already_is():
    """Redaction walks what a format reads (scan's text: the result without its kept hits; its JSON: `to_json()`),
    and plain data is not walked again by the JSON writer: a second walk took a second of a 4,096-file scan."""
    assert RENDERERS["scan"]["json"].ref == "trainlog_debugger.agent.render.data:plain_json"
    assert RENDERERS["nccl"]["json"].ref == "trainlog_debugger.agent.render.data:report_json"


def test_the_registry_and_the_json_renderer_load_no_front_end():
    code = ("import sys\n"
            "import trainlog_debugger.agent.render.registry, trainlog_debugger.agent.render.data\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'typer', 'click', 'plotly'}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)
