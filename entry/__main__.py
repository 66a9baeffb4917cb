"""`python -m trainlog_debugger`: the `debugger` command, for a machine where the console script is not on PATH
(a venv not activated, `pip install --user` without ~/.local/bin on PATH)."""

from trainlog_debugger.agent.cli.app import run

if __name__ == "__main__":
    run()
