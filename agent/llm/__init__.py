"""The model side of the agent: which Claude, how its errors read, what it costs, and token counting."""
