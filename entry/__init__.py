"""trainlog-debugger: finds the root cause of a failed distributed training job from its logs.

The code lives in the repository's top-level folders (agent/, tools/, eval/, prompts/), installed as
`trainlog_debugger.<folder>` (setup.py); this package holds only `python -m trainlog_debugger` (__main__.py)."""
