"""The agent on one eval case (`debugger eval --mode llm`): its HTTP replayed from the case's cassette
(record_mode none: a request with no recorded twin fails, nothing reaches the network), or recorded against the
real API with `--record` and a key. eval/run.py receives this function from agent/cli/eval.py: eval does not
import the agent."""

from __future__ import annotations

import os
from pathlib import Path

from trainlog_debugger.agent.graph.session import AgentOptions, Session, with_agent
from trainlog_debugger.agent.llm import cassettes as C
from trainlog_debugger.agent.llm.model import MAX_OUTPUT_TOKENS, model_name


def llm_diagnose(bundle, case_id: str, directory: Path, record: bool, base_url: str | None = None):
    """(the Diagnosis with the agent's verified verdict applied, the scan, the deterministic Diagnosis). A missing
    cassette raises, with how to record one. `base_url`: a scripted model served on loopback (eval/llm.py), talked
    to directly: no cassette."""
    from langchain_anthropic import ChatAnthropic
    from langgraph.checkpoint.memory import MemorySaver

    from trainlog_debugger.tools.pipeline import run
    name = C.case_name(case_id)
    path = C.find(directory, name)
    if path is None and not record and base_url is None:
        raise FileNotFoundError(f"no cassette for {case_id} in {directory}: record one with ANTHROPIC_API_KEY set "
                                f"and `debugger eval --mode llm --record CASE`")
    inv = run(bundle, workers=1)
    model = ChatAnthropic(model=model_name(), max_tokens=MAX_OUTPUT_TOKENS, max_retries=0, timeout=120,
                          api_key="scripted" if base_url else os.environ.get("ANTHROPIC_API_KEY") or "replay-only",
                          **({"base_url": base_url} if base_url else {}))
    session = Session(bundle, inv, [case_id], AgentOptions(), model=model, checkpointer=MemorySaver())
    target = path or directory / f"{name}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    if base_url:
        sec = session.chat(None)
    else:
        with C.replayer("all" if record else "none").use_cassette(str(target), allow_playback_repeats=False):
            sec = session.chat(None)
    diag = with_agent(inv.diagnosis, sec)
    v = sec.verdict
    if sec.outcome == "answered" and v.get("category"):
        diag = diag.model_copy(update={"category": v["category"], "culprit_ranks": v.get("culprit_ranks", []),
                                       "culprit_nodes": v.get("culprit_nodes", [])})
    return diag, inv.scan, inv.diagnosis
