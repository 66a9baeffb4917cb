"""The tool commands: scan, grep, diff, nccl, fr, steps, ais (one analysis each: open the bundle → run the tool →
render), and catalog, schema (the pattern table and the Diagnosis schema). Every analysis and renderer is imported
inside `guarded()`, so a broken install is one line on stderr, never a traceback."""

from __future__ import annotations

from pathlib import Path

import typer

from trainlog_debugger.agent.cli.fast import scan as scan_body
from trainlog_debugger.agent.cli.options import JsonOpt, PathsArg, fail, guarded, opened, out, print_json, progress
from trainlog_debugger.agent.render import NO_REDACT_HELP, shown

NoRedactOpt = typer.Option(False, "--no-redact", help=NO_REDACT_HELP)


def schema():
    """The JSON schema of `debugger ask --json` (the Diagnosis): a public contract."""
    with guarded():
        from trainlog_debugger.tools.model import Diagnosis
        print_json(Diagnosis.model_json_schema())


def scan(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         engine: str = typer.Option(None, help="Force the scan engine: hyperscan or re."),
         workers: int = typer.Option(None, help="Worker processes (default: up to 2)."),
         no_redact: bool = NoRedactOpt):
    """One pass over every line of every rank: fatal patterns by tier, outlier ranks, silent ranks, coverage."""
    scan_body(paths, json_, engine, workers, no_redact)  # also run by the fast path, without Typer (agent/cli/fast.py)


def grep(pattern: str = typer.Argument(..., help="Python regular expression."), paths: list[Path] = PathsArg,
         json_: bool = JsonOpt, ignore_case: bool = typer.Option(False, "-i", "--ignore-case"),
         max_lines: int = typer.Option(3, help="Matching lines shown per rank (first and last)."),
         no_redact: bool = NoRedactOpt):
    """Regex over all ranks, grouped by rank, with counts and first/last time; ranks with NO match listed."""
    with guarded():
        from trainlog_debugger.agent.render import text as render
        from trainlog_debugger.tools.scan.grep import grep_bundle
        with opened(paths) as b:
            try:
                res = grep_bundle(b, pattern, ignore_case=ignore_case)
            except ValueError as e:
                fail(str(e), 2)
            res = shown(res, not no_redact)
            if json_:
                print_json(res)
            else:
                render.render_grep(res, out, max_lines=max_lines)
        if not res.total:  # grep's convention: 1 when nothing matched (scripts test it)
            raise typer.Exit(1)


def nccl(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         per_step: int = typer.Option(None, "--collectives-per-step",
                                      help="Collectives issued per training step, to say 'one step ahead'."),
         no_redact: bool = NoRedactOpt):
    """NCCL/gloo state of EVERY rank: who never entered the stuck collective, who waited, who was ahead."""
    with guarded():
        from trainlog_debugger.agent.render import text as render
        from trainlog_debugger.tools.scan.driver import scan_bundle
        from trainlog_debugger.tools.sources.pytorch.collectives import analyze
        with opened(paths) as b:
            rep = analyze(scan_bundle(b), collectives_per_step=per_step)
            rep = shown(rep, not no_redact)
            if json_:
                print_json(rep)
            else:
                render.render_nccl(rep, out)


def diff(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
         max_report: int = typer.Option(50, help="Templates shown per kind (the cut is said)."),
         no_redact: bool = NoRedactOpt):
    """Templates printed by only a few ranks, or missing from a few ranks: every line, numbers/paths/hex masked."""
    with guarded():
        from trainlog_debugger.agent.render.diff import render_diff
        from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
        with opened(paths) as b:
            with progress() as cb:
                res = diff_bundle(b, max_report=max_report, progress=cb)
            res = shown(res, not no_redact)
            if json_:
                print_json(res)
            else:
                render_diff(res, out)


def fr(paths: list[Path] = PathsArg, json_: bool = JsonOpt, no_redact: bool = NoRedactOpt):
    """Flight-recorder dumps: per process group the stuck collective, ranks that never joined it, mismatches."""
    with guarded():
        from trainlog_debugger.agent.render.fr import render_fr
        from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
        with opened(paths) as b:
            rep = analyze_bundle(b)
            if rep is None:
                fail(f"no flight-recorder dumps in {b.root} (nccl_trace_rank_<N>, comm_lib_trace_rank_<N>)", 2)
            rep = shown(rep, not no_redact)
            if json_:
                print_json(rep)
            else:
                render_fr(rep, out)


def ais(paths: list[Path] = PathsArg, json_: bool = JsonOpt,
        workers: list[Path] = typer.Option(None, "--workers", help="Worker logs (SLURM/torchrun) to align clocks with "
                                           "and follow the chain to the failing rank."),
         no_redact: bool = NoRedactOpt):
    """AIStore daemon logs: files per daemon, stats deltas and error jumps, restarts, clocks, the storage chain."""
    with guarded():
        from trainlog_debugger.agent.render.ais import render_ais
        from trainlog_debugger.tools.sources.ais.analyze import analyze_paths
        rep = analyze_paths([str(p) for p in paths], [str(p) for p in workers or []] or None)
        rep = shown(rep, not no_redact)
        if json_:
            print_json(rep)
        else:
            render_ais(rep, out)


def steps(paths: list[Path] = PathsArg, json_: bool = JsonOpt, no_redact: bool = NoRedactOpt):
    """Step times per rank: stragglers (robust z within parallel groups), when a slowdown began, compute- vs comm-bound."""
    with guarded():
        from trainlog_debugger.agent.render.steps import render_steps
        from trainlog_debugger.tools.steps.analyze import scan_steps
        with opened(paths) as b:
            with progress() as cb:
                rep = scan_steps(b, progress=cb)
            rep = shown(rep, not no_redact)
            if json_:
                print_json(rep)
            else:
                render_steps(rep, out)


def catalog(json_: bool = JsonOpt):
    """The fatal-pattern catalog (id, tier, category and role hints, an example line for each), then the structured
    readers (stack dumps, flight-recorder dumps, storage daemons, hardware snapshots) and the formats each takes."""
    with guarded():
        from trainlog_debugger.agent.render import text as render
        from trainlog_debugger.tools.sources import patterns
        from trainlog_debugger.tools.readers import rows as reader_rows
        rows = [{"id": p.id, "tier": p.tier, "category": p.category, "role": p.role, "summary": p.summary,
                 "trigger": p.trigger, "example": p.example, "fallback": p.fallback} for p in patterns()]
        rows += reader_rows()  # sources read as records (stack dumps, snapshots): role 'reader', after the patterns
        if json_:
            print_json(rows)
        else:
            render.render_catalog(rows, out)
