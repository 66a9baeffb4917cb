"""What the deterministic side knows that a sentence or a verdict of the agent is held against (the issue's "every
sentence is a claim" and "verdict changes need decisive evidence"): the facts' entities, the ranks the facts single
out, and what a cited line is (trigger, cascade, noise, context) and of which category.

Why a verdict needs a trigger line and not just any cited line: every rank of a job that lost one rank prints
something, and what the healthy ranks print is the cascade. Citing rank 5's

    [default5]:[rank5]:[E1105 12:15:10.169 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation
    timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, ...) ran for 600084 milliseconds before timing out.

proves that rank 5 waited, not that it failed; and the ECC line

    RuntimeError: transform: failed to synchronize: cudaErrorECCUncorrectable: uncorrectable ECC error encountered

is a trigger of gpu_cuda, so it can never be why a job ended well (`none`). A line is read the way the deterministic
analysis reads it, in this order, the first that speaks deciding: the finding of the deterministic chain that cites
that very line; the message tables' most specific entry (tools/sources/messages, the upstream's own role); the
pattern catalog (a cascade pattern first; then a specific pattern; then a fallback one; the last-resort
`generic.error_line` and a bare `Traceback` header say nothing of a fault).
"""

from __future__ import annotations

import json
import re
import weakref
from functools import cached_property
from typing import Any, NamedTuple

from trainlog_debugger.agent.graph.entities import Entity, Haystack, entities
from trainlog_debugger.agent.graph.result import rank_list
from trainlog_debugger.tools.model import CATEGORIES, Diagnosis, Evidence, Role
from trainlog_debugger.tools.ranks import ranks_str

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\n+")
# the catalog's patterns that find a line worth keeping without saying what failed in it
_SAYS_NOTHING = frozenset({"python.traceback", "python.exception", "generic.error_line"})
_REPORTS = ("scan", "nccl", "fr", "ais", "steps", "diff", "stacks", "hardware")
_POSITIONS = re.compile(r'"(?:line|offset|bytes|nanos|micro|seconds|size)": -?[\d.]+')  # where, not what


class Reading(NamedTuple):
    role: str             # trigger | cascade | noise | context | unknown
    category: str | None
    by: str               # what said so: "the deterministic chain, gpu.cuda_error", "the cuda table, cuda.3420e790"


