"""`debugger slack`: run the incident-channel bot (agent/slack/) in Socket Mode or HTTP mode.

Configuration is flags plus the three Slack secrets from the environment (never flags: they would show in `ps`).
A missing secret is one line on stderr and exit 2, before anything connects. The bot logs one line per event
outcome on stderr; every log line passes through the redactor, so a token never reaches the log.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from trainlog_debugger.agent.cli.options import fail, guarded

HELP = """Answer failed training jobs in Slack incident threads (`debugger slack --manifest` prints the app manifest
to install it from: api.slack.com/apps → Create New App → From a manifest).

Triggers: @mention the bot with a path under an --allow-root, upload a log bundle with a mention, or /debug PATH.
Replies go in the thread: the deterministic headline first (status, category, culprit, confidence, trigger
file:line), then the full report and a Markdown post-mortem. Mention the bot in the thread to ask follow-ups (with
ANTHROPIC_API_KEY the agent answers, keeping the thread's history).

Socket Mode (default; no public URL): needs SLACK_BOT_TOKEN (xoxb-) and SLACK_APP_TOKEN (xapp-, connections:write).

HTTP mode (--mode http): needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET; serves POST /slack/events on --host:--port
(events and the /debug command); unsigned, forged or stale (> 5 min) requests are refused with 401.
"""


def slack(mode: str = typer.Option("socket", "--mode", metavar="socket|http",
                                   help="socket: Socket Mode over a WebSocket (SLACK_APP_TOKEN); http: the Events "
                                        "API at http://HOST:PORT/slack/events (SLACK_SIGNING_SECRET)."),
          allow_root: list[str] = typer.Option([], "--allow-root", metavar="DIR", envvar="DEBUGGER_SLACK_ROOTS",
                                               help="A directory whose logs may be named by path (repeatable). "
                                                    "Without one, only uploads are accepted."),
          allow_channel: list[str] = typer.Option([], "--allow-channel", metavar="ID",
                                                  envvar="DEBUGGER_SLACK_CHANNELS",
                                                  help="A channel id the bot answers in (repeatable; default: "
                                                       "every channel it is a member of)."),
          allow_user: list[str] = typer.Option([], "--allow-user", metavar="ID", envvar="DEBUGGER_SLACK_USERS",
                                               help="A user id the bot answers (repeatable; default: everyone)."),
          host: str = typer.Option("127.0.0.1", "--host", metavar="ADDR", help="HTTP mode: address to listen on (put a TLS "
                                                               "reverse proxy in front)."),
          port: int = typer.Option(3000, "--port", metavar="PORT", min=1, max=65535, help="HTTP mode: port to listen on."),
          max_upload_mb: int = typer.Option(200, "--max-upload-mb", metavar="MIB", min=1, max=10_000,
                                            help="Largest uploaded bundle, in MiB (archives are also capped "
                                                 "when extracted)."),
          rate: int = typer.Option(6, "--rate", metavar="N", min=1, max=1000,
                                   help="Investigations and questions per channel per minute."),
          redact_hosts: bool = typer.Option(False, "--redact-hosts", help="Also mask host names and IPs in "
                                                                          "everything posted (secrets always are)."),
          offline: bool = typer.Option(False, "--offline", help="Never run the agent, even with ANTHROPIC_API_KEY."),
          model: str = typer.Option(None, "--model", metavar="MODEL", help="Claude model id for the agent."),
          budget: int = typer.Option(200_000, "--budget", metavar="TOKENS", min=1_000, max=5_000_000,
                                     help="Agent token budget per question."),
          manifest: bool = typer.Option(False, "--manifest", help="Print the Slack app manifest (YAML) and exit; "
                                                                  "needs no token.")):
    if manifest:
        print_manifest()
        return
    if mode not in ("socket", "http"):
        fail(f"--mode must be socket or http, not {mode!r}")
    need = ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN" if mode == "socket" else "SLACK_SIGNING_SECRET"]
    missing = [n for n in need if not os.environ.get(n)]
    if missing:
        fail(f"{' and '.join(missing)} not set ({mode} mode needs {' and '.join(need)}; see `debugger slack --help`)")
    for r in allow_root:
        if not os.path.isdir(r):
            fail(f"--allow-root {r} is not a directory")
    with guarded():
        from trainlog_debugger.agent.slack.app import NoTokens, build_app, serve_http, socket_handler
        from trainlog_debugger.agent.slack.intake import Config
        handler = logging.StreamHandler()
        handler.addFilter(NoTokens())
        logging.basicConfig(level=logging.INFO, handlers=[handler], format="%(asctime)s %(name)s: %(message)s")
        logging.getLogger("slack_sdk").setLevel(logging.WARNING)  # its DEBUG lines echo request bodies
        cfg = Config(bot_token=os.environ["SLACK_BOT_TOKEN"], mode=mode, app_token=os.environ.get("SLACK_APP_TOKEN"),
                     signing_secret=os.environ.get("SLACK_SIGNING_SECRET"), roots=list(allow_root),
                     channels=list(allow_channel), users=list(allow_user), max_upload_mb=max_upload_mb, rate=rate,
                     redact_hosts=redact_hosts, offline=offline, model=model, budget=budget, host=host, port=port)
        app, bot = build_app(cfg)
        log = logging.getLogger("trainlog_debugger.slack")
        if not allow_channel:
            log.info("no --allow-channel: answering in every channel the bot is a member of")
        why = bot.convs.agent_on()
        log.info("agent: %s", why or "on")
        try:
            if mode == "http":
                srv = serve_http(app, host, port, cfg.signing_secret)
                log.info("listening on http://%s:%d/slack/events", host, srv.server_port)
                srv.serve_forever()
            else:
                log.info("connecting in Socket Mode")
                socket_handler(app, cfg.app_token).start()
        finally:
            bot.convs.close_all()


def print_manifest() -> None:
    """The app manifest shipped in the package (agent/slack/manifest.yaml, package data: a wheel install has it),
    on stdout as it is, for pasting into api.slack.com/apps."""
    from importlib.resources import files
    try:
        text = (files("trainlog_debugger.agent.slack") / "manifest.yaml").read_text(encoding="utf-8")
    except (OSError, ModuleNotFoundError) as e:
        fail(f"the Slack app manifest is missing from this install ({type(e).__name__}): reinstall the package")
    sys.stdout.write(text)


slack.__doc__ = HELP
