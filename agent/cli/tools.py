"""The tool commands: scan, grep, diff, nccl, fr, steps, ais (one analysis each), catalog (the pattern table and
the structured readers) and schema (the Diagnosis schema).

Each report command is its options and one call of the runner (agent/cli/runner.py: open the bundle → analysis →
render in the chosen format → exit code); what differs between them is the analysis, a small function below that
imports its tool when it runs (inside `guarded()`, so a broken install is one line on stderr, never a traceback).
Adding a report command: its analysis function and command here, its name in COMMANDS, its renderers in
agent/render/registry.py.
"""

from __future__ import annotations

from pathlib import Path

import typer

from trainlog_debugger.agent.cli.fast import scan as scan_body
from trainlog_debugger.agent.cli.options import JsonOpt, PathsArg, fail, guarded, print_json
from trainlog_debugger.agent.cli.runner import choose, format_option, run_report
from trainlog_debugger.agent.render import NO_REDACT_HELP

NoRedactOpt = typer.Option(False, "--no-redact", help=NO_REDACT_HELP)
PerRankOpt = typer.Option(False, "--per-rank", help="JSON: also list every rank (and file) one entry each, as before "
                          "schema_version 2, beside the groups (evidence many ranks share is one group).")


def _engine_choice(value: str | None) -> str | None:
    """`--engine`: one of the engines, and one this install has (Hyperscan is optional): else a usage error that
    names the choices, not an internal error from the scan."""
    if value is None:
        return None
    from trainlog_debugger.tools.scan.engine import available_engines
    if value not in ("hyperscan", "re"):
        raise typer.BadParameter(f"{value!r} is not an engine; choose one of: hyperscan, re")
    if value not in available_engines():
        raise typer.BadParameter(f"{value} is not installed here; available: {', '.join(available_engines())}")
    return value


def _json(json_: bool) -> dict[str, str | None]:
    return {"--json": "json" if json_ else None}


def schema(command: str = typer.Argument("ask", metavar="COMMAND",
                                          help="The command whose --json to describe: ask (default), scan, nccl, grep, "
                                               "diff, steps, fr, ais or catalog.")):
    """The JSON schema of a command's --json document (default: `ask`, the Diagnosis): a public contract, of
    schema_version 2 (evidence that many ranks share is grouped; rank lists are range sets such as
    `0-4095 except 1365`; times RFC 3339 or null). Every document starts with schema_version, tool_version,
    generated_at and bundle."""
    from trainlog_debugger.agent.cli.schemas import COMMANDS
    if command not in ("ask", *COMMANDS):
        raise typer.BadParameter(f"{command!r} prints no JSON; choose one of: ask, {', '.join(COMMANDS)}")
    with guarded():
        from trainlog_debugger.agent.cli.schemas import schema_of
        print_json(schema_of(command))


def scan(paths: list[Path] = PathsArg, fmt: str = format_option("scan"), json_: bool = JsonOpt,
         engine: str = typer.Option(None, metavar="hyperscan|re", callback=_engine_choice,
                                     help="Force the scan engine: hyperscan or re."),
         workers: int = typer.Option(None, metavar="N", min=1, help="Worker processes (default: up to 2)."),
         no_redact: bool = NoRedactOpt, per_rank: bool = PerRankOpt):
    """One pass over every line of every rank: fatal patterns by tier, ranks and files in groups (the rank that
    differs first), silent ranks, coverage."""
    # also run by the fast path, without Typer (agent/cli/fast.py)
    scan_body(paths, engine=engine, workers=workers, no_redact=no_redact, fmt=choose("scan", fmt, _json(json_)),
              per_rank=per_rank)


def _grep(b, progress, pattern: str, ignore_case: bool):
    from trainlog_debugger.tools.scan.grep import grep_bundle
    try:
        return grep_bundle(b, pattern, ignore_case=ignore_case)
    except ValueError as e:  # a bad regular expression
        fail(str(e), 2)


def grep(pattern: str = typer.Argument(..., metavar="PATTERN", help="Python regular expression."), paths: list[Path] = PathsArg,
         fmt: str = format_option("grep"), json_: bool = JsonOpt,
         ignore_case: bool = typer.Option(False, "-i", "--ignore-case"),
         max_lines: int = typer.Option(3, metavar="N", min=1, help="Lines shown per group of alike lines (first, last, outliers)."),
         no_redact: bool = NoRedactOpt, per_rank: bool = PerRankOpt):
    """Regex over all ranks: matching lines grouped by template across ranks (ranks as ranges, counts, first/last
    line); ranks with NO match listed."""
    run_report("grep", _grep, paths, choose("grep", fmt, _json(json_)), no_redact=no_redact,
               options={"text": {"max_lines": max_lines}},
               exit_code=lambda res: 0 if res.total else 1,  # grep's convention: 1 when nothing matched
               per_rank=per_rank, pattern=pattern, ignore_case=ignore_case)


