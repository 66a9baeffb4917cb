"""The investigation as a LangGraph: evidence → compact → investigate ⇄ tools → verify → report.

`build_graph(model, tools, checkpointer)` is a factory, never a graph compiled at import: `model` is any LangChain
chat model that can bind tools (ChatAnthropic for users, a scripted fake in tests), `tools` a Toolbox over one
bundle (agent/graph/toolbox.py; the tool functions are agent/graph/tools.py), `checkpointer` a LangGraph
checkpointer (SQLite on disk for `--resume`, memory in tests, None for one shot). The nodes are
agent/graph/nodes.py, the state agent/graph/state.py; this module is the wiring, read top to bottom, and
tests/agent/test_graph_topology.py holds its picture (a changed edge is a visible diff).

Every way back to the model passes through `compact`, which counts the next request before it is sent: the only
node that can send is `investigate`, and the only way to it is a request that fits the budget.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from trainlog_debugger.agent.graph.nodes import Nodes
from trainlog_debugger.agent.graph.state import AgentState, Limits
from trainlog_debugger.agent.graph.toolbox import Toolbox


def build_graph(model, tools: Toolbox, checkpointer=None, *, limits: Limits = Limits(),
                system_prompt: str | None = None):
    """The compiled graph. The model is offered the toolbox's tools and `submit_answer` (agent/graph/verify.py),
    less those the protocol withdrew (agent/graph/protocol.py)."""
    if system_prompt is None:
        from trainlog_debugger.prompts import load
        system_prompt = load("investigator")
    name = getattr(model, "model", None) or getattr(model, "model_name", None) or type(model).__name__
    n = Nodes(model, tools, limits, system_prompt, name)

    g = StateGraph(AgentState)
    g.add_node("evidence", n.evidence)
    g.add_node("compact", n.compact)
    g.add_node("investigate", n.investigate)
    g.add_node("tools", n.tools)
    g.add_node("nudge", n.nudge)
    g.add_node("stop", n.stop)
    g.add_node("verify", n.verify)
    g.add_node("report", n.report)

    g.add_edge(START, "evidence")
    g.add_edge("evidence", "compact")
    g.add_conditional_edges("compact", n.after_compact, {"investigate": "investigate", "stop": "stop"})
    g.add_conditional_edges("investigate", n.route, {"verify": "verify", "tools": "tools", "nudge": "nudge",
                                                     "stop": "stop"})
    g.add_edge("tools", "compact")
    g.add_edge("nudge", "compact")
    g.add_edge("stop", "report")
    g.add_conditional_edges("verify", n.after_verify, {"report": "report", "compact": "compact"})
    g.add_edge("report", END)
    return g.compile(checkpointer=checkpointer)
