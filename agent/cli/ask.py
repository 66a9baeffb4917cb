"""`debugger ask PATH... [QUESTION]`: the deterministic investigation of a bundle (tools.pipeline), then, with an
ANTHROPIC_API_KEY, the LLM agent on top of it (agent/graph), rendered in the format chosen once (`--format
text|json|markdown|html`; `--json`, `--markdown -` and `--html -` are its aliases), and also written to the files
`--markdown FILE` and `--html FILE` name (agent/cli/runner.py, agent/render/registry.py "diagnosis").

The deterministic report is always made first and is what a user gets when the agent cannot run: no key, or the API
unreachable / refusing / overloaded, is one line on stderr naming what happened, the report, exit 0, and the
report's `agent` section says the agent did not run, so nobody mistakes it for the agent's answer. With a key, in
text format, the report is printed (and flushed) before the agent starts and its section follows when it is ready;
a one-document format (JSON, Markdown or HTML on stdout) and the `--markdown`/`--html` files are written once, at
the end, with the agent's section. Ctrl-C during the agent keeps the report, marks the agent `interrupted` and
exits 130 (agent/cli/chat.py says how). Without a question, on a terminal, it takes follow-up questions until
/quit; not on a terminal it never waits for input. The pipeline, the agent and the renderers are imported inside
`guarded()`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer

from trainlog_debugger.agent.cli.chat import chat_loop as _chat_loop
from trainlog_debugger.agent.cli.chat import first_answer
from trainlog_debugger.agent.cli.chat import notice as _notice
from trainlog_debugger.agent.cli.options import JsonOpt, fail, guarded, opened, out, progress, writable
from trainlog_debugger.agent.cli.runner import choose, document, emit, format_option
from trainlog_debugger.agent.cli.tools import PerRankOpt
from trainlog_debugger.agent.render import NO_REDACT_HELP, shown

ArgsArg = typer.Argument(..., metavar="PATH... [QUESTION]",
                         help="Log bundle(s) (directory, .tar/.tar.gz/.tgz/.zip, files, .gz ok; - for one log on "
                              "stdin), then optionally a question in quotes.")


def split_question(args: list[str]) -> tuple[list[Path], str | None]:
    """The trailing argument is a question when there are several and it names nothing on disk (nor stdin) and
    does not look like a path: `ask bundle ./typo` is a missing path (an error), not the question "./typo"."""
    last = args[-1] if args else ""
    if len(args) >= 2 and last != "-" and not Path(last).exists() and not looks_like_path(last):
        return [Path(a) for a in args[:-1]], last
    return [Path(a) for a in args], None


_PATHLIKE_SUFFIX = re.compile(r"\.(?:log|out|err|txt|json|jsonl|gz|bz2|xz|zst|tar|tgz|zip|pkl|pickle)$", re.I)


def looks_like_path(arg: str) -> bool:
    """One word that reads as a file name, not words to a person: it has a directory separator or a leading
    `.`/`~`, or a log or archive suffix (`logs/run1`, `./typo`, `~/x`, `rank0.log`). A question has spaces, or is
    one word without any of these (`why?`, `rank5`)."""
    if not arg or any(c.isspace() for c in arg) or arg.endswith("?"):
        return False
    return "/" in arg or arg.startswith((".", "~")) or bool(_PATHLIKE_SUFFIX.search(arg))


def _dash(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


def _model_spec(value: str | None) -> str | None:
    """--model is a `provider:name` spec (agent/llm/model.py); an unknown provider is bad usage: one line, exit 2."""
    if value:
        from trainlog_debugger.agent.llm.model import parse
        try:
            parse(value)
        except ValueError as e:
            fail(str(e))
    return value


def ask(args: list[str] = ArgsArg, fmt: str = format_option("diagnosis"), json_: bool = JsonOpt,
        markdown: Path = typer.Option(None, "--markdown", metavar="FILE",
                                      help="Also write a Markdown post-mortem to FILE (- for stdout, instead of the "
                                           "terminal report: --format markdown)."),
        model: str = typer.Option(None, "--model", metavar="MODEL", callback=_model_spec,
                                  help="Claude model id (default: $DEBUGGER_MODEL, else claude-sonnet-5-5), or "
                                       "openai:NAME for a model served on-premises behind an OpenAI-compatible "
                                       "endpoint (vLLM, Ollama, llama.cpp) named by $OPENAI_BASE_URL."),
        budget: int = typer.Option(200_000, "--budget", metavar="TOKENS", min=1_000, max=5_000_000,
                                   help="Token budget (input + output) per question."),
        max_rounds: int = typer.Option(12, "--max-rounds", metavar="N", min=1, max=50, help="Model calls per question."),
        resume: bool = typer.Option(False, "--resume", help="Continue this bundle's earlier conversation."),
        redact_hosts: bool = typer.Option(False, "--redact-hosts",
                                          help="Also mask host names and IPs before anything reaches the model."),
        offline: bool = typer.Option(False, "--offline", help="Deterministic analysis only; never call the API."),
        full: bool = typer.Option(False, "--full", "-v", help="The whole report: timeline, every recommendation, "
                                                            "alternatives, notes."),
        html_out: Path = typer.Option(None, "--html", metavar="FILE",
                                      help="Also write a self-contained HTML page (report, rank x time chart, NCCL "
                                           "state grid, step times, timeline) to FILE (- for stdout: --format html)."),
        no_redact: bool = typer.Option(False, "--no-redact", help=NO_REDACT_HELP),
        per_rank: bool = PerRankOpt):
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
        from trainlog_debugger.agent.llm.model import missing_key
        from trainlog_debugger.agent.render.report import render_agent, render_agent_after
        from trainlog_debugger.tools.pipeline import run
        from trainlog_debugger.agent.render.data import documented
        with opened(paths) as b, documented(paths):
            with progress() as cb:
                inv = run(b, progress=cb)
            diag = inv.diagnosis
            interactive = question is None and fmt != "json" and sys.stdin.isatty() and sys.stdout.isatty()
            options: dict[str, dict] = {"text": {"full": full}}
            if "html" in files or fmt == "html":
                # only the page draws from the whole investigation (every rank's scan): redacting it for the other
                # outputs took 2 of 6.8 s of a 4,096-rank `ask --json`
                options["html"] = {"inv": shown(inv, not no_redact)}
            session, interrupted = None, False
            early = False
            if offline or missing_key(model):
                why = ("--offline: the agent did not run" if offline else
                       f"{missing_key(model)}: the agent did not run; this is the deterministic analysis only")
                if fmt != "json":  # the JSON says it in agent.notice; stdout stays one JSON document
                    _notice(why)
                sec = offline_section(why, model=model, question=question)
            else:
                from trainlog_debugger.agent.graph.session import Session
                if fmt == "text":  # the report now, the agent's section when it is ready (agent/cli/chat.py)
                    early = True
                    emit("diagnosis", fmt, shown(diag, not no_redact), redact=False, options=options.get(fmt),
                         per_rank=per_rank)
                    sys.stdout.flush()
                opts = AgentOptions(model=model, budget_tokens=budget, max_rounds=max_rounds,
                                    redact_hosts=redact_hosts, resume=resume, history=interactive or resume)
                session, sec, interrupted = first_answer(
                    lambda: Session(b, inv, [str(p) for p in paths], opts), question, model)
                if sec.notice:
                    _notice(f"agent: {sec.notice}; showing the deterministic analysis")
            diag = shown(with_agent(diag, sec), not no_redact)  # every output below is drawn from it
            for f, path in files.items():  # already redacted: the renderers get it as it is
                path.write_text(document("diagnosis", f, diag, redact=False, per_rank=per_rank,
                                         **options.get(f, {})), encoding="utf-8")
            if early:
                render_agent_after(diag, out)
            else:
                emit("diagnosis", fmt, diag, redact=False, options=options.get(fmt), per_rank=per_rank)
            sys.stdout.flush()
            if interrupted:
                raise SystemExit(130)
            # a page of HTML on a terminal is no conversation
            if interactive and fmt != "html" and session is not None and diag.agent \
                    and diag.agent.outcome not in ("api_error",):
                _chat_loop(session, render_agent)
