"""`debugger eval --mode llm`: an agent that does not answer fails the case and the run; the scripted models
(eval/scripted.py), served on loopback in the Messages API's format, run through the real ChatAnthropic, graph and
verifier, and the report says per model what verification changed against the truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainlog_debugger.eval import llm, scripted
from trainlog_debugger.eval.cases import discover
from trainlog_debugger.eval.run import main

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "cases" / "gen-slurm-8r-a"
# one generated hang with a culprit rank, one lab run, one real dev incident: small, and of three categories
MIX = [ROOT / "cases" / "gen-slurm-8r-a", ROOT / "cases" / "lab-2node-c",
       ROOT / "cases" / "real" / "torchft-30-lighthouse-bind-port"]


def _llm():
    from trainlog_debugger.agent.graph.evaluate import llm_diagnose
    return llm_diagnose


def _run(paths, capsys, **kw) -> tuple[int, dict, str]:
    code = main([str(p) for p in paths], mode="llm", json_=True, llm=_llm(), jobs=1, **kw)
    cap = capsys.readouterr()
    return code, json.loads(cap.out), cap.err


def test_a_model_that_never_answers_fails_the_case_and_the_run(capsys):
    code, rep, err = _run([CASE], capsys, scripted="forever")
    (row,) = rep["cases"]
    assert code == 1
    assert row["model"] == "forever" and row["agent_outcome"] == "no_answer"
    assert row["error"].startswith("agent did not answer: no_answer") and row["scores"]["category"] is False
    assert row["tool_calls"] >= 5 and row["verdicts"]["before"] is None and row["verdicts"]["after"] is None
    assert "cases/gen-slurm-8r-a, model forever: agent did not answer" in err
    assert rep["llm_effect"]["forever"]["outcomes"] == {"no_answer": 1}


def test_a_replay_that_no_longer_matches_fails_instead_of_scoring_the_deterministic_answer(tmp_path, capsys):
    """The issue's case: the prompt changed, the cassette's request no longer matches, the agent ends api_error
    and the deterministic verdict, left in place, would score 100 %."""
    (tape,) = (ROOT / "eval" / "cassettes").glob("cases__gen-slurm-8r-a*.yaml")
    text = tape.read_text(encoding="utf-8")
    assert "You\n      are the investigator" in text or "You are the investigator" in text
    (tmp_path / tape.name).write_text(text.replace("are the investigator", "were the investigator"), "utf-8")
    code, rep, err = _run([CASE], capsys, cassettes=str(tmp_path))
    (row,) = rep["cases"]
    assert code == 1 and row["agent_outcome"] in ("api_error", "error")
    assert row["error"].startswith("agent did not answer") and row["scores"]["category"] is False
    assert "agent did not answer" in err


@pytest.mark.slow
def test_careful_answers_with_tools_and_verification_does_not_lower_its_scores(capsys):
    code, rep, _ = _run(MIX, capsys, scripted="careful")
    assert code == 0, [r["error"] for r in rep["cases"]]
    for r in rep["cases"]:
        assert r["agent_outcome"] == "answered" and r["tool_calls"] >= 3, r["id"]
        before, after = r["verdicts"]["before"], r["verdicts"]["after"]
        assert after["category_ok"] >= before["category_ok"], r["id"]
        assert (after["culprit"] or 0) >= (before["culprit"] or 0), r["id"]
    m = rep["llm_effect"]["careful"]
    assert m["after"]["category_accuracy"] >= m["before"]["category_accuracy"]


@pytest.mark.slow
def test_the_liar_after_verification_is_no_worse_than_the_deterministic_answer(capsys):
    """The liar invents Xid 79 on gpu-node-99, blames a healthy rank it cites, says `completed`: before
    verification it scores badly; after, nothing of the lie may remain where it would lower the score."""
    _, rep, _ = _run(MIX, capsys, scripted="liar")
    for r in rep["cases"]:
        v = r["verdicts"]
        assert v["before"]["status"] == "completed" and "gpu-node-99" in v["before"]["culprit_nodes"]
        if r["agent_outcome"] != "answered":
            continue  # an unanswered case fails the run on its own (test above)
        assert v["after"]["category_ok"] >= v["deterministic"]["category_ok"], (r["id"], v)
        assert (v["after"]["culprit"] or 0) >= (v["deterministic"]["culprit"] or 0), (r["id"], v)
        assert not v["after"]["all_clear"] and "gpu-node-99" not in v["after"]["culprit_nodes"]


@pytest.mark.slow
def test_the_table_prints_each_model_before_and_after(capsys):
    from rich.console import Console
    console = Console(width=200, force_terminal=False)
    with console.capture() as cap:
        code = main([str(CASE)], mode="llm", llm=_llm(), jobs=1, scripted="careful,forever", console=console)
    out = cap.get()
    assert code == 1  # forever never answers
    assert "what the verifier changed, per model" in out and "before verification" in out
    assert "careful: answered" in out and "forever: no_answer" in out


@pytest.mark.parametrize("kw, words", [
    ({"mode": "offline", "scripted": "careful"}, "needs --mode llm"),
    ({"mode": "llm", "scripted": "oracle"}, "unknown scripted model(s) oracle"),
    ({"mode": "llm", "limit": 0}, "--limit must be at least 1"),
    ({"mode": "llm", "scripted": "careful", "record": True}, "not both"),
])
def test_bad_options_are_one_line_and_exit_2(kw, words, capsys):
    assert main([str(CASE)], llm=_llm(), **kw) == 2
    assert words in capsys.readouterr().err


# -- the pieces, on realistic inputs ---------------------------------------------------------------------------
BRIEF = ("Deterministic analysis of the bundle (every line of every rank was read):\n"
         "status: hung; category: data_loading_stall; culprit ranks: [5]; culprit nodes: ['gpu-node-18']; "
         "confidence: high\nchain (trigger first):\n"
         "- [root_candidate] rank 5 never entered the stuck collective\n"
         '    "error-4891784-1.out:56": [default1]:W1105 12:04:45.000000 20005 lhotse/dataset/sampling.py:88] GET '
         "ais://train/shard-00005.tar failed, retrying 5/5: Read timed out. (read timeout=60)\n"
         "- [cascade] NCCL watchdog timed out waiting for the collective\n"
         '    "error-4891784-0.out:11": [default0]:[rank0]:[E1105 12:34:10.579409818 ProcessGroupNCCL.cpp:616] '
         "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4521, OpType=BROADCAST)\n")
TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in
         ("overview", "where_ranks_stop", "nccl_state", "grep", "read_lines", "submit_answer")]


def _body(*turns) -> dict:
    return {"model": "claude-sonnet-5-5", "tools": TOOLS, "messages": [{"role": "user", "content": BRIEF}, *turns]}


def test_lazy_answers_in_its_first_turn_blaming_the_network_and_the_cascade_rank():
    reply = scripted.lazy(_body(), 0)
    assert reply["type"] == "message" and reply["stop_reason"] == "tool_use"
    (use,) = [b for b in reply["content"] if b["type"] == "tool_use"]
    assert use["name"] == "submit_answer"
    a = use["input"]
    assert a["category"] == "network" and a["culprit_ranks"] == [0]
    assert a["claims"][0]["citations"][0] == {"file": "error-4891784-0.out", "line": 11,
                                              "quote": "[default0]:[rank0]:[E1105 12:34:10.579409818 "
                                                       "ProcessGroupNCC"}


def test_liar_looks_first_then_cites_a_healthy_rank_it_was_shown():
    first = scripted.liar(_body(), 0)
    assert [b["name"] for b in first["content"] if b["type"] == "tool_use"] == ["overview", "where_ranks_stop",
                                                                                  "nccl_state"]
    shown = json.dumps({"tool": "where_ranks_stop", "status": "ok", "params": {}, "cut": [], "data": [
        {"at": "error-4891784-1.out:70", "text": "[default1]:[rank5]:[E1105 12:34:12] stuck", "rank": 5},
        {"at": "error-4891784-1.out:75", "text": "[default3]:[rank7]:[E1105 12:34:40] taking the entire process "
                                                  "down.", "rank": 7}]})
    turns = [{"role": "assistant", "content": [b for b in first["content"] if b["type"] == "tool_use"]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": shown}
                                          for b in first["content"] if b["type"] == "tool_use"]}]
    a = next(b for b in scripted.liar(_body(*turns), 1)["content"] if b["type"] == "tool_use")["input"]
    assert a["status"] == "completed" and a["culprit_ranks"] == [7] and a["culprit_nodes"] == ["gpu-node-99"]
    assert a["claims"][0]["citations"][0]["line"] == 75 and "Xid 79" in a["narrative"]


def test_forever_never_submits_and_skips_a_withdrawn_tool():
    body = _body()
    names = {next(b for b in scripted.forever(dict(body, messages=body["messages"] + [
        {"role": "assistant", "content": [{"type": "text", "text": "."}]}] * k), k)["content"])["name"]
        for k in range(6)}
    assert names == {"overview", "where_ranks_stop"}
    body["tools"] = [t for t in TOOLS if t["name"] != "overview"]
    assert scripted.forever(body, 0)["content"][0]["name"] == "where_ranks_stop"


def test_before_is_read_from_the_recorded_replies():
    (tape,) = (ROOT / "eval" / "cassettes").glob("cases__gen-slurm-8r-a*.yaml")
    a = llm.submitted(llm.cassette_replies(tape))
    assert a is not None and a["category"] == "data_loading_stall" and a["culprit_ranks"] == [5]
    assert llm.submitted([scripted.message(scripted.text("no answer"))]) is None


def test_a_recording_with_a_key_is_caught(tmp_path):
    """What `--record` checks before it keeps a cassette: vcrpy's header filter ran, the key is nowhere, and no
    request body holds what the redactor removes."""
    p = tmp_path / "x.yaml"
    p.write_text("headers:\n  x-api-key: sk-ant-api03-abcdefghijklmnop\n", "utf-8")
    assert llm.secrets_in(p)
    leak = "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    p.write_text(f"body: '{{\"messages\": [\"{leak}\"]}}'\n", "utf-8")
    assert llm.secrets_in(p)
    p.write_text("headers:\n  content-type: application/json\nbody: proxy-key-123456789\n", "utf-8")
    assert llm.secrets_in(p) == [] and llm.secrets_in(p, key="proxy-key-123456789") == [
        "the value of ANTHROPIC_API_KEY"]
    (tape,) = (ROOT / "eval" / "cassettes").glob("cases__gen-slurm-8r-a*.yaml")
    assert llm.secrets_in(tape) == []


def test_limit_spreads_over_origins_and_never_takes_a_test_split_case():
    cases = discover([ROOT / "cases"])
    got = llm.spread(cases, 10)
    assert len(got) == 10
    tags = [set(c.truth.tags) for c in got]
    assert any("generated" in t for t in tags) and any("lab" in t for t in tags)
    assert any(c.truth.split == "dev" for c in got)
    assert all(c.truth.split != "test" for c in got)
    assert len({c.truth.category for c in got}) >= 4
