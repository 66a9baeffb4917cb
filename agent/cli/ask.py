"""`debugger ask PATH... [QUESTION]`: the deterministic investigation of a bundle (tools.pipeline), then, with an
ANTHROPIC_API_KEY, the LLM agent on top of it (agent/graph), rendered in the format chosen once (`--format
text|json|markdown|html`; `--json`, `--markdown -` and `--html -` are its aliases), and also written to the files
`--markdown FILE` and `--html FILE` name (agent/cli/runner.py, agent/render/registry.py "diagnosis").

The deterministic report is always made first and is what a user gets when the agent cannot run: no key, or the API
unreachable / refusing / overloaded, is one line on stderr naming what happened, the report, exit 0, and the
report's `agent` section says the agent did not run, so nobody mistakes it for the agent's answer. Without a
question, on a terminal, it takes follow-up questions until /quit; not on a terminal it never waits for input.
The pipeline, the agent and the renderers are imported inside `guarded()`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from trainlog_debugger.agent.cli.options import JsonOpt, err, fail, guarded, opened, out, progress, writable
from trainlog_debugger.agent.cli.runner import choose, document, emit, format_option
from trainlog_debugger.agent.render import NO_REDACT_HELP, shown

ArgsArg = typer.Argument(..., metavar="PATH... [QUESTION]",
                         help="Log bundle(s) (directory, .tar/.tar.gz/.tgz/.zip, files, .gz ok; - for one log on "
                              "stdin), then optionally a question in quotes.")


def split_question(args: list[str]) -> tuple[list[Path], str | None]:
    """The trailing argument is a question when there are several and it names nothing on disk (nor stdin)."""
    if len(args) >= 2 and args[-1] != "-" and not Path(args[-1]).exists():
        return [Path(a) for a in args[:-1]], args[-1]
    return [Path(a) for a in args], None


def _dash(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


def ask(args: list[str] = ArgsArg, fmt: str = format_option("diagnosis"), json_: bool = JsonOpt,
        markdown: Path = typer.Option(None, "--markdown", metavar="FILE",
                                      help="Also write a Markdown post-mortem to FILE (- for stdout, instead of the "
                                           "terminal report: --format markdown)."),
        model: str = typer.Option(None, "--model", help="Claude model id (default: $DEBUGGER_MODEL, else "
                                                        "claude-sonnet-5-5)."),
        budget: int = typer.Option(200_000, "--budget", min=1_000, max=5_000_000,
                                   help="Token budget (input + output) per question."),
        max_rounds: int = typer.Option(12, "--max-rounds", min=1, max=50, help="Model calls per question."),
        resume: bool = typer.Option(False, "--resume", help="Continue this bundle's earlier conversation."),
        redact_hosts: bool = typer.Option(False, "--redact-hosts",
                                          help="Also mask host names and IPs before anything reaches the model."),
        offline: bool = typer.Option(False, "--offline", help="Deterministic analysis only; never call the API."),
        full: bool = typer.Option(False, "--full", "-v", help="The whole report: timeline, every recommendation, "
                                                            "alternatives, notes."),
        html_out: Path = typer.Option(None, "--html", metavar="FILE",
                                      help="Also write a self-contained HTML page (report, rank x time chart, NCCL "
                                           "state grid, step times, timeline) to FILE (- for stdout: --format html)."),
        no_redact: bool = typer.Option(False, "--no-redact", help=NO_REDACT_HELP)):
    """Investigate a bundle: status, category, culprit, the root-cause chain with file:line proof; with an
    ANTHROPIC_API_KEY, the agent checks and extends it and answers questions."""
    paths, question = split_question(args)
    fmt = choose("diagnosis", fmt, {"--json": "json" if json_ else None,
                                    "--markdown -": "markdown" if _dash(markdown) else None,
                                    "--html -": "html" if _dash(html_out) else None})
    files = {f: p for f, p in (("markdown", markdown), ("html", html_out)) if p is not None and not _dash(p)}
    writable(markdown, "--markdown")
    writable(html_out, "--html")
    if "html" in files or fmt == "html":
        from trainlog_debugger.agent.render.html import available
        if (why := available()):
            fail(why)
    with guarded():
        from trainlog_debugger.agent.graph.session import AgentOptions, offline_section, with_agent
        from trainlog_debugger.agent.llm.model import has_key
        from trainlog_debugger.agent.render.report import render_agent
        from trainlog_debugger.tools.pipeline import run
        with opened(paths) as b:
            with progress() as cb:
                inv = run(b, progress=cb)
            diag = inv.diagnosis
            interactive = question is None and fmt != "json" and sys.stdin.isatty() and sys.stdout.isatty()
            if offline or not has_key():
                notice = ("--offline: the agent did not run" if offline else
                          "no ANTHROPIC_API_KEY: the agent did not run; this is the deterministic analysis only")
                if fmt != "json":  # the JSON says it in agent.notice; stdout stays one JSON document
                    _notice(notice)
                diag = with_agent(diag, offline_section(notice, model=model, question=question))
                session = None
            else:
                from trainlog_debugger.agent.graph.session import Session
                opts = AgentOptions(model=model, budget_tokens=budget, max_rounds=max_rounds,
                                    redact_hosts=redact_hosts, resume=resume, history=interactive or resume)
                session = Session(b, inv, [str(p) for p in paths], opts)
                sec = session.chat(question, on_event=_progress_line)
                if sec.notice:
                    _notice(f"agent: {sec.notice}; showing the deterministic analysis")
                diag = with_agent(diag, sec)
            diag = shown(diag, not no_redact)  # every output below is drawn from it (the HTML page from inv too)
            options: dict[str, dict] = {"text": {"full": full}}
            if "html" in files or fmt == "html":
                # only the page draws from the whole investigation (every rank's scan): redacting it for the other
                # outputs took 2 of 6.8 s of a 4,096-rank `ask --json`
                options["html"] = {"inv": shown(inv, not no_redact)}
            for f, path in files.items():  # already redacted: the renderers get it as it is
                path.write_text(document("diagnosis", f, diag, redact=False, **options.get(f, {})), encoding="utf-8")
            emit("diagnosis", fmt, diag, redact=False, options=options.get(fmt))
            # a page of HTML on a terminal is no conversation
            if interactive and fmt != "html" and session is not None and diag.agent \
                    and diag.agent.outcome not in ("api_error",):
                _chat_loop(session, render_agent)


def _notice(text: str) -> None:
    """Exactly one line on stderr, however wide the terminal (rich would wrap it)."""
    sys.stderr.write(" ".join(text.split()) + "\n")
    sys.stderr.flush()


def _progress_line(node: str, update) -> None:
    """Which step is running, on stderr, only on a terminal: a long investigation never looks frozen."""
    if not err.is_terminal or not isinstance(update, dict):
        return
    if node == "investigate":
        msgs = update.get("messages") or []
        calls = getattr(msgs[-1], "tool_calls", None) if msgs else None
        for c in calls or []:
            arg = ", ".join(f"{k}={str(v)[:40]}" for k, v in (c.get("args") or {}).items()
                            if c["name"] != "submit_answer")
            err.print(f"  · {c['name']}({arg})" if c["name"] != "submit_answer" else "  · verifying the answer",
                      style="dim", markup=False)
        if not calls:
            err.print("  · thinking", style="dim", markup=False)
    elif node == "evidence":
        err.print("  · asking the model", style="dim", markup=False)


def _chat_loop(session, render_agent) -> None:
    """Follow-up questions until /quit or end of input. /evidence: what was sent to the model; /cost: tokens and
    cost so far."""
    out.print("\nask a follow-up question (/evidence, /cost, /quit)", style="dim")
    while True:
        try:
            q = input("ask> ").strip()
        except (EOFError, KeyboardInterrupt):
            out.print()
            return
        if not q:
            continue
        if q in ("/quit", "/exit", "/q"):
            return
        if q == "/cost":
            tin, tout, usd = session.cost()
            out.print(f"tokens in {tin:,}, out {tout:,}; cost ${usd:.4f} ({session.model_id})", markup=False)
            continue
        if q == "/evidence":
            for m in session.sent():
                calls = f" → tools: {', '.join(m['tool_calls'])}" if m["tool_calls"] else ""
                out.print(f"[{m['role']}]{calls} {m['text'][:2000]}", markup=False)
            continue
        if q.startswith("/"):
            out.print("commands: /evidence, /cost, /quit", style="dim")
            continue
        sec = session.chat(q, on_event=_progress_line)
        if sec.notice:
            _notice(f"agent: {sec.notice}")
        render_agent(sec, out)

