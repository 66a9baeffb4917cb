"""Writes the agent's cassettes (tests/agent/cassettes/*.yaml).

Hand-written ones (`*.handwritten.yaml`, the default): the real graph and the real ChatAnthropic run against the
local stand-in (standin.py), whose replies are scripted in scenarios.py in the Messages API's real format; vcrpy
records the exchange and the stand-in's address is rewritten to https://api.anthropic.com. The requests in the
cassette are therefore exactly what our code sends; only the replies are written by us, and the name says so.

`--real NAME`: with ANTHROPIC_API_KEY set, records the scenario's questions against the real API instead (the
replies are then Claude's, and the file is named without `.handwritten`).

    python tests/agent/make_cassettes.py                 # every hand-written scenario
    python tests/agent/make_cassettes.py tool_loop.handwritten
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import CASSETTES, replayer  # noqa: E402
from scenarios import CASE, SCENARIOS, make_session  # noqa: E402
from standin import StandIn  # noqa: E402

from trainlog_debugger.tools.bundle.open import open_bundle  # noqa: E402
from trainlog_debugger.tools.pipeline import run  # noqa: E402


def record(name: str, real: bool = False) -> Path:
    sc = SCENARIOS[name]
    out = CASSETTES / (f"{name.replace('.handwritten', '')}.yaml" if real else f"{name}.yaml")
    out.unlink(missing_ok=True)
    with open_bundle(CASE) as b:
        inv = run(b)
        if real:
            import os
            v = replayer("all")
            session = make_session(b, inv, None, sc, key=os.environ["ANTHROPIC_API_KEY"])
            with v.use_cassette(str(out)):
                for q in sc.questions:
                    session.chat(q)
            return out
        with StandIn(sc.respond(inv.diagnosis)) as s:
            base = s.url

            def to_api(req):
                req.uri = req.uri.replace(base, "https://api.anthropic.com")
                return req
            v = replayer("all")
            session = make_session(b, inv, base, sc)
            with v.use_cassette(str(out), before_record_request=to_api):
                for q in sc.questions:
                    session.chat(q)
    return out


def record_eval(case_dir: str) -> Path:
    """eval/cassettes/<case>.handwritten.yaml for `debugger eval --mode llm`: the tool-loop scenario's scripted
    replies, the requests exactly as eval's llm mode makes them (its own neutral copy of the bundle)."""
    import os

    from trainlog_debugger.agent.graph.evaluate import llm_diagnose
    from trainlog_debugger.agent.llm import cassettes as C
    from trainlog_debugger.eval import run as R
    from trainlog_debugger.eval.cases import discover
    (case,) = discover([case_dir])
    with open_bundle(case.path) as b:  # the script needs the trigger line: truth.yaml is not evidence of it
        facts = run(b).diagnosis
    out = R.CASSETTES / f"{C.case_name(case.id)}.handwritten.yaml"
    out.unlink(missing_ok=True)
    with StandIn(SCENARIOS["tool_loop.handwritten"].respond(facts)) as s:
        os.environ.update(ANTHROPIC_BASE_URL=s.url, ANTHROPIC_API_KEY="sk-ant-record-placeholder")
        R.LLM.update(cassettes=str(R.CASSETTES), record=True, diagnose=llm_diagnose)
        tmp = R.CASSETTES / f"{C.case_name(case.id)}.yaml"
        row = R.evaluate_case(case, "llm", with_baseline=False)
        tmp.rename(out)
        out.write_text(out.read_text().replace(s.url, "https://api.anthropic.com"))
    assert not row["error"], row["error"]
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--eval"]:
        for c in args[1:]:
            print(record_eval(c))
        sys.exit(0)
    real = "--real" in args
    names = [a for a in args if a != "--real"] or [n for n in SCENARIOS if n.endswith(".handwritten")]
    for n in names:
        print(record(n, real))
