"""The LLM investigation. graph.py wires the LangGraph (build_graph), over state.py (what it carries, its limits)
and nodes.py (each step); tools.py declares the model's tools, one function each in TOOLS, which toolbox.py turns
into schemas and runs over one bundle, capped by caps.py and answered as result.py's ToolResult; protocol.py says
what the model must have seen before it answers and when a call is a loop; compact.py counts each request before it
is sent and folds the history near the budget; verify.py checks the model's claims; session.py holds the model,
redaction, history and fallbacks; evaluate.py runs the agent on one
eval case, replayed from its cassette."""
