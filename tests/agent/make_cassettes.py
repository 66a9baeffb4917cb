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


if __name__ == "__main__":
    args = sys.argv[1:]
    real = "--real" in args
    names = [a for a in args if a != "--real"] or [n for n in SCENARIOS if n.endswith(".handwritten")]
    for n in names:
        print(record(n, real))
