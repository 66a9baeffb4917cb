"""The upstream message tables (tools/sources/messages): every entry is well-formed, every template compiles and
matches its own example line, no two tables give one line different categories, the tables cover the upstreams the
issue names with at least 1,500 classified templates, and the checker finds moved and missing citations in a
checkout."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from trainlog_debugger.eval import messages as checker
from trainlog_debugger.tools.sources.messages import catalog as M

TABLES = M.tables()
ALL = M.messages()
UPSTREAMS = {"nccl", "pytorch", "cuda", "xid", "kernel", "slurm", "k8s", "mpi_ucx_ofi", "deepspeed",
             "megatron_nemo", "lightning", "hf", "ray", "jax"}


def test_every_shipped_table_reads():
    assert not M.LOAD_ERRORS
    assert {p.stem for p in M.HERE.glob("*.yaml")} - {"lexicon"} == set(TABLES)


def test_the_tables_cover_the_ecosystem():
    assert UPSTREAMS <= set(TABLES), f"missing tables: {sorted(UPSTREAMS - set(TABLES))}"
    assert len(ALL) >= 1500
    assert all(m.role in M.ROLES for m in ALL) and all(m.category for m in ALL if m.role == "trigger")
    assert len({m.id for m in ALL}) == len(ALL), "two entries of one table share a source and a template"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_table_cites_its_upstream_version_and_files(name):
    head, msgs = M.read_table(M.HERE / f"{name}.yaml")  # tables() is keyed by file name
    assert head.get("repo") and head.get("version"), "a table names where and at which version it was read"
    for m in msgs:
        assert m.source and not m.source.startswith("/"), m.template
        assert len(m.meaning) <= 300 and len(m.action) <= 300 and "\n" not in m.meaning + m.action


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_template_compiles_and_matches_its_own_example(name):
    bad = []
    for m in TABLES[name]:
        rx = m.rx  # compiles (raises re.error otherwise)
        if not m.weak and not rx.search(m.example):
            bad.append(f"{m.source}: {m.template!r} does not match its example {m.example!r}")
    assert not bad, "\n".join(bad[:20])


def test_the_matcher_finds_every_example_through_the_engine():
    """match_many (one engine pass over a batch) finds each example's own entry: the anchor prefilter never loses
    a line the template's regex matches."""
    strong = [m for m in ALL if not m.weak]
    found = M.match_many([m.example for m in strong])
    lost = [m for m, hits in zip(strong, found) if m not in hits]
    assert not lost, [(m.table, m.source) for m in lost[:10]]


TIE = 0.8  # entries this close to the most specific one speak for the line as much as it does


def test_no_two_tables_give_one_line_different_categories():
    """For every example line, what each table says of it (its most specific trigger) agrees with what the others
    say, among the entries that are about as specific as the best (a far more specific entry refines a generic
    one: `Tried to allocate more than 1EB memory` is a bug inside `CUDA out of memory`, and pick_best takes it)."""
    conflicts = []
    for m, hits in zip(ALL, M.match_many([m.example for m in ALL])):
        trig = [h for h in hits if h.role == "trigger"]
        if not trig:
            continue
        top = max(h.specificity for h in trig)
        cats = defaultdict(set)
        for h in trig:
            if h.specificity >= TIE * top:
                cats[h.category].add(h.table)
        if len(cats) > 1 and len({t for ts in cats.values() for t in ts}) > 1:
            conflicts.append(f"{m.table} {m.source} {m.example[:100]!r}: {dict(cats)}")
    assert not conflicts, "\n".join(conflicts[:20])


def test_pick_best_prefers_the_most_specific_then_a_trigger():
    a = M.Message("t", "v", "NCCL error %s", "a.cc:1", "network", "trigger", "m", "a", "NCCL error x", syntax="printf")
    b = M.Message("t", "v", "unhandled system error, NCCL version %s", "b.cc:2", "network", "trigger", "m", "a",
                  "x", syntax="printf")
    c = M.Message("t", "v", "unhandled system error, NCCL version %s", "c.cc:3", None, "noise", "m", "a", "x",
                  syntax="printf")
    assert M.pick_best([a, c, b]) is b


@pytest.mark.parametrize("template, syntax, line, hit", [
    ("NET/IB : Got completion from peer %s with status=%d opcode=%d", "printf",
     "h:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5> with status=12 opcode=0 len=0", True),
    ("Rank {rank} timed out after {t:.2f}s", "brace", "[Rank 3] Rank 3 timed out after 1800.00s", True),
    ("100%% done: %s", "printf", "100% done: ok", True),
    ("{{literal}} braces {}", "brace", "{literal} braces x", True),
    ("NET/IB : Got completion from peer %s with status=%d", "printf", "NET/IB : Got completion", False),
])
def test_template_regex(template, syntax, line, hit):
    assert (re.search(M.template_regex(template, syntax), line) is not None) == hit


