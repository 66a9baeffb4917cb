"""One runner for the report commands (scan, grep, nccl, diff, fr, ais, steps, catalog): open the bundle → run the
analysis → render it in the chosen format → exit code. A command is its options and one call:

    def nccl(paths=PathsArg, fmt=format_option("nccl"), json_=JsonOpt, per_step=..., no_redact=NoRedactOpt):
        run_report("nccl", _nccl, paths, choose("nccl", fmt, {"--json": json_ and "json"}), no_redact=no_redact,
                   collectives_per_step=per_step)

The format is chosen once, before any work (`choose`): `--format` and its aliases (`--json`; `ask`'s `--markdown -`
and `--html -`) must agree, and the report must have a renderer for it (agent/render/registry.py), else a usage
error, exit 2, that lists the choices. The renderer is looked up in the registry and written by its format's kind
(`emit`): no command branches on a format.

This module imports no Typer and no rich at its top: the fast path of `debugger scan` (agent/cli/fast.py) runs
through it (tests/test_startup.py checks what a fast scan loads). Analyses and renderers are imported inside
`guarded()`, so a broken install is one line on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from trainlog_debugger.agent.cli.options import guarded, is_tty, opened, out, progress
from trainlog_debugger.agent.render import shown
from trainlog_debugger.agent.render.registry import FORMATS, formats, renderer, resolve

COMMANDS = {"diagnosis": "ask"}  # report type → the command that prints it, where the names differ


def format_option(report: str):
    """The `--format` option of a command printing `report`, its choices in the help (made with Typer, which the
    fast path never loads: call it only where Typer is loaded)."""
    import typer
    choices = formats(report)
    return typer.Option(None, "--format", metavar="|".join(choices),
                        help=f"Output format: {', '.join(choices)} (default: text).")


def choose(report: str, fmt: str | None, aliases: dict[str, str | None] | None = None) -> str:
    """The format to write, from `--format` and its aliases ({flag: the format it asks for, or None when not
    given}); text when none is given. Two that ask for different formats, or a format `report` has no renderer
    for: a usage error (exit 2), naming the choices."""
    asked = {"--format": fmt, **(aliases or {})}
    wanted = {f for f in asked.values() if f}
    if len(wanted) > 1:
        given = [f"--format {f}" if flag == "--format" else flag for flag, f in asked.items() if f]
        usage_error(f"{' and '.join(given)} ask for different formats ({', '.join(f for f in asked.values() if f)}): "
                    f"give one")
    chosen = wanted.pop() if wanted else "text"
    if chosen not in formats(report):
        usage_error(f"{COMMANDS.get(report, report)} has no {chosen} output; choose one of: "
                    f"{', '.join(formats(report))}")
    return chosen


def usage_error(message: str) -> NoReturn:
    """A usage error about --format: one line on stderr and exit 2 (agent/cli/app.py run), like every bad option."""
    import typer
    raise typer.BadParameter(message, ctx=_context(), param_hint="'--format'")


def _context():
    try:  # newer Typer vendors click as typer._click; older ones use click itself
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context
    return get_current_context(silent=True)


def _console(fn: Callable, report: Any, options: dict) -> None:
    fn(report, out, **options)


def _json(fn: Callable, report: Any, options: dict) -> None:
    # indented for a person at a terminal; one line for a pipe or a file (json's C encoder: ~5x faster)
    sys.stdout.write(fn(report, indent=2 if is_tty(sys.stdout) else None, **options))


def _document(fn: Callable, report: Any, options: dict) -> None:
    sys.stdout.write(fn(report, **options))


WRITERS: dict[str, Callable[[Callable, Any, dict], None]] = {"console": _console, "json": _json,
                                                             "document": _document}


def prepared(report_type: str, fmt: str, report: Any, redact: bool = True) -> tuple[Callable, Any]:
    """The renderer of `fmt` and what it reads of `report` (the registry's view), redacted unless `redact` is
    False: the rendering edge every output passes (agent.render.shown)."""
    spec = renderer(report_type, fmt)
    if spec.view:
        report = getattr(report, spec.view)()
    return resolve(spec), shown(report, redact)


def emit(report_type: str, fmt: str, report: Any, *, redact: bool = True, options: dict | None = None,
         per_rank: bool = False) -> None:
    """`report` written on stdout in `fmt`, as the format's kind writes (FORMATS). `per_rank` (`--per-rank`):
    its JSON also lists every rank beside the groups (tools.groups.per_rank_listing, around the whole rendering:
    a report's view, e.g. scan's `to_json`, is taken inside it)."""
    from trainlog_debugger.tools.groups import per_rank_listing
    with per_rank_listing(per_rank):
        fn, report = prepared(report_type, fmt, report, redact)
        WRITERS[FORMATS[fmt]](fn, report, options or {})


def document(report_type: str, fmt: str, report: Any, *, redact: bool = True, per_rank: bool = False,
             **options) -> str:
    """`report` as a document in `fmt` (a `document` kind: markdown, html), for a file."""
    from trainlog_debugger.tools.groups import per_rank_listing
    with per_rank_listing(per_rank):
        fn, report = prepared(report_type, fmt, report, redact)
        return fn(report, **options)


def run_report(report_type: str, analyze: Callable, paths: list[Path], fmt: str, *, no_redact: bool = False,
               bundle: bool = True, with_progress: bool = False, options: dict[str, dict] | None = None,
               exit_code: Callable[[Any], int] | None = None, per_rank: bool = False, **params) -> None:
    """A report command's body. `analyze(bundle_or_paths, progress=cb, **params)` makes the report (it may end
    the command with `fail`); `bundle`: it gets PATHS opened as one bundle (else the paths themselves), and the
    report is rendered while the bundle is open; `with_progress`: a progress bar on stderr while it runs (only on
    a terminal); `options`: per format, what its renderer takes (`{"text": {"max_lines": 3}}`); `exit_code`: the
    command's exit status from the report (grep: 1 when nothing matched), 0 when not given; `per_rank`
    (`--per-rank`): the JSON also keeps the full per-rank listing beside the groups (schema_version 2)."""
    from trainlog_debugger.agent.render.data import documented
    with guarded(), documented(paths):
        if bundle:
            with opened(paths) as b:
                rep = _analyse(analyze, b, with_progress, params)
                _refuse_unless_training_logs(b, rep)
                emit(report_type, fmt, rep, redact=not no_redact, options=(options or {}).get(fmt),
                     per_rank=per_rank)
        else:
            rep = _analyse(analyze, paths, with_progress, params)
            emit(report_type, fmt, rep, redact=not no_redact, options=(options or {}).get(fmt), per_rank=per_rank)
    code = exit_code(rep) if exit_code else 0
    if code:
        raise SystemExit(code)


def _refuse_unless_training_logs(b, rep) -> None:
    """Every analysis command answers only for a training job's logs (tools.bundle.recognise): on anything else
    (/etc/apt, a source tree) one line and exit 2, as `ask` does, never an empty report and exit 0. A scan's own
    result is the evidence where the command made one."""
    from trainlog_debugger.tools.bundle.open import BundleError
    from trainlog_debugger.tools.bundle.recognise import NOT_LOGS, holds_training_logs, unrelated_inputs
    from trainlog_debugger.tools.scan.result import ScanResult
    scan = rep if isinstance(rep, ScanResult) else None
    if not holds_training_logs(b, scan):
        raise BundleError(NOT_LOGS.format(root=b.root, files=len(scan.files) if scan else len(b.sources)))
    if scan is not None and (why := unrelated_inputs(b, scan)):
        raise BundleError(why)


def _analyse(analyze: Callable, source, with_progress: bool, params: dict):
    if not with_progress:
        return analyze(source, progress=None, **params)
    with progress() as cb:
        return analyze(source, progress=cb, **params)
