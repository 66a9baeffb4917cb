"""The LLM investigation: build.py (the LangGraph graph), toolbox.py (read-only tools over a bundle), verify.py
(the code that checks the model's claims), session.py (model, redaction, history, fallbacks), evaluate.py (the
agent on one eval case, replayed from its cassette)."""
