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
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Evidence and Coverage are plain classes that behave as pydantic models (tools/evidence.py says why: a scan makes
# them without importing pydantic); they are fields of the models below like any model.
from trainlog_debugger.tools.evidence import Coverage, Evidence
from trainlog_debugger.tools.groups import SCHEMA_VERSION


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


class Finding(BaseModel):
    """A claim with its proof. `evidence` is never empty: nothing reaches a report uncited."""

    model_config = ConfigDict(frozen=True)

    id: str  # pattern or rule id, dotted `source.event`
    summary: str
    role: Role
    category: str | None = None
    tier: int | None = None
    ranks: list[int] = Field(default_factory=list)  # at most 64 where many ranks share it: rank_set has them all
    nodes: list[str] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)
    count: int = 1
    evidence: list[Evidence]
    # every rank that printed it, as a range set ('0-4095 except 1365'), and how many: a cascade on 10,000 ranks is
    # one finding whose `ranks` lists the first 64 (schema_version 2)
    rank_set: str | None = None
    rank_count: int | None = None

    @field_validator("evidence")
    @classmethod
    def _cited(cls, v: list[Evidence]) -> list[Evidence]:
        if not v:
            raise ValueError("a Finding needs at least one Evidence line")
        return v


class Status(str, Enum):
    """How the job ended, as far as the logs prove."""

    crashed = "crashed"  # a process died on an error
    hung = "hung"  # a collective (or the loop) stopped progressing; usually ended by a watchdog
    slow = "slow"  # it ran, but step times regressed or a rank straggled
    completed = "completed"  # it finished normally
    cancelled = "cancelled"  # the scheduler ended it (time limit, preemption, node failure)
    inconclusive = "inconclusive"  # the logs do not prove more; `missing` says what would


CATEGORIES = ("storage_io", "network", "gpu_cuda", "data", "software", "infrastructure", "data_loading_stall", "oom",
              "numerical", "config", "none")


class TimelineEvent(BaseModel):
    time: str | None = None  # ISO as far as known ('--11-05T12:04:45' has no year); None when the line has no time
    what: str
    evidence: Evidence
    role: Role = Role.context


class JobDetails(BaseModel):
    framework: str | None = None
    launcher: str | None = None
    ranks: int | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    resumed_from_checkpoint: bool | None = None
    start: str | None = None  # the workers' clock: the training job's own lines (storage daemons' are not the job)
    end: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    # storage daemons (AIStore) log on their own clock: daemon time = worker time + this, from clock anchoring
    # (tools/sources/ais/clocks.py); None when no daemon logs or no anchor. Reports show daemon times on the workers' clock.
    daemon_clock_offset_s: float | None = None
    daemon_clock_basis: str | None = None


class Alternative(BaseModel):
    category: str
    summary: str
    rejected_because: str
    evidence: list[Evidence] = Field(default_factory=list)


class AgentClaim(BaseModel):
    """One statement of the agent's answer with the lines it cited, after the code's check (agent/graph/verify.py)."""

    statement: str
    evidence: list[Evidence] = Field(default_factory=list)  # as re-read from the bundle (secrets redacted)
    verified: bool = False
    dropped_because: str | None = None


class AgentSection(BaseModel):
    """What the LLM agent added to a Diagnosis (`agent` in `ask --json`). The Diagnosis beside it stays the
    deterministic one; `verdict` is the agent's, kept only where the code could verify it, and `changes` says what
    differs from the deterministic answer and why."""

    model: str
    outcome: str  # answered | no_answer | budget | api_error | offline
    notice: str | None = None  # one line for the user when the agent could not run or finish
    question: str | None = None
    narrative: str | None = None
    verdict: dict[str, Any] = Field(default_factory=dict)  # status, category, culprit_ranks, culprit_nodes, confidence
    claims: list[AgentClaim] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    # sentences of the summary/narrative/disagreement the verifier took out, each {where, sentence, names}: they name
    # what no verified line and no deterministic fact shows (None: nothing dropped)
    dropped_sentences: list[dict[str, Any]] | None = None
    # the agent's verdict that code did not confirm ({status, category, culprit_ranks, culprit_nodes, summary,
    # narrative, refused: [why]}): shown beside the deterministic one, never in its place (None: nothing refused)
    unconfirmed: dict[str, Any] | None = None
    problems: list[str] = Field(default_factory=list)  # what the verifier rejected along the way
    rounds: int = 0
    tool_calls: list[str] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    cost_exact: bool = True
    secrets_redacted: int = 0


class Diagnosis(BaseModel):
    """What `debugger ask --json` prints. Field names are a public contract; add, never rename. `schema_version` says
    which contract (tools.groups.SCHEMA_VERSION; 2: rank lists as range sets, evidence many ranks share grouped)."""

    schema_version: int = Field(default=SCHEMA_VERSION, json_schema_extra={"const": SCHEMA_VERSION})
    status: Status
    category: str
    culprit_ranks: list[int] = Field(default_factory=list)
    culprit_nodes: list[str] = Field(default_factory=list)
    confidence: str = "low"  # high | medium | low
    headline: str = ""
    chain: list[Finding] = Field(default_factory=list)  # trigger first, cascade after; every step cited
    timeline: list[TimelineEvent] = Field(default_factory=list)
    job: JobDetails = Field(default_factory=JobDetails)
    key_files: list[str] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)
    restart: str = ""  # 'restart as is' | 'restart without node X' | 'fix first'
    alternatives: list[Alternative] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    coverage: Coverage = Field(default_factory=Coverage)
    notes: list[str] = Field(default_factory=list)
    narrative: str | None = None  # filled by the agent only
    verified: bool = False  # every cited line was re-read from the raw file and matched
    agent: AgentSection | None = None  # the LLM agent's part, when it ran (debugger ask with a key)

    @field_validator("category")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in CATEGORIES:
            raise ValueError(f"unknown category {v!r}")
        return v

    def evidence(self) -> list[Evidence]:
        out = [e for f in self.chain for e in f.evidence] + [t.evidence for t in self.timeline]
        out += [e for a in self.alternatives for e in a.evidence] + self.job.evidence
        return out


@runtime_checkable
class Report(Protocol):
    """What every analysis report offers (scan, collectives, flight recorder, AIStore, steps, rank diff), so the CLI
    prints any of them one way, the agent's tools hand any of them to the model one way, and the diagnosis reads
    their claims one way.

    findings(): the report's claims, each cited (never a dict the reader must interpret);
    to_json(): the plain JSON `debugger <command> --json` prints (a public contract: add keys, never rename);
    notes: what the analysis could not do or cut, in words;
    coverage: which ranks it expected and saw, where the report knows (None where it does not).
    """

    notes: list[str]

    @property
    def coverage(self) -> Coverage | None: ...

    def findings(self) -> list[Finding]: ...

    def to_json(self) -> dict: ...
