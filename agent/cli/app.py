"""`debugger`: the command line. Each command is a short chain: open the bundle → run a tool → render.

Bad input never produces a traceback: a BundleError (nothing usable) is one line on stderr and exit code 2; any
other unexpected error is one line and exit code 1 (set DEBUGGER_TRACEBACK=1 to see the stack when debugging).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import typer
from rich.console import Console

from trainlog_debugger.agent.render import text as render

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Find the root cause of a failed distributed training job from its logs.")
out = Console(highlight=False, soft_wrap=False)
if not out.is_terminal:  # pipes and files get wide lines: rows of file:line are meant to be grepped
    out = Console(highlight=False, soft_wrap=False, width=200)
err = Console(stderr=True, highlight=False)

PathsArg = typer.Argument(..., help="Log bundle(s): directory, .tar/.tar.gz/.tgz/.zip, or files (.gz ok).")
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _print_json(text: str) -> None:
    """Plain JSON on stdout: rich's print_json re-parses and highlights, far too slow for big reports."""
    sys.stdout.write(text + "\n")


def _version() -> str:
    try:
        return version("trainlog-debugger")
    except PackageNotFoundError:
        return "0+unknown"


def _version_cb(value: bool):
    if value:
        out.print(f"debugger {_version()}")
        raise typer.Exit()


@app.callback()
def main(_version_flag: bool = typer.Option(False, "--version", callback=_version_cb, is_eager=True,
                                            help="Print the version and exit.")):
    """Find the root cause of a failed distributed training job from its logs."""


def fail(msg: str, code: int = 2):
    msg = " ".join(str(msg).split())  # exactly one line, whatever the exception text held
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


@contextmanager
def guarded():
    from trainlog_debugger.tools.bundle.open import BundleError
    try:
        yield
    except BundleError as e:
        fail(str(e), 2)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as e:  # never a traceback for the user
        if os.environ.get("DEBUGGER_TRACEBACK"):
            raise
        fail(f"{type(e).__name__}: {e}", 1)


@contextmanager
def opened(paths: list[Path]):
    from trainlog_debugger.tools.bundle.open import open_bundle
    with open_bundle([str(p) for p in paths]) as b:
        yield b


def _progress():
    """A progress bar on stderr, only on a terminal and only once a run has lasted a few seconds."""
    if not err.is_terminal:
        return None, None
    import time
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   console=err, transient=True)
    state = {"task": None, "t0": time.monotonic()}

    def cb(done: int, total: int):
        if state["task"] is None:
            if time.monotonic() - state["t0"] < 2.0:
                return
            bar.start()
            state["task"] = bar.add_task("scanning", total=total)
        bar.update(state["task"], completed=done)

    return bar, cb


@app.command()
def ask(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
        markdown: Path = typer.Option(None, "--markdown", help="Also write a Markdown post-mortem to this file.")):
    """Investigate a bundle: status, category, culprit, the root-cause chain with file:line proof."""
    from trainlog_debugger.agent.render.report import render_report, to_markdown
    from trainlog_debugger.tools.pipeline import investigate
    from trainlog_debugger.tools.jsonable import dumps
    if not os.environ.get("ANTHROPIC_API_KEY") and not json_:
        err.print("no ANTHROPIC_API_KEY: running the deterministic analysis only", style="dim")
    with guarded(), opened(paths) as b:
        bar, cb = _progress()
        try:
            diag = investigate(b, progress=cb)
        finally:
            if bar is not None:
                bar.stop()
        if markdown:
            markdown.write_text(to_markdown(diag), encoding="utf-8")
        if json_:
            _print_json(dumps(diag))
        else:
            render_report(diag, out)


@app.command("eval")
def eval_cmd(paths: list[Path] = typer.Argument(..., help="Case folders (a folder that holds truth.yaml), or folders "
                                                       "of them."),
             json_: bool = JsonOpt,
             mode: str = typer.Option("offline", "--mode", help="offline (the deterministic diagnosis, beside the "
                                      "regex baseline), baseline (first tier-1 match only) or llm."),
             baseline: Path = typer.Option(None, "--baseline", help="A stored report (--json) to compare with: every "
                                           "case that got worse is listed, exit code 1."),
             tags: list[str] = typer.Option(None, "--tags", help="Only cases with this tag (repeatable)."),
             write_baseline: Path = typer.Option(None, "--write-baseline", help="Also write the JSON report to this "
                                                 "file (update eval/baseline.json only in a commit that says why)."),
             jobs: int = typer.Option(None, "--jobs", help="Cases diagnosed in parallel (default: up to 2).")):
    """Score the diagnosis on labelled cases: category, culprit, first failure time, grounding, controls, runtime."""
    from trainlog_debugger.eval.run import main as eval_main
    with guarded():
        code = eval_main(paths, json_=json_, mode=mode, baseline=baseline, tags=tags or None,
                         write_baseline=write_baseline, jobs=jobs, console=out)
    if code:
        raise typer.Exit(code)


@app.command()
def schema():
    """The JSON schema of `debugger ask --json` (the Diagnosis): a public contract."""
    import json

    from trainlog_debugger.tools.model import Diagnosis
    _print_json(json.dumps(Diagnosis.model_json_schema(), indent=2))


@app.command()
def scan(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         engine: str = typer.Option(None, help="Force the scan engine: hyperscan or re."),
         workers: int = typer.Option(None, help="Worker processes (default: up to 2).")):
    """One pass over every line of every rank: fatal patterns by tier, outlier ranks, silent ranks, coverage."""
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.scan.summary import scan_bundle
    with guarded(), opened(paths) as b:
        bar, cb = _progress()
        try:
            res = scan_bundle(b, workers=workers, engine=engine, progress=cb)
        finally:
            if bar is not None:
                bar.stop()
        if json_:
            _print_json(dumps(scan_json(res)))
        else:
            render.render_scan(res, out)


