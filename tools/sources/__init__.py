"""The pattern catalog: every log source's patterns, in one table the scanner compiles once.

Adding a source touches its module under tools/sources/, one line in SOURCES and one test file
(tests/sources/test_catalog.py walks the whole table). Order matters only for display; the scanner applies every
pattern to every text line and then drops `fallback` matches on lines that a specific pattern explains.
"""

from __future__ import annotations

from functools import lru_cache

from trainlog_debugger.tools.sources.pattern import Pattern
from trainlog_debugger.tools.sources import cloud, cuda, deepspeed, generic, jax, job, k8s, kernel, mpi, nvsmi, trainers
from trainlog_debugger.tools.sources.ais import format as ais
from trainlog_debugger.tools.sources.flight_recorder import format as flight_recorder_format
from trainlog_debugger.tools.sources.hw import format as hw
from trainlog_debugger.tools.sources.nccl import format as nccl_format
from trainlog_debugger.tools.sources.pyspy import format as pyspy
from trainlog_debugger.tools.sources.ray import format as ray
from trainlog_debugger.tools.sources.pytorch import format as pytorch
from trainlog_debugger.tools.sources.slurm import format as slurm_format
from trainlog_debugger.tools.sources.torchrun import format as torchrun
from trainlog_debugger.tools.sources import env, upstream

SOURCES = {
    "pytorch": pytorch,
    "torchrun": torchrun,
    "ray": ray,
    "jax": jax,  # the tasks the coordination service names as lost (a JAX job's ranks)  # a Ray worker's lines get the rank its process states (after torchrun's local ranks)
    "nccl": nccl_format,  # (aliased: the name `nccl` here is the package, tools.sources.nccl)
    "cuda": cuda,
    "kernel": kernel,
    "slurm": slurm_format,
    "pyspy": pyspy,
    "nvsmi": nvsmi,
    "mpi": mpi,
    "deepspeed": deepspeed,
    "trainers": trainers,
    "ais": ais,
    "k8s": k8s,
    "cloud": cloud,
    "generic": generic,
    "job": job,
    "env": env,
    "upstream": upstream,  # generated from the message tables (eval/messages.py scanlist)
    "flight_recorder": flight_recorder_format,  # binary dumps: no lines, no patterns; its own reader and verifier
    "hw": hw,  # hardware and fabric snapshots: detection and a reader, no patterns (nvsmi's lines are nvsmi's)
}


@lru_cache(maxsize=1)
def patterns() -> tuple[Pattern, ...]:
    out: list[Pattern] = []
    for mod in SOURCES.values():
        out.extend(getattr(mod, "PATTERNS", ()))
    ids = [p.id for p in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate pattern ids: {sorted(dup)}")
    return tuple(out)


def declared(name: str) -> list[tuple[str, object]]:
    """(source name, value) for every source whose format module declares the module-level name `name`, in registry
    order. This is how the rest of the tool learns what a source brings beyond its patterns (per-hit hooks, detection
    tiers, path hints, readers, re-read verifiers, its analysis stage) without knowing the source: the scanner, the
    detector, the re-reader and the pipeline each ask for one name. Format modules stay cheap to import, so what
    needs the scanner or the bundle is declared as a "module:attribute" string and imported on use (`resolve`)."""
    return [(src, getattr(mod, name)) for src, mod in SOURCES.items() if hasattr(mod, name)]


def resolve(ref: str) -> object:
    """The object a "package.module:attribute" reference names (imported on first use, then cached by Python)."""
    from importlib import import_module
    mod, _, attr = ref.partition(":")
    return getattr(import_module(mod), attr)


def reader_rows() -> list[dict]:
    """The structured readers the sources declare (`READER`), as rows shaped like the pattern catalog's
    (`debugger catalog`, `--json`): role 'reader', in registry order."""
    from trainlog_debugger.tools.sources.declare import Reader
    return [{"id": r.id, "tier": None, "category": r.category, "role": "reader", "summary": r.summary,
             "trigger": None, "example": r.example, "fallback": False, "formats": list(r.formats),
             "rules": list(r.rules)} for _, r in declared("READER") if isinstance(r, Reader)]


def by_id() -> dict[str, Pattern]:
    return {p.id: p for p in patterns()}


@lru_cache(maxsize=1)
def _cascades() -> tuple[Pattern, ...]:
    return tuple(p for p in patterns() if p.role == "cascade")


def is_cascade(text: str) -> bool:
    """Does a catalog pattern whose role is cascade match this line (a collective timeout, a launcher signal)?
    A traceback ending in such a line is a rank that waited, not one that crashed. Each pattern's anchors are
    looked for first (every line it matches holds one), as the scan's own prefilter: a regex only where it can hit."""
    return any(any(a in text for a in p.anchors) and p.match(text) for p in _cascades())
