"""Issue 15, part B: secrets in the logs (an HF token in an env dump, a password in a pip index URL, a GitHub token a
script echoed) are masked in every output a report can be pasted from: `ask` on the terminal, --json, --markdown,
--html, and every command that prints log lines; `--no-redact` shows them. One redactor (tools.redact.Redactor, the
agent's and the Slack bot's) is applied once to the report before any renderer (agent.render.shown)."""

import json
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.redact import SECRET_MARK, redact_tree

HF = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PW = "s3cr3t-Pa55"
SECRETS = (HF, GH, PW)
runner = CliRunner()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("leaky")
    for r in range(2):
        (d / f"rank{r}.log").write_text(
            f"[rank{r}]:I1105 12:30:00.000000 1 launch.py:12] env HF_TOKEN={HF}\n"
            f"[rank{r}]:I1105 12:30:01.000000 1 setup.py:40] pip install --index-url "
            f"https://deploy:{PW}@pypi.example.com/simple torch\n"
            f"[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            f"for 600016 milliseconds before timing out. GITHUB_TOKEN={GH}\n"
            f"[rank{r}]:I1105 12:34:57.000000 1 train.py:88] step 12 elapsed time per iteration (ms): 512.0\n")
    return d


def invoke(args, tmp_path=None):
    r = runner.invoke(app, [str(a) for a in args], env={"ANTHROPIC_API_KEY": "", "DEBUGGER_HOME": "/nonexistent"})
    assert r.exit_code in (0, 1), (args, r.exit_code, r.output[-500:])
    return r.output


@pytest.mark.parametrize("cmd", [["ask", "--offline", "--full"], ["ask", "--offline", "--json"],
                                 ["ask", "--offline", "--markdown", "-"], ["scan", "--json"], ["nccl", "--json"]])
def test_no_secret_in_any_output(bundle, cmd):
    out = invoke([*cmd, bundle])
    assert not [s for s in SECRETS if s in out], cmd
    assert [s for s in SECRETS if s in invoke([*cmd, "--no-redact", bundle])], cmd  # the output does quote them


@pytest.mark.parametrize("pattern", ["index-url", "HF_TOKEN", "GITHUB_TOKEN"])
def test_grep_shows_the_line_masked_unless_no_redact(bundle, pattern):
    out = invoke(["grep", "--json", pattern, bundle])
    # schema_version 2: the lines are the groups' exemplars; --per-rank lists them per rank as before
    shown = [e["text"] for g in json.loads(out)["groups"] for e in g["exemplars"]]
    listed = invoke(["grep", "--json", "--per-rank", pattern, bundle])
    shown += [e["text"] for r in json.loads(listed)["ranks"] for e in r["lines"]]
    assert not [s for s in SECRETS if s in listed]
    assert shown and all(SECRET_MARK in t for t in shown) and not [s for s in SECRETS if s in out]
    raw = invoke(["grep", "--json", "--no-redact", pattern, bundle])
    assert any(s in raw for s in SECRETS)


def test_html_page_is_masked(bundle, tmp_path):
    pytest.importorskip("plotly")
    page = tmp_path / "r.html"
    invoke(["ask", "--offline", "--html", page, bundle])
    text = page.read_text()
    assert "Watchdog caught collective" in text and not [s for s in SECRETS if s in text]


def test_only_the_html_page_redacts_the_whole_investigation(bundle, tmp_path, monkeypatch):
    """Every output is drawn from the redacted diagnosis; only --html also draws from the investigation (every rank's
    scan), so only it pays for redacting that (2 of 6.8 s of `ask --json` at 4,096 ranks). Its page stays masked."""
    from trainlog_debugger.agent.cli import ask as ask_cmd
    from trainlog_debugger.tools.pipeline import Investigation

    walked = []
    real = ask_cmd.shown

    def shown(report, redact=True):
        walked.append(type(report))
        return real(report, redact)

    monkeypatch.setattr(ask_cmd, "shown", shown)
    for fmt in (["--json"], ["--markdown", "-"], ["--full"]):
        invoke(["ask", "--offline", *fmt, bundle])
    assert walked and Investigation not in walked
    pytest.importorskip("plotly")
    page = tmp_path / "r.html"
    invoke(["ask", "--offline", "--html", page, bundle])
    assert Investigation in walked
    assert not [s for s in SECRETS if s in page.read_text()]


def test_redact_tree_copies_only_what_changes():
    @dataclass(frozen=True)
    class Row:
        name: str
        lines: list
        n: int = 1

    ev = Evidence(file="rank0.log", line=3, text=f"token={GH}")
    row = Row("plain", [ev, {"k": (f"HF_TOKEN={HF}", 7)}, {1, 2}])
    out = redact_tree(row)
    assert out is not row and out.lines[0].text == f"token={SECRET_MARK}" and ev.text.endswith(GH)
    assert out.lines[1]["k"] == (f"HF_TOKEN={SECRET_MARK}", 7) and out.lines[2] is row.lines[2]
    same = Row("nothing to hide", [Evidence(file="a", line=1, text="ok")])
    assert redact_tree(same) is same
