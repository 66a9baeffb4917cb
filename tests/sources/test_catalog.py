"""The whole pattern catalog, walked entry by entry (as FR's tests walk every collective).

Per pattern: a unique dotted id, tier/role/category from the allowed sets, literal anchors that occur in the
example, an example that its own trigger finds (and that the scanner records for that id after the fallback rule),
a `fields` regex that extracts something from the example, and a trigger in the syntax subset that Hyperscan and
Python `re` read the same way. Then both engines must find the same (line, pattern) pairs over a buffer made of all
examples, and every source module must have its table test under tests/sources/.
"""

from __future__ import annotations

import re
import re._constants as C
import re._parser as sre_parse
from pathlib import Path

import pytest

from trainlog_debugger.tools import sources as catalog
from trainlog_debugger.tools.scan.engine import HyperscanEngine, ReEngine, available_engines
from trainlog_debugger.tools.sources.pattern import CATEGORIES, ROLES, TIERS, Pattern

from matching import matched  # matching.py beside this file (conftest.py puts it on sys.path): the fallback rule

PATTERNS = catalog.patterns()
HAS_HYPERSCAN = "hyperscan" in available_engines()
SOURCES_TESTS = Path(__file__).parent

# Patterns whose example legitimately extracts no fields (the fields regex covers a companion line).
FIELDS_EMPTY_ON_EXAMPLE = {
    # `posix_fallocate failed: No space left on device` names no segment; `Error while creating shared memory
    # segment {name} (size {n})`, printed right after it, is where `segment` and `size` come from.
    "nccl.shm_no_space",
}

# Other ids the scanner also records on a pattern's own example: one line, two true facts. Anything new here is a
# change in what the catalog reports and must be looked at, so the list is exact.
EXAMPLE_OVERLAPS = {
    "ray.train_worker_rank": {"job.world_size"},                       # `[rank=6, world_size=8]`
    "loader.torch_shm_full": {"io.no_space"},                         # `</torch_...>: No space left on device`
    "nvsmi.gpu_lost": {"nvsmi.device_handle"},                         # nvidia-smi says both in one line
    "env.slurm_nodes": {"env.slurm_nodelist"},                         # an env dump has the count and the host list
    "lightning.not_finite": {"numerical.nan_loss"},                    # `val_loss = nan`
    "pytorch.watchdog_thread_exception": {"pytorch.watchdog_timeout"},  # the exception text is the timeout line
    "pytorch.nccl_error": {"nccl.version"},                            # `..., NCCL version 2.21.5`
    "nccl.shm_no_space": {"io.no_space"},                              # `No space left on device`
    "cuda.error": {"python.exception"},                                # two fallbacks: both kept
    "rpc.deadline_exceeded": {"python.exception"},                     # XLA's exception carries the status
    "slurm.task_exit": {"process.sigabrt"},                            # `Aborted (core dumped)`
    "ais.shared_dm_error": {"io.broken_pipe"},                         # `(write: broken pipe --> ...)`
    "python.fatal_error": {"process.segfault"},                        # `Fatal Python error: Segmentation fault`
    "process.segfault": {"slurm.task_exit"},                           # srun reports the segfault
    "process.sigbus": {"loader.shm_insufficient"},                     # the DataLoader's bus-error hint
    "process.sigabrt": {"slurm.task_exit"},
    "loader.shm_insufficient": {"process.sigbus"},
    "gloo.peer_closed": {"io.connection_broken"},                      # `Connection closed by peer`
}

ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


def by_pattern(f):
    return pytest.mark.parametrize("p", PATTERNS, ids=[p.id for p in PATTERNS])(f)


# ---------------------------------------------------------------------------------------------- table hygiene


