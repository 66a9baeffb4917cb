"""`debugger ask`: the whole investigation of a bundle (tools.pipeline), rendered for the terminal, as JSON, or as
a Markdown post-mortem. The pipeline and the renderers are imported inside `guarded()`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from trainlog_debugger.agent.cli.options import JsonOpt, PathsArg, err, guarded, opened, out, print_json, progress


def ask(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
        markdown: Path = typer.Option(None, "--markdown", help="Also write a Markdown post-mortem to this file.")):
    """Investigate a bundle: status, category, culprit, the root-cause chain with file:line proof."""
    if not os.environ.get("ANTHROPIC_API_KEY") and not json_:
        err.print("no ANTHROPIC_API_KEY: running the deterministic analysis only", style="dim")
    with guarded():
        from trainlog_debugger.agent.render.report import render_report, to_markdown
        from trainlog_debugger.tools.pipeline import investigate
        with opened(paths) as b:
            with progress() as cb:
                diag = investigate(b, progress=cb)
            if markdown:
                markdown.write_text(to_markdown(diag), encoding="utf-8")
            if json_:
                print_json(diag)
            else:
                render_report(diag, out)
