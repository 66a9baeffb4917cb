"""The session around the graph: the bundled tokenizer needs no network, the trailing question is split from the
paths, the history on disk continues with --resume and starts over without it, and the terminal chat loop's
slash commands."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fake_model import ScriptedModel, looked, reply, tool_call

from trainlog_debugger.agent.cli import ask as ask_cli
from trainlog_debugger.agent.graph.session import AgentOptions, Session, bundle_thread
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run

CASE = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"


def test_the_tokenizer_is_bundled_and_needs_no_network(monkeypatch):
    from trainlog_debugger.agent.llm import tokens
    tokens.encoding.cache_clear()

    def no_network(*a, **k):
        raise AssertionError("the tokenizer tried to reach the network")
    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert tokens.count("[rank3]: NCCL WARN NET/IB : Got completion from peer") > 5
    text, kept, total = tokens.cap("line of log text\n" * 500, 100)
    assert kept <= 100 < total and text.endswith("text")


def test_a_trailing_question_is_split_from_the_paths(tmp_path):
    assert ask_cli.split_question([str(CASE), "why did rank 5 stop?"]) == ([CASE], "why did rank 5 stop?")
    assert ask_cli.split_question([str(CASE)]) == ([CASE], None)
    assert ask_cli.split_question([str(CASE), str(tmp_path)]) == ([CASE, tmp_path], None)
    assert ask_cli.split_question(["no-such-dir"]) == ([Path("no-such-dir")], None)  # a typo stays a path: exit 2


def test_the_thread_is_the_bundle(tmp_path):
    f = tmp_path / "rank_0.log"
    f.write_text("a\n")
    t1 = bundle_thread([str(f)])
    assert t1 == bundle_thread([str(f)])
    f.write_text("a longer log\n")
    assert bundle_thread([str(f)]) != t1


def _answer(inv):
    """The deterministic verdict with one claim on its trigger line (the first message shows it)."""
    d = inv.diagnosis
    t = d.chain[0].evidence[0]
    return {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
            "confidence": "medium", "summary": "s",
            "claims": [{"statement": "the trigger line", "citations": [{"file": t.file, "line": t.line,
                                                                        "quote": t.text.strip()[:40]}]}]}


@pytest.fixture(scope="module")
def opened():
    with open_bundle(CASE) as b:
        yield b, run(b)


def test_history_on_disk_continues_with_resume_and_not_without(opened, tmp_path, monkeypatch):
    monkeypatch.setenv("DEBUGGER_HOME", str(tmp_path / "home"))
    b, inv = opened
    m1 = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", _answer(inv), 1))])
    Session(b, inv, [str(CASE)], AgentOptions(), model=m1).chat(None)
    assert (tmp_path / "home" / "history.sqlite").exists()
    m2 = ScriptedModel(script=[reply(tool_call("submit_answer", _answer(inv), 2))])
    Session(b, inv, [str(CASE)], AgentOptions(resume=True), model=m2).chat("and then?")
    assert any("Deterministic analysis" in str(m.content) for m in m2.requests[0]), "resumed the first turn"
    m3 = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", _answer(inv), 3))])
    Session(b, inv, [str(CASE)], AgentOptions(resume=False), model=m3).chat("fresh")
    first = [m for m in m3.requests[0] if type(m).__name__ == "HumanMessage"]
    assert len(first) == 1 and "Question: fresh" in first[0].content


def test_the_chat_loop_answers_and_takes_slash_commands(opened, monkeypatch, capsys):
    b, inv = opened
    m = ScriptedModel(script=[looked(9), reply(tool_call("submit_answer", _answer(inv), 1)),
                              reply(tool_call("submit_answer", _answer(inv) | {"summary": "follow-up"}, 2))])
    from langgraph.checkpoint.memory import MemorySaver
    s = Session(b, inv, [str(CASE)], AgentOptions(), model=m, checkpointer=MemorySaver())
    s.chat(None)
    typed = iter(["/cost", "/evidence", "what about rank 5?", "/quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    from trainlog_debugger.agent.render.report import render_agent
    ask_cli._chat_loop(s, render_agent)
    out = capsys.readouterr().out
    assert "tokens in" in out and "[user]" in out and "question: what about rank 5?" in out


def test_redact_hosts_masks_them_for_the_model_and_unmasks_them_for_the_user(opened):
    b, inv = opened
    d = inv.diagnosis
    node = d.culprit_nodes[0]
    from langgraph.checkpoint.memory import MemorySaver
    probe = Session(b, inv, [str(CASE)], AgentOptions(redact_hosts=True), model=ScriptedModel(script=[]),
                    checkpointer=MemorySaver())
    masked = probe.redactor.redact(node)
    assert masked != node
    t = d.chain[0].evidence[0]
    cite = {"file": probe.redactor.redact(t.file), "line": t.line, "quote": probe.redactor.redact(t.text)[:40]}
    probe.model.script = [looked(9), reply(tool_call("submit_answer", {
        "status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks, "culprit_nodes": [masked],
        "confidence": "medium", "summary": f"{masked} stalled", "narrative": f"rank on {masked} stalled",
        "claims": [{"statement": f"the trigger on {masked}", "citations": [cite]}]}, 1))]
    sec = probe.chat(None)
    sent = " ".join(str(m.content) for req in probe.model.requests for m in req)
    assert all(n not in sent for n in {node, *d.culprit_nodes}), "a host name reached the model"
    assert sec.verdict["culprit_nodes"] == [node] and node in sec.narrative
    assert sec.claims[0].verified and node in sec.claims[0].statement


def test_the_history_on_disk_is_private_and_holds_no_secret(tmp_path, monkeypatch):
    """Issue 30: history.sqlite held every planted secret verbatim (the `shown` channel kept the raw lines the
    model was shown), was mode 0644, and its parents were created 0755."""
    import os
    import stat

    from standin import plant_secrets
    secret, password = "hf_" + "Zq8" * 11, "s3cr3t-Pa55"
    bundle = plant_secrets(CASE, tmp_path / "bundle", secret, password)
    home = tmp_path / "state" / "deep" / "home"
    monkeypatch.setenv("DEBUGGER_HOME", str(home))
    with open_bundle(bundle) as b:
        inv = run(b)
        t = inv.diagnosis.chain[0].evidence[0]
        model = ScriptedModel(script=[looked(9), reply(tool_call("read_lines", {"file": t.file, "line": t.line}, 2)),
                                      reply(tool_call("submit_answer", _answer(inv), 3))])
        Session(b, inv, [str(bundle)], AgentOptions(), model=model).chat(None)
    assert any(secret[:12] in str(m.content) or "HF_TOKEN" in str(m.content) for r in model.requests for m in r), \
        "the planted lines were not shown (the test would prove nothing)"
    db = home / "history.sqlite"
    for f in [db, *home.glob("history.sqlite-*")]:
        data = f.read_bytes()
        assert secret.encode() not in data and password.encode() not in data, f.name
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    for d in (home, home.parent, home.parent.parent):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d


def test_an_existing_home_open_to_others_is_tightened(tmp_path, monkeypatch):
    import os
    import stat

    from trainlog_debugger.agent.graph.session import private_db, private_dir
    home = tmp_path / "home"
    home.mkdir(mode=0o777)
    os.chmod(home, 0o777)
    (home / "history.sqlite").write_bytes(b"")
    os.chmod(home / "history.sqlite", 0o644)
    private_db(private_dir(home) / "history.sqlite").close()
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(home / "history.sqlite").st_mode) == 0o600