def test_ids_are_unique_and_dotted():
    ids = [p.id for p in PATTERNS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert [i for i in ids if not ID.match(i)] == []


@by_pattern
def test_tier_role_category(p: Pattern):
    assert p.tier in TIERS and p.tier in range(4)
    assert p.role in ROLES
    assert p.category is None or p.category in CATEGORIES
    assert p.summary.strip()


@by_pattern
def test_anchors_are_literals_found_in_the_example(p: Pattern):
    assert p.anchors and all(isinstance(a, str) and a for a in p.anchors)
    assert any(a in p.example for a in p.anchors), f"no anchor of {p.anchors} in the example"


@by_pattern
def test_example_matches_its_own_trigger(p: Pattern):
    assert "\n" not in p.example
    assert p.match(p.example)


@by_pattern
def test_example_is_recorded_for_its_own_id(p: Pattern):
    """After the fallback rule the example still yields this pattern (a fallback's example must be a line that no
    specific pattern explains), plus only the documented overlaps."""
    assert matched(p.example) == {p.id} | EXAMPLE_OVERLAPS.get(p.id, set())


def test_overlap_list_names_real_patterns():
    ids = {p.id for p in PATTERNS}
    assert set(EXAMPLE_OVERLAPS) <= ids and set().union(*EXAMPLE_OVERLAPS.values()) <= ids
    assert FIELDS_EMPTY_ON_EXAMPLE <= ids


@by_pattern
def test_fields_extract_from_the_example(p: Pattern):
    if p.fields is None:
        assert not re.compile(p.trigger).groupindex or p.extract(p.example)
        return
    rx = re.compile(p.fields)
    assert rx.groupindex, "a fields regex without named groups extracts nothing"
    missing = [k for k in p.int_fields if k not in rx.groupindex]
    assert not missing, f"int_fields without a group: {missing}"
    facts = p.extract(p.example)
    if p.id in FIELDS_EMPTY_ON_EXAMPLE:
        assert facts == {}, "listed as extracting nothing, but it does: drop it from FIELDS_EMPTY_ON_EXAMPLE"
    else:
        assert facts, f"fields extract nothing from the example {p.example!r}"
    for k in p.int_fields:
        if k in facts:
            assert isinstance(facts[k], int), (k, facts[k])


# ------------------------------------------------------------------------ trigger syntax: the Hyperscan subset

_FORBIDDEN = {C.ASSERT: "lookaround", C.ASSERT_NOT: "lookaround", C.GROUPREF: "backreference",
              C.GROUPREF_EXISTS: "conditional", C.ATOMIC_GROUP: "atomic group", C.POSSESSIVE_REPEAT: "possessive"}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)
_NEWLINE_CATEGORIES = {C.CATEGORY_SPACE, C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_WORD, C.CATEGORY_LINEBREAK}


def _class_matches_newline(items) -> bool:
    negate = any(op is C.NEGATE for op, _ in items)
    has = False
    for op, av in items:
        if op is C.LITERAL and av == 10:
            has = True
        elif op is C.RANGE and av[0] <= 10 <= av[1]:
            has = True
        elif op is C.CATEGORY and av in _NEWLINE_CATEGORIES:
            has = True
    return has != negate


def _problems(seq, out: list[str]) -> list[str]:
    """Constructs Hyperscan rejects or reads differently, and classes that can match across a newline."""
    for op, av in seq:
        if op in _FORBIDDEN:
            out.append(_FORBIDDEN[op])
        elif op is C.AT and av not in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
            out.append(f"anchor {av}: the scan runs over whole buffers, not lines")
        elif op is C.NOT_LITERAL and av != 10:
            out.append("[^x] can match a newline")
        elif op is C.IN and _class_matches_newline(av):
            out.append(r"a class that can match a newline (\s, \D, \W or [^...] without \n)")
        elif op in _REPEATS:
            _problems(av[2], out)
        elif op is C.SUBPATTERN:
            _problems(av[3], out)
        elif op is C.BRANCH:
            for alt in av[1]:
                _problems(alt, out)
    return out


def _nullable(seq) -> bool:
    for op, av in seq:
        if op in _REPEATS and av[0] == 0 or op is C.AT:
            continue
        if op is C.SUBPATTERN and _nullable(av[3]):
            continue
        if op is C.BRANCH and any(_nullable(alt) for alt in av[1]):
            continue
        return False
    return True


def _ends_unbounded(seq) -> bool:
    """Whether a match can end inside an unbounded repeat (`foo\\d+`, `(?:a|b.*)`, `x+(?: y)?`): Hyperscan then
    reports one match per extra character. The line-level result is the same with the repeat cut to one item."""
    for op, av in reversed(list(seq)):
        if op in _REPEATS:
            if av[1] == C.MAXREPEAT or _ends_unbounded(av[2]):
                return True
        elif op is C.SUBPATTERN:
            if _ends_unbounded(av[3]):
                return True
        elif op is C.BRANCH:
            if any(_ends_unbounded(alt) for alt in av[1]):
                return True
        if not _nullable([(op, av)]):
            return False
    return False


@by_pattern
def test_trigger_is_in_the_hyperscan_subset(p: Pattern):
    tree = sre_parse.parse(p.trigger)
    assert _problems(tree, []) == []
    first_op, first_av = tree[0]
    assert not (first_op in _REPEATS and first_av[1] == C.MAXREPEAT), "leading wildcard"
    assert not _ends_unbounded(tree), "trailing unbounded repeat (cut `\\d+` to `\\d` at the end)"


