"""Renderers: one per report and format, reading reports and never reaching into analyses. Which renderer writes
which report in which format is data (registry.py: RENDERERS[report type][format]); the CLI chooses the format
once and looks it up (agent/cli/runner.py). What every format says the same way is plain.py; markdown.py and
data.py (JSON) are rich-free like it, so the Slack bot renders without the terminal library; text.py, report.py
and the per-report modules (diff, fr, ais, steps) print on a rich Console; html.py draws the page (Plotly).

`shown` is the rendering edge every command passes its report through before any renderer (terminal, --json,
--markdown, --html) sees it: secrets in the log text (tokens, keys, passwords in URLs) are masked there, once, with
the Redactor the agent and the Slack bot use (tools.redact), unless the user asked for --no-redact.
"""

from __future__ import annotations

NO_REDACT_HELP = "Show secrets found in the logs (tokens, keys, passwords in URLs) instead of masking them."


def shown(report, redact: bool = True):
    """The report as it may be shown: a copy with every string redacted (tools.redact.redact_tree), or itself."""
    if not redact:
        return report
    from trainlog_debugger.tools.redact import redact_tree
    return redact_tree(report)
