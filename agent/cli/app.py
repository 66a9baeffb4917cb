"""`debugger`: the command line. This module is the Typer app (the version flag and the commands, registered from
agent/cli/ask.py, eval.py and tools.py; what they share: options, consoles, the error guard, is in options.py) and
the console script `run()`, which first offers the command line to the fast path of `scan` (agent/cli/fast.py).

Each command is a short chain: open the bundle → run a tool → render in the format chosen once (`--format`, or
an alias: `--json`, `ask`'s `--markdown -` and `--html -`; agent/cli/runner.py, agent/render/registry.py). Bad
input never produces a traceback: a BundleError (nothing usable) is one line on stderr and exit code 2; any other
unexpected error, a broken install included, is one line and exit code 1 (set DEBUGGER_TRACEBACK=1 to see the stack
when debugging).
"""

from __future__ import annotations

import sys


def _build_app():
    """The Typer app. Made on first use (`app` below, PEP 562) and not at import: the fast path of `debugger scan`
    (agent/cli/fast.py) runs without Typer, whose import alone costs more than that scan's whole budget."""
    import typer

    from trainlog_debugger.agent.cli import tools
    from trainlog_debugger.agent.cli.ask import ask
    from trainlog_debugger.agent.cli.collect import collect
    from trainlog_debugger.agent.cli.eval import eval_cmd
    from trainlog_debugger.agent.cli.options import out
    from trainlog_debugger.agent.cli.slack import slack

    # Newer Typer prints each argument's Python type in help (`<list[str]>`): a user needs the metavar, not our types.
    for cls in (getattr(getattr(typer, "core", None), "TyperArgument", None),
                getattr(getattr(typer, "core", None), "TyperOption", None)):
        if cls is not None and hasattr(cls, "display_type"):
            cls.display_type = lambda self, ctx: ""

    app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None,
                      context_settings={"help_option_names": ["-h", "--help"]},
                      help="Find the root cause of a failed distributed training job from its logs.")

    def version_cb(value: bool):
        if value:
            out.print(f"debugger {_version()}")
            raise typer.Exit()

    @app.callback()
    def main(_version_flag: bool = typer.Option(False, "--version", callback=version_cb, is_eager=True,
                                                help="Print the version and exit.")):
        """Find the root cause of a failed distributed training job from its logs."""

    # Registration order is the order of `debugger --help`.
    app.command()(ask)
    app.command("eval")(eval_cmd)
    app.command()(collect)
    app.command()(slack)
    for cmd in tools.COMMANDS:
        app.command()(cmd)
    return app


def __getattr__(name: str):
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _app()


def _app():
    if "app" not in globals():
        globals()["app"] = _build_app()
    return globals()["app"]


def _version() -> str:
    from trainlog_debugger.agent.render.data import tool_version  # importlib.metadata, ~40 ms: only when asked
    return tool_version()


def _click_errors() -> tuple[tuple, tuple]:
    """Click's UsageError and Abort classes, wherever this Typer keeps them: newer Typer vendors click as
    `typer._click` (then click itself, ~60 ms to import, is not: nothing of this app can raise its errors), older
    versions use `click`."""
    import importlib
    try:
        importlib.import_module("typer._click")
        mods = ("typer._click.exceptions", "typer.exceptions")
    except ImportError:
        mods = ("click.exceptions", "typer.exceptions")
    usage, abort = [], []
    for mod in mods:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        usage += [m.UsageError] if hasattr(m, "UsageError") else []
        abort += [m.Abort] if hasattr(m, "Abort") else []
    return tuple(usage) or (RuntimeError,), tuple(abort) or (KeyboardInterrupt,)


def run() -> None:
    """The console script: usage errors (a bad option value, a missing argument) are ONE line on stderr and exit 2,
    like every other bad input; a closed pipe on stdout exits 0 quietly. A `scan` in the forms agent/cli/fast.py
    knows runs without Typer; everything else goes through the Typer app."""
    from trainlog_debugger.agent.cli.fast import parse
    command = parse(sys.argv[1:])
    if command is not None:
        from trainlog_debugger.tools.bundle.parallel import fewer_collections
        with fewer_collections():  # the JSON conversion of the result too, not only the scan
            command()  # its errors end in SystemExit inside guarded(), a closed pipe included
        _exit_now()
    app = _app()
    usage, abort = _click_errors()
    try:
        code = app(standalone_mode=False)
    except usage as e:
        ctx = getattr(e, "ctx", None)
        cmd = ctx.command_path if ctx is not None else "debugger"
        sys.stderr.write(f"error: {' '.join(e.format_message().split())} (see `{cmd} --help`)\n")
        sys.exit(2)
    except abort:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        from trainlog_debugger.agent.cli.options import quiet_pipe
        quiet_pipe()
        sys.exit(0)
    except SystemExit as e:
        if e.code == 130:
            # Ctrl-C during the agent (agent/cli/chat.py): the command has unwound (its temp dirs are gone, the
            # report is out), but a model call LangGraph ran on a worker thread may still wait on the network, and
            # the interpreter's teardown joins such threads: exit now instead of waiting for a reply nobody reads
            _exit_now(130)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def _exit_now(code: int = 0) -> None:
    """Exit 0 after a fast scan without the interpreter's teardown: exit handlers run (temp dirs, logging, anything
    registered with atexit) and the output is flushed, but the tens of thousands of objects a scan leaves (modules,
    the engine, the result) are not freed one by one, which took 50-100 ms of a 1.3 s scan (mypy exits the same
    way). Only here: the fast path has no thread left running, which a hard exit would cut short. A reader that
    closed the pipe early: exit 0 quietly, as everywhere; any other failure to write the output (disk full, file
    too large): one line and exit 1, never a traceback. Also after Ctrl-C during the agent (`code` 130)."""
    import atexit
    import os
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except OSError as e:
        code = 1
        try:
            sys.stderr.write(f"error: cannot write the output: {e.strerror or e}\n")
        except OSError:
            pass
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