def test_weak_templates_are_never_matched():
    m = M.Message("t", "v", "%s:%d -> %d", "x.cc:1", None, "cascade", "m", "a", "a.cc:1 -> 3", syntax="printf")
    assert m.weak and not m.matches("a.cc:1 -> 3")


def _table(tmp_path: Path, source: str, template: str = "Call to ibv_reg_mr failed with error %s") -> Path:
    t = tmp_path / "demo.yaml"
    t.write_text(f"""upstream: demo
repo: example/demo
version: v1
syntax: printf
extract:
  files: ["src/**/*.cc"]
  calls: ['WARN\\(\\s*"((?:[^"\\\\\\\\]|\\\\\\\\.)*)"']
messages:
  - template: "{template}"
    source: {source}
    category: network
    role: trigger
    meaning: m
    action: a
    example: "NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
""")
    return t


def test_checker_finds_ok_moved_and_missing_citations(tmp_path, capsys):
    up = tmp_path / "up"
    (up / "src").mkdir(parents=True)
    body = ["// filler"] * 200
    body[119] = '  WARN("Call to ibv_reg_mr failed with error %s", strerror(errno));'
    body[150] = '  WARN("NET/IB : a message no table has %d", x);'
    (up / "src" / "ib.cc").write_text("\n".join(body) + "\n")
    assert checker.check(_table(tmp_path, "src/ib.cc:120"), up) == 0
    assert checker.check(_table(tmp_path, "src/ib.cc:20"), up, window=10) == 0  # moved: found 100 lines away
    assert "moved    src/ib.cc:20 -> src/ib.cc:120" in capsys.readouterr().out
    t = _table(tmp_path, "src/ib.cc:20")
    checker.check(t, up, window=10, fix=True)
    assert "source: src/ib.cc:120" in t.read_text()
    assert checker.check(_table(tmp_path, "src/gone.cc:5"), up) == 1
    assert checker.check(_table(tmp_path, "src/ib.cc:120", "A message that was removed %s"), up) == 1
    capsys.readouterr()
    assert checker.candidates(_table(tmp_path, "src/ib.cc:120"), up) == 1
    out = capsys.readouterr().out
    assert "src/ib.cc:151  NET/IB : a message no table has %d" in out and "ibv_reg_mr" not in out.split("\n")[0]


def test_a_context_line_yields_to_the_error_its_placeholder_quotes():
    """NCCL/RCCL's `NET/Plugin : dlerror=%s No plugin found` is context when the plugin is simply not installed, and
    the loader's `version ... not found` when the installed one needs a newer libfabric: read at the innermost error."""
    plain = ("nid005123:48211:48211 [0] NCCL INFO NET/Plugin : dlerror=librccl-net.so: cannot open shared object "
             "file: No such file or directory No plugin found (librccl-net.so), using internal implementation")
    quoted = (" [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found "
              "(required by /env/lib/libnccl-net.so) No plugin found (libnccl-net.so), using internal implementation")
    assert (M.best(plain).role, M.best(plain).category) == ("context", None)
    got = M.best(quoted)
    assert (got.table, got.role, got.category) == ("glibc_ld", "trigger", "software")


def test_checker_joins_literals_split_by_a_line_continuation(tmp_path):
    """A #define whose string is split with a backslash continuation (`"... during "\\` then `"flow ..."`), as
    libfabric's CXI provider writes its fatal messages: the compiler joins them, so the checker does."""
    up = tmp_path / "up"
    (up / "src").mkdir(parents=True)
    body = ["// filler"] * 40
    body[29] = '#define FC_ABORT "LE resources not recovered during "\\'
    body[30] = '\t"flow control. FI_CXI_RX_MATCH_MODE=[hybrid|software] is required\\n"'
    (up / "src" / "msg.c").write_text("\n".join(body) + "\n")
    t = _table(tmp_path, "src/msg.c:30", "LE resources not recovered during flow control. FI_CXI_RX_MATCH_MODE=")
    assert checker.check(t, up) == 0


@pytest.mark.parametrize("field, error", [("category: gpu", "category 'gpu' is not a fault category"),
                                          ("lead: maybe", "lead must be true or false")])
