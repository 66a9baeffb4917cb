"""The LangGraph investigation (the agent issue fills this package)."""