def sentences(text: str | None) -> list[str]:
    """`text` cut into sentences: at `.`, `!` or `?` followed by space and a capital, a digit or a bracket (not
    inside `rank_3.log:812` or `2.18.3`), and at line breaks."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


class Facts:
    """The deterministic Diagnosis and, when the verifier runs inside the graph, the Investigation's reports as
    their public JSON (`box.report`, the JSON the tools show the model). One per toolbox, so across the verify rounds
    and follow-up questions of a session the reports' text (a few MB at 1,024 ranks) is made once, and only when a
    sentence names something no verified line shows."""

    def __init__(self, diag: Diagnosis, box: Any = None):
        self.diag = diag
        self.box = box

    @classmethod
    def of(cls, diag: Diagnosis, box: Any = None) -> Facts:
        if getattr(getattr(box, "inv", None), "diagnosis", None) is not diag:
            return cls(diag, box)
        got = _CACHE.get(box)  # one per toolbox, i.e. per session over one Investigation
        if got is None:
            got = _CACHE[box] = cls(diag, box)
        return got

    @property
    def normal_end(self) -> bool:
        """The deterministic analysis proved the job ended normally: only then may an answer say `completed` or
        `none`."""
        return self.diag.status.value == "completed"

    @property
    def decisive(self) -> bool:
        """Facts a verdict may not contradict without decisive evidence: anything but an inconclusive answer."""
        return self.diag.status.value != "inconclusive"

    def _json(self, name: str) -> Any:
        inv = getattr(self.box, "inv", None)
        if inv is None or not getattr(inv, name, None):
            return None
        return self.box.report(name)

    @cached_property
    def haystack(self) -> Haystack:
        """Every entity the facts name: the Diagnosis, then each report the pipeline made, as their JSON text (one
        C-speed dump, not a walk in Python: 4 MB at 1,024 ranks), without the line numbers and offsets that say
        where a line is, not what happened. The job's ranks are the ranks the coverage knows."""
        d = self.diag
        texts = [json.dumps(obj, ensure_ascii=False, default=str) for obj in
                 [d.model_dump(mode="json", exclude_none=True, exclude={"agent", "narrative"})]
                 + [self._json(n) for n in _REPORTS] if obj is not None]
        ranks = set(d.coverage.seen_ranks) | set(d.coverage.missing_ranks) | set(d.culprit_ranks)
        ranks |= {r for f in d.chain for r in f.ranks}
        return Haystack.of([_POSITIONS.sub("", t) for t in texts], ranks)

    @cached_property
    def singled_out(self) -> set[int]:
        """The ranks the facts name as at fault or suspect: the culprit ranks, the ranks of each trigger the
        analyses found (the chain's and every report's findings), the collective state's culprits and suspects."""
        out = set(self.diag.culprit_ranks)
        out |= {r for f in self.diag.chain if f.role is Role.root_candidate for r in f.ranks}
        for name in ("nccl", "fr", "ais", "steps"):
            for f in (self._json(name) or {}).get("findings") or ():
                if isinstance(f, dict) and f.get("role") == Role.root_candidate.value:
                    out |= set(rank_list(f.get("ranks")))
        nccl = self._json("nccl") or {}
        out |= {r for k in ("culprits", "suspects") for r in rank_list(nccl.get(k))}
        return out

    @cached_property
    def _files(self) -> dict[str, dict]:
        return {f["file"]: f for f in (self._json("scan") or {}).get("files", ()) if isinstance(f, dict)}

    def place(self, file: str, text: str) -> tuple[int | None, list[str]]:
        """The rank and nodes of a line: its own prefix first, else what its file holds when that is one rank."""
        from trainlog_debugger.tools.lines.attribution import attribute_line
        at = attribute_line(text)
        f = self._files.get(file, {})
        rank = at.rank if at.rank is not None else (f["ranks"][0] if len(f.get("ranks") or ()) == 1 else None)
        nodes = [at.node] if at.node else list(f.get("nodes") or ())
        if rank is not None:  # the node the scan maps the rank to (a log stated it)
            nodes += (self._json("scan") or {}).get("ranks", {}).get(str(rank), {}).get("nodes") or []
        return rank, [n for n in dict.fromkeys(nodes) if n]

    def reading(self, file: str, line: int, text: str) -> Reading:
        """What the line is, as the module docstring orders the readers."""
        for f in sorted(self.diag.chain, key=lambda f: f.role is not Role.root_candidate):
            if any(e.file == file and e.line == line for e in f.evidence):
                role = "trigger" if f.role is Role.root_candidate else f.role.value
                return Reading(role, f.category, f"the deterministic chain, {f.id}")
        from trainlog_debugger.tools.sources.messages import catalog as messages
        best = messages.pick_best(messages.match(text), text)
        if best is not None:
            return Reading(best.role, best.category, f"the {best.table} table, {best.id}")
        from trainlog_debugger.tools.sources import patterns
        hits = [p for p in patterns() if p.id not in _SAYS_NOTHING and p.fallback != 2
                and any(a in text for a in p.anchors) and p.match(text)]
        for p in sorted(hits, key=lambda p: (p.role != "cascade", bool(p.fallback), p.role != "root_candidate")):
            return Reading("trigger" if p.role == "root_candidate" else p.role, p.category, f"the catalog, {p.id}")
        return Reading("unknown", None, "no table or pattern reads it")

    def refusals(self, status: str, category: str, culprit_ranks: list[int], cited: list[Evidence],
                 verified_ranks: set[int]) -> list[str]:
        """Why a verdict may not replace the deterministic one (empty: it may), each reason in words the model can
        act on. `cited`: the verified claims' lines (with their ranks); `verified_ranks`: the ranks those lines
        show (a rank no line shows at all is an invented one, removed on its own by the verifier)."""
        diag, why = self.diag, []
        found = f"the deterministic analysis found {diag.status.value} ({diag.category})"
        if status == "completed" and not self.normal_end:
            why.append(f"'completed' needs a line proving a normal end, and {found}")
        if category == "none" and diag.category != "none" and not self.normal_end:
            why.append(f"category 'none' needs a normal end, and {found}")
        read = [(e, self.reading(e.file, e.line, e.text)) for e in cited]
        if category not in (diag.category, "none") and category in CATEGORIES and not any(
                r.role == "trigger" and r.category == category for _, r in read):
            why.append(f"category {category}: no verified cited line is a trigger of {category} "
                       f"({_roles(read) or 'no line verified'})")
        added = [r for r in culprit_ranks if r not in diag.culprit_ranks and r in verified_ranks]
        for r in added:
            own = [(e, rd) for e, rd in read if e.rank == r]
            if r not in self.singled_out and not any(rd.role == "trigger" for _, rd in own):
                why.append(f"culprit rank {r}: " + (f"its cited {_roles(own)}" if own else
                                                    "no verified cited line is its")
                           + "; a new culprit needs a trigger line of that rank, or a rank the deterministic facts "
                           f"single out ({ranks_str(sorted(self.singled_out)) if self.singled_out else 'none'})")
        dropped = [r for r in diag.culprit_ranks if r not in culprit_ranks]
        if dropped and self.decisive and status != "inconclusive" and not added:
            why.append(f"culprit rank(s) {ranks_str(dropped)} dropped: the deterministic facts single them out and "
                       f"no trigger line of another rank replaces them")
        return why


def _roles(read: list[tuple[Evidence, Reading]]) -> str:
    """'line a.log:21 is a cascade line (network; by the pytorch table, pytorch.14d80ea8)'."""
    return "; ".join(dict.fromkeys(f"line {e.cite()} is a {r.role} line ({r.category + '; ' if r.category else ''}"
                                   f"by {r.by})" for e, r in read[:3]))


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def unsupported(text: str, *haystacks: Haystack) -> list[Entity]:
    """The entities of `text` that none of the haystacks holds."""
    return [e for e in entities(text) if not any(h.holds(e) for h in haystacks)]
