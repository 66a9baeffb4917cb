"""The one data model that flows tools → diagnosis → report → agent.

Why one model: the scanner, the NCCL analysis, the diagnosis rules, the renderer, the eval and the agent all
speak about the same two things, a line we can re-read (`Evidence`) and a claim backed by such lines
(`Finding`). Translating between per-module shapes is where citations get lost, so there is no other shape.

The JSON names are a public contract (other tools read `debugger ask --json`): evidence is always
``{"file": ..., "line": ..., "text": ...}`` with `file` relative to the bundle root and archive members
written ``logs.tar.gz!path/in/archive``; `line` is 1-based; `text` is the raw line, verbatim.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Role(str, Enum):
    """What a finding is to the failure.

    root_candidate: could be the trigger (a crash, an Xid, a CUDA OOM, a loader error).
    cascade: a consequence that every rank prints once something else went wrong (NCCL watchdog timeouts,
        "taking the entire process down", launcher SIGTERMs, ChildFailedError).
    noise: happens on healthy runs too (a connection reset that succeeded on the first retry).
    context: a fact about the job, not a fault (world size, NCCL version, rank↔host mapping).
    """

    root_candidate = "root_candidate"
    cascade = "cascade"
    noise = "noise"
    context = "context"


class Evidence(BaseModel):
    """A line we can re-read: `file` + `line` + verbatim `text` locate it; the rest is what we inferred."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int = Field(ge=1)
    text: str
    offset: int | None = None
    time: dict[str, Any] | None = None  # tools.timestamps.Stamp.to_json(): keeps has_date/has_year/has_zone
    rank: int | None = None
    node: str | None = None
    kind: str | None = None  # source kind (tools.sniff)

    def cite(self) -> str:
        return f"{self.file}:{self.line}"


class Finding(BaseModel):
    """A claim with its proof. `evidence` is never empty: nothing reaches a report uncited."""

    model_config = ConfigDict(frozen=True)

    id: str  # pattern or rule id, dotted `source.event`
    summary: str
    role: Role
    category: str | None = None
    tier: int | None = None
    ranks: list[int] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)
    count: int = 1
    evidence: list[Evidence]

    @field_validator("evidence")
    @classmethod
    def _cited(cls, v: list[Evidence]) -> list[Evidence]:
        if not v:
            raise ValueError("a Finding needs at least one Evidence line")
        return v


class Coverage(BaseModel):
    """Which ranks we expected and which we actually saw: absence is reported, never dropped silently."""

    expected_ranks: int | None = None
    expected_from: str | None = None  # 'world size in logs', 'NCCL nranks', 'max rank seen'
    expected_evidence: list[Evidence] = Field(default_factory=list)
    seen_ranks: list[int] = Field(default_factory=list)
    missing_ranks: list[int] = Field(default_factory=list)
    files: int = 0
    files_without_rank: int = 0
    skipped: list[dict[str, str]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
