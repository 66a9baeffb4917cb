"""`debugger eval`: score the diagnosis on labelled cases (trainlog_debugger.eval.run, imported inside
`guarded()`). Exit codes are eval.run.main's: 0 fine, 1 a regression against --baseline or a case whose diagnosis
raised, 2 bad input."""

from __future__ import annotations

from pathlib import Path

import typer

from trainlog_debugger.agent.cli.options import JsonOpt, guarded, out, spinner


def eval_cmd(paths: list[Path] = typer.Argument(..., metavar="CASE", help="Case folders (a folder that holds truth.yaml), or folders "
                                                       "of them."),
             json_: bool = JsonOpt,
             mode: str = typer.Option("offline", "--mode", metavar="offline|baseline|llm", help="offline (the deterministic diagnosis, beside the "
                                      "regex baseline), baseline (first tier-1 match only) or llm (the agent, its "
                                      "HTTP replayed from per-case cassettes)."),
             baseline: Path = typer.Option(None, "--baseline", metavar="FILE", help="A stored report (--json) to compare with: every "
                                           "case that got worse is listed, exit code 1."),
             tags: list[str] = typer.Option(None, "--tags", metavar="TAG", help="Only cases with this tag (repeatable)."),
             write_baseline: Path = typer.Option(None, "--write-baseline", metavar="FILE", help="Also write the JSON report to this "
                                                 "file (update eval/baseline.json only in a commit that says why)."),
             jobs: int = typer.Option(None, "--jobs", metavar="N", help="Cases diagnosed in parallel (default: up to 2)."),
             cassettes: Path = typer.Option(None, "--cassettes", metavar="DIR", help="llm mode: the folder of per-case cassettes "
                                            "(default: eval/cassettes)."),
             record: bool = typer.Option(False, "--record", help="llm mode: record the cassettes against the real "
                                         "API (needs ANTHROPIC_API_KEY); without it they are only replayed."),
             scripted: str = typer.Option(None, "--scripted", metavar="NAMES", help="llm mode: run scripted models instead of "
                                          "cassettes, no key needed (careful, liar, lazy, forever; comma-separated)."),
             limit: int = typer.Option(None, "--limit", metavar="N", help="At most N cases, spread over generated, lab and real "
                                       "dev cases, smallest first.")):
    """Score the diagnosis on labelled cases: category, culprit, first failure time, grounding, controls, runtime.

    Exit codes: 0 fine; 1 a case got worse than --baseline, or a case's diagnosis raised (a bug, a module that
    fails to import; an unusable bundle is only that case's failed score); 2 bad input.
    """
    with guarded():
        from trainlog_debugger.eval.run import main as eval_main
        llm = None
        if mode == "llm":
            from trainlog_debugger.agent.graph.evaluate import llm_diagnose as llm
        with spinner(f"scoring the cases ({mode})"):
            code = eval_main(paths, json_=json_, mode=mode, baseline=baseline, tags=tags or None,
                             write_baseline=write_baseline, jobs=jobs, console=out, cassettes=cassettes,
                             record=record, llm=llm, scripted=scripted, limit=limit)
    if code:
        raise typer.Exit(code)