def scan_json(res) -> dict:
    files = [{"file": f.rel, "kind": f.kind, "bytes": f.bytes_read, "lines": f.lines, "ranks": sorted(f.ranks),
              "nodes": sorted(f.nodes), "counts": _file_counts(f), "last_lines": f.last_lines,
              "first_time": f.first_time, "error": f.error, "notes": f.notes} for f in res.files]
    return {"root": res.root, "engine": res.engine, "seconds": round(res.seconds, 3), "bytes": res.bytes,
            "lines": res.lines, "coverage": res.coverage, "patterns": res.patterns, "ranks": res.ranks,
            "rank_nodes": res.rank_nodes, "silent_first": res.silent_first, "files": files, "notes": res.notes}


def _file_counts(f) -> dict[str, int]:
    out: dict[str, int] = {}
    for (pid, _rank), n in f.counts.items():
        out[pid] = out.get(pid, 0) + n
    return dict(sorted(out.items()))


@app.command()
def grep(pattern: str = typer.Argument(..., help="Python regular expression."), paths: list[Path] = PathsArg,
         json_: bool = JsonOpt, ignore_case: bool = typer.Option(False, "-i", "--ignore-case"),
         max_lines: int = typer.Option(3, help="Matching lines shown per rank (first and last).")):
    """Regex over all ranks, grouped by rank, with counts and first/last time; ranks with NO match listed."""
    from trainlog_debugger.tools.scan.grep import grep_bundle
    from trainlog_debugger.tools.jsonable import dumps
    with guarded(), opened(paths) as b:
        try:
            res = grep_bundle(b, pattern, ignore_case=ignore_case)
        except ValueError as e:
            fail(str(e), 2)
        if json_:
            _print_json(dumps(res))
        else:
            render.render_grep(res, out, max_lines=max_lines)


@app.command()
def nccl(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         per_step: int = typer.Option(None, "--collectives-per-step",
                                      help="Collectives issued per training step, to say 'one step ahead'.")):
    """NCCL/gloo state of EVERY rank: who never entered the stuck collective, who waited, who was ahead."""
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.sources.pytorch.collectives import analyze
    from trainlog_debugger.tools.scan.summary import scan_bundle
    with guarded(), opened(paths) as b:
        rep = analyze(scan_bundle(b), collectives_per_step=per_step)
        if json_:
            _print_json(dumps(rep))
        else:
            render.render_nccl(rep, out)


@app.command()
def diff(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         max_report: int = typer.Option(50, help="Templates shown per kind (the cut is said).")):
    """Templates printed by only a few ranks, or missing from a few ranks: every line, numbers/paths/hex masked."""
    from trainlog_debugger.agent.render.diff import render_diff
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
    with guarded(), opened(paths) as b:
        bar, cb = _progress()
        try:
            res = diff_bundle(b, max_report=max_report, progress=cb)
        finally:
            if bar is not None:
                bar.stop()
        if json_:
            _print_json(dumps(res))
        else:
            render_diff(res, out)


@app.command()
def fr(paths: list[Path] = PathsArg, json_: bool = JsonOpt):
    """Flight-recorder dumps: per process group the stuck collective, ranks that never joined it, mismatches."""
    from trainlog_debugger.agent.render.fr import render_fr
    from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
    from trainlog_debugger.tools.jsonable import dumps
    with guarded(), opened(paths) as b:
        rep = analyze_bundle(b)
        if rep is None:
            fail(f"no flight-recorder dumps in {b.root} (nccl_trace_rank_<N>, comm_lib_trace_rank_<N>)", 2)
        if json_:
            _print_json(dumps({**rep.to_json(), "findings": rep.findings()}))
        else:
            render_fr(rep, out)


@app.command()
def ais(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
        workers: list[Path] = typer.Option(None, "--workers", help="Worker logs (SLURM/torchrun) to align clocks with "
                                           "and follow the chain to the failing rank.")):
    """AIStore daemon logs: files per daemon, stats deltas and error jumps, restarts, clocks, the storage chain."""
    from trainlog_debugger.agent.render.ais import render_ais
    from trainlog_debugger.tools.sources.ais.analyze import analyze_paths
    from trainlog_debugger.tools.jsonable import dumps
    with guarded():
        rep = analyze_paths([str(p) for p in paths], [str(p) for p in workers or []] or None)
        if json_:
            _print_json(dumps(rep))
        else:
            render_ais(rep, out)


@app.command()
def steps(paths: list[Path] = PathsArg, json_: bool = JsonOpt):
    """Step times per rank: stragglers (robust z within parallel groups), when a slowdown began, compute- vs comm-bound."""
    from trainlog_debugger.agent.render.steps import render_steps
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.steps.analyze import scan_steps
    with guarded(), opened(paths) as b:
        bar, cb = _progress()
        try:
            rep = scan_steps(b, progress=cb)
        finally:
            if bar is not None:
                bar.stop()
        if json_:
            _print_json(dumps(rep.to_json()))
        else:
            render_steps(rep, out)


@app.command()
def catalog(json_: bool = JsonOpt):
    """The fatal-pattern catalog: id, tier, category and role hints, and an example line for each."""
    from trainlog_debugger.tools.sources import patterns
    from trainlog_debugger.tools.jsonable import dumps
    rows = [{"id": p.id, "tier": p.tier, "category": p.category, "role": p.role, "summary": p.summary,
             "trigger": p.trigger, "example": p.example, "fallback": p.fallback} for p in patterns()]
    if json_:
        _print_json(dumps(rows))
    else:
        render.render_catalog(rows, out)


def run():  # pragma: no cover - console-script shim
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