def test_a_broken_table_is_one_clear_error(tmp_path, field, error):
    t = tmp_path / "bad.yaml"
    entry = "  - template: x\n    source: a:1\n    role: trigger\n    category: network\n    meaning: m\n    action: a\n" \
            "    example: x\n"
    t.write_text("upstream: bad\nmessages:\n" + entry.replace("category: network", field) if field.startswith("cat")
                 else "upstream: bad\nmessages:\n" + entry + f"    {field}\n")
    with pytest.raises(M.TableError, match=f"bad entry 0: {error}"):
        M.read_table(t)
    assert checker.main(["stats", str(t)]) == 2
    t.write_text("upstream: bad\nmessages:\n" + entry + "    lead: true\n")
    assert M.read_table(t)[1][0].lead is True


def test_a_regex_that_does_not_compile_is_named_by_the_check_and_never_matches_at_run_time(tmp_path):
    t = tmp_path / "bad.yaml"
    t.write_text("upstream: bad\nmessages:\n  - template: 'NET/IB : ibv_poll_cq failed'\n    regex: 'ibv_poll_cq (fa'\n"
                 "    source: a:1\n    role: trigger\n    category: network\n"
                 "    meaning: m\n    action: a\n    example: 'NET/IB : ibv_poll_cq failed'\n")
    with pytest.raises(M.TableError, match="bad entry 0: its regex does not compile"):
        M.read_table(t)
    _head, (m,) = M.read_table(t, check=False)  # a diagnosis's load: compiled on first use
    assert not m.matches("NET/IB : ibv_poll_cq failed")


@pytest.mark.parametrize("line,wrapper", [
    ("[rank0]: RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
     "pytorch"),
    ("gpu-a3-0042:53371:53582 [3] transport/nvls.cc:376 (nvlsAllocateMem) NCCL WARN Failed to bind NVLink SHARP "
     "(NVLS) Multicast memory of size 1073741824 : CUDA error 802 'system not yet initialized'.", "nccl"),
])
def test_a_wrapper_yields_to_the_error_it_quotes(line, wrapper):
    """TAXONOMY step 1, the innermost error: a line that matches a wrapper's template (PyTorch's or NCCL's message
    around a CUDA error) and, inside the wrapper's placeholder, a specific entry of another category, reads as the
    quoted error; without the line's text (no spans to compare) the more specific wrapper is still the answer."""
    hits = M.match(line)
    assert {m.table for m in hits} >= {wrapper, "cuda"}
    assert M.pick_best(hits).table == wrapper
    got = M.pick_best(hits, line)
    assert (got.table, got.category) == ("cuda", "infrastructure")
    assert M.best(line) is got


def test_a_phrase_of_the_wrappers_own_text_is_not_an_inner_error():
    """Only what sits in a wrapper's placeholder is an error it quotes: an entry that matches the wrapper's own
    literal words does not unseat it; one that matches what the program filled in does."""
    wrapper = M.Message("t", "v", "Call to ibv_reg_mr failed with error %s", "a.cc:1", "network", "trigger", "m", "a",
                        "x", syntax="printf")
    words = M.Message("t", "v", "ibv_reg_mr failed with", "b.cc:2", "config", "trigger", "m", "a", "x",
                      syntax="printf")
    quoted = M.Message("t", "v", "Cannot allocate memory", "c.cc:3", "oom", "trigger", "m", "a", "x", syntax="printf")
    line = "node1:12:34 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
    assert M.innermost([wrapper, words], line) == [wrapper, words]
    assert M.innermost([wrapper, words, quoted], line) == [words, quoted]
    assert M.pick_best([wrapper, quoted], line) is quoted
    assert M.pick_best([wrapper, quoted]) is wrapper  # without the text: the most specific
    assert M.innermost([wrapper, quoted], line.replace("Cannot allocate memory", "Success")) == [wrapper, quoted]


@pytest.mark.parametrize("line, category", [
    # srun's wrappers carry their own regex (they print more than their template): their placeholder still holds
    # Slurm's own error string, which says what was at fault
    ("srun: error: Application launch failed: Invalid MPI plugin name", "config"),
    ("srun: error: Task launch for StepId=4891784.0 failed on node gpu-node-17: Slurmd could not connect IO",
     "storage_io"),
])
def test_a_wrapper_with_its_own_regex_yields_too(line, category):
    hits = M.match(line)
    assert M.pick_best(hits).category == "infrastructure"  # the launch failure, without the line's text
    got = M.pick_best(hits, line)
    assert (got.table, got.category) == ("slurm", category)
