"""The verifier end to end (issue 27, "every sentence is a claim" and "verdict changes need decisive evidence"):
`debugger ask` with a key, the real CLI against the local Messages-API stand-in, a scripted model that lies in
the ways the issue saw. What each output must show: an invented entity in free text (an "Xid 79 on gpu-node-99,
drain it" the logs never printed) reaches no output as fact, only as a drop notice; a healthy rank cited as the
culprit and a `none`/`completed` verdict on a crashed bundle are refused, kept only as the agent's unconfirmed
view beside the deterministic verdict; a claim naming what its line does not show ("rank 3 got SIGKILL" citing
rank 5's signal 15) is not marked verified. Checked in the terminal report, `--json`, `--markdown` and the Slack
blocks made from the same answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standin import StandIn, message, text, tool_use

from trainlog_debugger.agent.render.slack_blocks import agent_parts
from trainlog_debugger.tools.model import AgentSection

CASES = Path(__file__).resolve().parents[2] / "cases"
INVENTED = "Xid 79 on gpu-node-99, drain it."
# a healthy rank's own line: rank 5 was sent SIGTERM (signal 15) by its launcher after rank 1 crashed
RANK5 = "[default1]:[rank5]: torch.distributed.elastic.multiprocessing.api.SignalException: Process 20005 got signal: 15"


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    """The bundled 8-rank CUDA crash (rank 1, an illegal memory access; the seven others time out in ALLREDUCE
    SeqNum 812), with rank 5's signal line in the second node's log."""
    d = tmp_path_factory.mktemp("crash") / "bundle"
    shutil.copytree(CASES / "gen-8r-010", d, ignore=shutil.ignore_patterns("truth.yaml"))
    p = d / "error-4891784-1.out"
    lines = p.read_text().splitlines()
    p.write_text("\n".join(lines[:-2] + [RANK5] + lines[-2:]) + "\n")
    return d, len(lines) - 1


def _cli(args, url: str, home: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DEBUGGER_"))}
    env.update(DEBUGGER_HOME=str(home), ANTHROPIC_API_KEY="sk-ant-test-0000", ANTHROPIC_BASE_URL=url,
               NO_COLOR="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", *args],
                          capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL)


def _script(answer: dict, reads: list[dict]):
    """Round 1: where every rank stops, the collective state and the lines to cite (what the protocol asks before
    an answer). Every later round: the same answer, whatever the verifier said."""
    def respond(body, n):
        if not any(m["role"] == "assistant" for m in body["messages"]):
            calls = [tool_use("where_ranks_stop", {}, 1), tool_use("nccl_state", {}, 2)]
            calls += [tool_use("read_lines", r, 3 + i) for i, r in enumerate(reads)]
            return message(text("Checking every rank first."), *calls)
        return message(tool_use("submit_answer", answer, 10 + n))
    return respond


def _liar(rank5_line: int) -> dict:
    f0, f1 = "error-4891784-0.out", "error-4891784-1.out"
    return {
        "status": "crashed", "category": "gpu_cuda", "culprit_ranks": [3], "culprit_nodes": [],
        "confidence": "high", "summary": INVENTED,
        "narrative": f"Rank 1 hit an illegal memory access. {INVENTED}",
        "disagreement": "rank 3 stalled first",
        "claims": [
            {"statement": "rank 1 hit an illegal memory access",
             "citations": [{"file": f0, "line": 14, "quote": "CUDA error: an illegal memory access was encountered"}]},
            {"statement": "rank 3 got SIGKILL",
             "citations": [{"file": f1, "line": rank5_line, "quote": "SignalException: Process 20005 got signal: 15"}]},
            {"statement": "rank 3 timed out waiting in the ALLREDUCE",
             "citations": [{"file": f0, "line": 21, "quote": "Watchdog caught collective operation timeout"}]},
        ]}


@pytest.mark.slow
def test_invented_entities_and_a_healthy_culprit_through_every_output(crash, tmp_path):
    d, rank5_line = crash
    reads = [{"file": "error-4891784-0.out", "line": 14, "before": 0, "after": 8},
             {"file": "error-4891784-1.out", "line": rank5_line, "before": 0, "after": 0}]
    md = tmp_path / "pm.md"
    with StandIn(_script(_liar(rank5_line), reads)) as s:
        shown = _cli([str(d), "--markdown", str(md)], s.url, tmp_path)
        js = _cli([str(d), "--json"], s.url, tmp_path)
    assert shown.returncode == 0 and js.returncode == 0, shown.stderr + js.stderr
    agent = json.loads(js.stdout)["agent"]
    assert agent["outcome"] == "answered", agent

    # JSON: the verdict is the deterministic one; the agent's culprit is its unconfirmed view, with the reason
    out = json.loads(js.stdout)
    assert (agent["verdict"]["category"], agent["verdict"]["culprit_ranks"]) == ("gpu_cuda", [1])
    assert out["culprit_ranks"] == [1]
    assert agent["unconfirmed"]["culprit_ranks"] == [3]
    assert any("cascade" in r for r in agent["unconfirmed"]["refused"])
    # the invented sentence is nowhere as fact: not in the narrative, the summary or any verified claim
    assert INVENTED not in (agent.get("narrative") or "") and INVENTED not in agent["verdict"]["summary"]
    assert INVENTED not in (out.get("narrative") or "")
    assert "Xid 79" not in (agent["unconfirmed"]["narrative"] + agent["unconfirmed"]["summary"])
    assert {x["where"] for x in agent["dropped_sentences"]} == {"summary", "narrative"}
    assert all("gpu-node-99" in x["names"] for x in agent["dropped_sentences"])
    # the claim that names what its line does not show is not verified; the honest one is
    claims = {c["statement"]: c for c in agent["claims"]}
    assert claims["rank 1 hit an illegal memory access"]["verified"] is True
    assert claims["rank 3 got SIGKILL"]["verified"] is False
    assert "rank 3, SIGKILL" in claims["rank 3 got SIGKILL"]["dropped_because"]

    # the terminal report and the post-mortem: the verdict stands, the drop and the refusal are said
    for page in (shown.stdout, md.read_text()):
        assert INVENTED not in page
        assert "sentences dropped" in page and "gpu-node-99" in page.split("sentences dropped", 1)[1]
        assert "unconfirmed" in page and "culprit 3" in page
        assert "rank 3 got SIGKILL" in page and "verified" in page
    assert "CRASHED  gpu_cuda  culprit: rank 1" in shown.stdout
    assert "(agent, unconfirmed: crashed gpu_cuda, culprit 3)" in shown.stdout  # beside the verdict line

    # Slack: the blocks of the same answer say the same
    slack = "\n".join(t for _, t in agent_parts(AgentSection.model_validate(agent)))
    assert INVENTED not in slack and "sentences dropped" in slack and "unconfirmed" in slack


@pytest.mark.slow
def test_none_and_completed_on_an_ecc_crash_are_refused(tmp_path):
    """The real ECC crash (bigscience tr1-13B): the model says the job ended well, citing the ECC line itself."""
    d = tmp_path / "bundle"
    shutil.copytree(CASES / "real" / "bloom-tr1-13b-uncorrectable-ecc-faulty-node", d,
                    ignore=shutil.ignore_patterns("truth.yaml"))
    ecc = {"file": "combined.log", "line": 20, "quote": "uncorrectable ECC error encountered"}
    answer = {"status": "completed", "category": "none", "culprit_ranks": [], "confidence": "high",
              "summary": "the run recovered from a transient ECC error", "narrative": "Training finished normally.",
              "disagreement": "the ECC error was transient",
              "claims": [{"statement": "the GPU reported an ECC error once", "citations": [ecc]}]}
    with StandIn(_script(answer, [{"file": "combined.log", "line": 20, "before": 2, "after": 2}])) as s:
        r = _cli([str(d), "--json"], s.url, tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    agent = out["agent"]
    assert agent["outcome"] == "answered", agent
    assert (out["status"], out["category"]) == ("crashed", "gpu_cuda")
    assert (agent["verdict"]["status"], agent["verdict"]["category"]) == ("crashed", "gpu_cuda")
    assert (agent["unconfirmed"]["status"], agent["unconfirmed"]["category"]) == ("completed", "none")
    refused = " ".join(agent["unconfirmed"]["refused"])
    assert "'completed' needs a line proving a normal end" in refused and "'none' needs a normal end" in refused
    assert "Training finished normally" not in (agent.get("narrative") or "")
    assert any(c.startswith("unconfirmed: the agent's view completed none") for c in agent["changes"])