def _nccl(b, progress, collectives_per_step: int | None):
    from trainlog_debugger.tools.scan.driver import scan_bundle
    from trainlog_debugger.tools.sources.pytorch.collectives import analyze
    return analyze(scan_bundle(b), collectives_per_step=collectives_per_step)


def nccl(paths: list[Path] = PathsArg, fmt: str = format_option("nccl"), json_: bool = JsonOpt,
         per_step: int = typer.Option(None, "--collectives-per-step", metavar="N", min=1,
                                      help="Collectives issued per training step, to say 'one step ahead'."),
         no_redact: bool = NoRedactOpt, per_rank: bool = PerRankOpt):
    """NCCL/gloo state of EVERY rank: who never entered the stuck collective, who waited, who was ahead."""
    run_report("nccl", _nccl, paths, choose("nccl", fmt, _json(json_)), no_redact=no_redact, per_rank=per_rank,
               collectives_per_step=per_step)


def _diff(b, progress, max_report: int):
    from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
    return diff_bundle(b, max_report=max_report, progress=progress)


def diff(paths: list[Path] = PathsArg, fmt: str = format_option("diff"), json_: bool = JsonOpt,
         max_report: int = typer.Option(50, metavar="N", min=1, help="Templates shown per kind (the cut is said)."),
         no_redact: bool = NoRedactOpt, per_rank: bool = PerRankOpt):
    """Templates printed by only a few ranks, or missing from a few ranks: every line, numbers/paths/hex masked."""
    run_report("diff", _diff, paths, choose("diff", fmt, _json(json_)), no_redact=no_redact, with_progress=True,
               per_rank=per_rank, max_report=max_report)


def _fr(b, progress):
    from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
    rep = analyze_bundle(b)
    if rep is None:
        fail(f"no flight-recorder dumps in {b.root} (nccl_trace_rank_<N>, comm_lib_trace_rank_<N>)", 2)
    return rep


def fr(paths: list[Path] = PathsArg, fmt: str = format_option("fr"), json_: bool = JsonOpt,
       no_redact: bool = NoRedactOpt):
    """Flight-recorder dumps: per process group the stuck collective, ranks that never joined it, mismatches."""
    run_report("fr", _fr, paths, choose("fr", fmt, _json(json_)), no_redact=no_redact)


def _ais(paths: list[Path], progress, workers: list[Path] | None):
    from trainlog_debugger.tools.sources.ais.analyze import analyze_paths
    return analyze_paths([str(p) for p in paths], [str(p) for p in workers or []] or None)


def ais(paths: list[Path] = PathsArg, fmt: str = format_option("ais"), json_: bool = JsonOpt,
        workers: list[Path] = typer.Option(None, "--workers", metavar="PATH", help="Worker logs (SLURM/torchrun) to align clocks with "
                                           "and follow the chain to the failing rank."),
        no_redact: bool = NoRedactOpt):
    """AIStore daemon logs: files per daemon, stats deltas and error jumps, restarts, clocks, the storage chain."""
    # the daemon logs and the workers' are read apart (their clocks differ): no one bundle
    run_report("ais", _ais, paths, choose("ais", fmt, _json(json_)), no_redact=no_redact, bundle=False,
               workers=workers)


def _steps(b, progress):
    from trainlog_debugger.tools.steps.analyze import scan_steps
    return scan_steps(b, progress=progress)


def steps(paths: list[Path] = PathsArg, fmt: str = format_option("steps"), json_: bool = JsonOpt,
          no_redact: bool = NoRedactOpt, per_rank: bool = PerRankOpt):
    """Step times per rank: stragglers (robust z within parallel groups), when a slowdown began, compute- vs comm-bound."""
    run_report("steps", _steps, paths, choose("steps", fmt, _json(json_)), no_redact=no_redact, with_progress=True,
               per_rank=per_rank)


def _catalog(_paths, progress) -> list[dict]:
    from trainlog_debugger.tools.sources import reader_rows
    from trainlog_debugger.tools.sources import patterns
    rows = [{"id": p.id, "tier": p.tier, "category": p.category, "role": p.role, "summary": p.summary,
             "trigger": p.trigger, "example": p.example, "fallback": p.fallback} for p in patterns()]
    rows += reader_rows()  # sources read as records (stack dumps, snapshots): role 'reader', after the patterns
    return rows


def catalog(fmt: str = format_option("catalog"), json_: bool = JsonOpt):
    """The fatal-pattern catalog (id, tier, category and role hints, an example line for each), then the structured
    readers (stack dumps, flight-recorder dumps, storage daemons, hardware snapshots) and the formats each takes."""
    # our own data, not a log: nothing to redact (an example line may look like a secret on purpose)
    run_report("catalog", _catalog, [], choose("catalog", fmt, _json(json_)), no_redact=True, bundle=False)


# the commands of this module, in the order of `debugger --help` (agent/cli/app.py registers them)
COMMANDS = (schema, scan, grep, nccl, diff, fr, ais, steps, catalog)
