"""The model side of the agent: which model (Claude by default, or one served on-premises behind an OpenAI-compatible
endpoint), how its errors read, the bounds every call runs under (deadline, retry-after cap, token meter), what it
costs, and token counting."""
