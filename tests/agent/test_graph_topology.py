"""The investigation graph's topology, as a picture checked in beside the test (snapshots/graph.mmd): a node or an
edge added, removed or rerouted is a visible diff in review, not something found by reading nodes.py (LangGraph's
prebuilt tests snapshot `draw_mermaid()` the same way). The graph is built with a scripted model and a toolbox over
an empty bundle: the topology depends on neither.

After an intended change, regenerate the picture and review its diff like code:

    .venv/bin/python tests/agent/test_graph_topology.py
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from types import SimpleNamespace

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "graph.mmd"
REGENERATE = ".venv/bin/python tests/agent/test_graph_topology.py"


def mermaid() -> str:
    from fake_model import ScriptedModel

    from trainlog_debugger.agent.graph.graph import build_graph
    from trainlog_debugger.agent.graph.toolbox import Toolbox
    box = Toolbox(SimpleNamespace(sources=[]), None)
    return build_graph(ScriptedModel(), box, system_prompt="").get_graph().draw_mermaid()


def test_the_topology_is_the_checked_in_picture():
    got = mermaid()
    want = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(SNAPSHOT), "build_graph"))
    assert got == want, (f"the graph's topology changed; if that is intended, regenerate the snapshot with "
                         f"`{REGENERATE}` and review its diff:\n{diff}")


def test_every_node_is_reached_and_every_run_ends():
    """What the picture must show whatever else changes: the model's loop through the tools, the verifier that
    can send an answer back, both limits and answers ending in the report, and no way back to the model that
    does not pass the request-size check (compact)."""
    text = mermaid()
    for edge in ("__start__ --> evidence", "evidence --> compact", "compact -.-> investigate", "compact -.-> stop",
                 "investigate -.-> tools", "tools --> compact", "nudge --> compact", "investigate -.-> verify",
                 "verify -.-> compact", "verify -.-> report", "investigate -.-> stop", "stop --> report",
                 "report --> __end__"):
        assert edge in text, edge
    into_model = [ln.strip() for ln in text.splitlines() if ln.strip().endswith("> investigate;")]
    assert into_model == ["compact -.-> investigate;"], into_model


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(mermaid(), encoding="utf-8")
    print(SNAPSHOT)
