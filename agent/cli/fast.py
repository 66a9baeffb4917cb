"""`debugger scan`'s body, and the fast path that runs it without building the Typer app.

Why a fast path: a script or CI step that scans a small bundle waits mostly for start-up, and Typer costs ~0.2 s
before any command runs (its vendored click, and the pydantic it converts parameters with; issue 16 asks for a
scan of a tiny bundle in under 0.15 s). `debugger scan PATH... [--json] [--format text|json] [--no-redact]
[--per-rank] [--engine E] [--workers N]` is parsed here with click's meaning for exactly those forms; anything else (--help,
an unknown or repeated option, a missing or non-decimal value, a value that looks like an option, `--`, no path,
another command, a format scan lacks, `--json` with `--format text`) is not ours: `parse` returns None and Typer
parses the whole command line as before, so Typer still owns help, usage errors and every other command. Both
paths run `scan` below, so they cannot differ in what they do.

This module imports no Typer and no rich (tests/test_startup.py checks what a fast scan loads): the scan is
rendered through the runner (agent/cli/runner.py) and the renderer registry, whose text renderer alone loads rich.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from trainlog_debugger.agent.cli.runner import run_report
from trainlog_debugger.agent.render.registry import formats

FLAGS = {"--json": "json_", "--no-redact": "no_redact", "--per-rank": "per_rank"}
VALUED = {"--engine": "engine", "--workers": "workers", "--format": "fmt"}
INTS = {"workers"}


def _scan(b, progress, workers: int | None, engine: str | None):
    from trainlog_debugger.tools.scan.driver import scan_bundle
    return scan_bundle(b, workers=workers, engine=engine, progress=progress)


def scan(paths: list[Path], json_: bool = False, engine: str | None = None, workers: int | None = None,
         no_redact: bool = False, fmt: str | None = None, per_rank: bool = False) -> None:
    """The `scan` command (agent/cli/tools.py registers it with Typer, and its docstring is the help). `fmt`: the
    format as chosen (agent/cli/runner.py choose); else `--json` says json, and text by default. `per_rank`: the
    JSON also lists every rank and file (today's keys beside the groups)."""
    run_report("scan", _scan, paths, fmt or ("json" if json_ else "text"), no_redact=no_redact, with_progress=True,
               per_rank=per_rank, workers=workers, engine=engine)


def parse(argv: list[str]) -> Callable[[], None] | None:
    """The command `argv` (sys.argv[1:]) asks for, ready to run, when it is a `scan` in the forms above; else None."""
    if not argv or argv[0] != "scan":
        return None
    opts: dict = {}
    paths: list[Path] = []
    rest = iter(argv[1:])
    for a in rest:
        if a == "-" or (a and not a.startswith("-")):  # `-` is stdin, a path to click too
            paths.append(Path(a))
            continue
        name, eq, value = a.partition("=")
        if a in FLAGS and FLAGS[a] not in opts:
            opts[FLAGS[a]] = True
        elif name in VALUED and VALUED[name] not in opts:
            value = value if eq else next(rest, None)
            if value is None or not _plain_value(value, VALUED[name] in INTS):
                return None
            opts[VALUED[name]] = int(value) if VALUED[name] in INTS else value
        else:
            return None
    if opts.get("engine") not in (None, "hyperscan", "re") or opts.get("workers") == 0:
        return None  # Typer's usage error names the choices
    if opts.get("fmt") not in (None, *formats("scan")) or (opts.get("json_") and opts.get("fmt", "json") != "json"):
        return None  # not a format of scan's, or --json and --format disagree: Typer's usage error
    return partial(scan, paths, **opts) if paths else None


def _plain_value(value: str, integer: bool) -> bool:
    """A value click and Typer take as it is: not empty, not option-like, and for an int plain ASCII digits (what
    else int() or pydantic accept, `+3`, ` 3`, `3_0`, is left to Typer to judge)."""
    if not value or value.startswith("-"):
        return False
    return value.isascii() and value.isdigit() if integer else True