def test_the_subset_checks_catch_what_they_claim():
    bad = {r"foo(?=bar)": "lookaround", r"(a)\1": "backreference", r"^foo": "anchor", r"foo[^x]": "newline",
           r"a\sb": "newline", r"a[^\]]+b": "newline", r"a[^\]x]+b": "newline", r"a\Wb": "newline"}
    for rx, word in bad.items():
        assert any(word in msg for msg in _problems(sre_parse.parse(rx), [])), rx
    assert _problems(sre_parse.parse(r"a[^\]\n]+b\S+c\bd."), []) == []
    for rx in (r"foo\d+", r"foo(?:a|b\S*)", r"foo\d+(?: bar)?", r"(?:x|y+)"):
        assert _ends_unbounded(sre_parse.parse(rx)), rx
    for rx in (r"foo\d", r"foo\d+\)", r"(?:a|b)c", r"foo\d+x?y"):
        assert not _ends_unbounded(sre_parse.parse(rx)), rx


@pytest.mark.skipif(not HAS_HYPERSCAN, reason="hyperscan is not installed")
@by_pattern
def test_trigger_compiles_in_hyperscan(p: Pattern):
    import hyperscan

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[p.trigger.encode()], ids=[0], elements=1, flags=[0])
    hits = []
    db.scan(p.example.encode(), match_event_handler=lambda *a: hits.append(a))
    assert hits, "Hyperscan does not find the example that Python re finds"


# ------------------------------------------------------------------ engines agree over all examples at once


def _buffer() -> tuple[bytes, list[int]]:
    lines = [p.example for p in PATTERNS]
    buf = "\n".join(lines).encode()
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line.encode()) + 1
    return buf, starts


def _verified(engine, buf: bytes) -> set[tuple[int, int]]:
    out = set()
    for start, i in engine.candidates(buf):
        end = buf.find(b"\n", start)
        line = buf[start: len(buf) if end == -1 else end].decode()
        if PATTERNS[i].match(line):
            out.add((start, i))
    return out


def _python_truth(buf: bytes, starts: list[int]) -> set[tuple[int, int]]:
    lines = buf.decode().split("\n")
    return {(s, i) for s, line in zip(starts, lines) for i, p in enumerate(PATTERNS) if p.match(line)}


def test_re_engine_finds_every_example_match():
    buf, starts = _buffer()
    assert _verified(ReEngine(PATTERNS), buf) == _python_truth(buf, starts)


@pytest.mark.skipif(not HAS_HYPERSCAN, reason="hyperscan is not installed")
def test_hyperscan_and_re_engines_agree_on_all_examples():
    buf, starts = _buffer()
    hs = _verified(HyperscanEngine(PATTERNS), buf)
    rx = _verified(ReEngine(PATTERNS), buf)
    truth = _python_truth(buf, starts)
    names = lambda pairs: sorted((PATTERNS[i].id, starts.index(s)) for s, i in pairs)  # noqa: E731
    assert hs == rx, f"only hyperscan: {names(hs - rx)}; only re: {names(rx - hs)}"
    assert hs == truth, f"missed: {names(truth - hs)}"


# ------------------------------------------------------------------------------ every source has its table


@pytest.mark.parametrize("name", sorted(catalog.SOURCES))
def test_every_source_module_has_a_table_test(name):
    # a source is a module (sources/slurm.py) or a package whose format lives in sources/<name>/format.py
    parts = catalog.SOURCES[name].__name__.split(".")
    module = parts[-2] if parts[-1] == "format" else parts[-1]
    # a package's tests may mirror it instead (tests/sources/flight_recorder/: dumps have no lines to tabulate)
    mirrored = any((SOURCES_TESTS / module).glob("test_*.py")) if parts[-1] == "format" else False
    assert (SOURCES_TESTS / f"test_{module}.py").is_file() or mirrored, f"tests/sources/test_{module}.py is missing"


@pytest.mark.parametrize("name", sorted(catalog.SOURCES))
def test_every_source_module_has_patterns(name):
    # a source whose files have no lines (flight-recorder dumps) has no patterns: its citations are re-read by the
    # verifier it declares (VERIFIERS, tools.bundle.reread)
    mod = catalog.SOURCES[name]
    pats = getattr(mod, "PATTERNS", None)
    assert (pats and all(isinstance(p, Pattern) for p in pats)) or (pats is None and getattr(mod, "VERIFIERS", None)) \
        or (pats is None and getattr(mod, "DETECT", None))  # hardware snapshots: detected and read as records
