"""The agent's prompts, as text files in our own words (investigator.md, ...). `load(name)` reads one from the
installed package, so the wheel carries them (package data `*.md`)."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files


@lru_cache(maxsize=None)
def load(name: str) -> str:
    return files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
