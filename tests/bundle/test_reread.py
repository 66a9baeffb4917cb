"""tools.bundle.reread: the one re-reader of cited lines (verify, eval grounding, the agent's read window).

Real-looking rank logs: c10 NCCL watchdog lines, CRLF endings, a byte that is not UTF-8, a gzip member, a line
longer than the read chunk. Each CitationProblem kind is produced by a citation that really is wrong that way.
"""

import gzip

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.bundle.reread import (MAX_LINE_CHARS, CitationProblem, ProblemKind, check_citations,
                                                   read_lines, read_window)
from trainlog_debugger.tools.model import Evidence

RANK3 = [
    "[rank3]:[I1105 12:00:01.000000000 ProcessGroupNCCL.cpp:946] [PG ID 0 PG GUID 0 Rank 3] ProcessGroupNCCL initialization",
    "iteration      100/  5000 | elapsed time per iteration (ms): 812.4 | lm loss: 2.412E+00",
    "[rank3]:[E1105 12:34:10.579409818 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=4521, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800071 milliseconds",
    "[rank3]:[E1105 12:34:40.383100304 ProcessGroupNCCL.cpp:636] [Rank 3] To avoid data inconsistency, we are taking "
    "the entire process down.",
]


@pytest.fixture
def bundle(tmp_path):
    (tmp_path / "rank_3.log").write_bytes(("\r\n".join(RANK3) + "\r\n").encode())
    (tmp_path / "rank_5.log").write_bytes(b"[rank5]:loading shard caf\xe9-00005.tar\n[rank5]:retrying 1/5\n")
    with gzip.open(tmp_path / "rank_7.log.gz", "wb") as g:
        g.write(("\n".join(f"[rank7]:step {i}" for i in range(1, 101)) + "\n").encode())
    with open_bundle(tmp_path) as b:
        yield b


def _src(b, rel):
    return {s.rel: s for s in b.sources}[rel]


def test_read_lines_first_middle_last_crlf_and_bad_bytes(bundle):
    got = read_lines(_src(bundle, "rank_3.log"), {1, 3, 4, 99})
    assert got == {1: RANK3[0], 3: RANK3[2], 4: RANK3[3]}  # \r dropped, line 99 absent
    assert read_lines(_src(bundle, "rank_5.log"), {1}) == {1: "[rank5]:loading shard caf\ufffd-00005.tar"}
    assert read_lines(_src(bundle, "rank_7.log.gz"), {100}) == {100: "[rank7]:step 100"}


def test_read_lines_does_not_depend_on_the_chunk_size(bundle):
    src = _src(bundle, "rank_7.log.gz")
    want = {1, 2, 37, 64, 65, 99, 100}
    assert read_lines(src, want, chunk_size=64) == read_lines(src, want) == {n: f"[rank7]:step {n}" for n in want}


def test_read_window_is_bounded_and_says_what_it_cut(bundle):
    src = _src(bundle, "rank_7.log.gz")
    w = read_window(src, 50, before=2, after=2)
    assert [n for n, _ in w.lines] == [48, 49, 50, 51, 52] and w.cut == []
    huge = read_window(src, 50, before=10**12, after=10**12, max_lines=10**9)  # bounded before it sizes anything
    assert len(huge.lines) <= 100 and huge.lines[0][0] == 1
    small = read_window(src, 50, before=30, after=30, max_lines=7)
    assert len(small.lines) == 7 and small.first == 44 and any("at most 7 lines" in c for c in small.cut)
    chars = read_window(src, 50, before=5, after=5, max_chars=40)
    assert sum(len(t) for _, t in chars.lines) <= 40 and any("characters per window" in c for c in chars.cut)
    end = read_window(src, 200, before=1, after=1)
    assert end.lines == [] and "the file has no line 200" in end.cut


def test_a_line_longer_than_the_limit_is_shortened_with_a_marker(tmp_path):
    (tmp_path / "rank_0.log").write_text("x" * (MAX_LINE_CHARS * 3) + "\nnext\n")
    with open_bundle(tmp_path) as b:
        w = read_window(b.sources[0], 1, before=0, after=1)
    assert w.lines[0][1].endswith(f"[line cut: {MAX_LINE_CHARS * 3} characters]") and w.lines[1] == (2, "next")


def test_every_problem_kind_from_a_citation_that_is_wrong_that_way(bundle):
    srcs = {s.rel: s for s in bundle.sources}
    good = Evidence(file="rank_3.log", line=3, text=RANK3[2])
    evs = [good,
           Evidence(file="rank_3.log", line=4, text=RANK3[3].replace("process", "job")),  # paraphrased
           Evidence(file="rank_3.log", line=40, text=RANK3[0]),                           # past the end
           Evidence(file="rank_9.log", line=1, text="[rank9]: anything"),                 # no such file
           Evidence(file="rank_9.log", line=2, text="[rank9]: more")]
    probs = check_citations(evs, srcs)
    kinds = {(p.file, p.line): p.kind for p in probs}
    assert kinds == {("rank_3.log", 4): ProblemKind.text_differs, ("rank_3.log", 40): ProblemKind.no_such_line,
                     ("rank_9.log", None): ProblemKind.file_not_in_bundle}  # the missing file once, not per line
    assert sorted(map(str, probs)) == sorted(["rank_3.log:4: cited text differs from the file",
                                              "rank_3.log:40: no such line", "rank_9.log: cited file is not in the bundle"])
    assert check_citations([good], srcs) == []


def test_unreadable_and_dump_problems_render_as_verify_always_said():
    assert str(CitationProblem("a.tar.gz!r0.log", None, ProblemKind.unreadable, "truncated")) == \
        "a.tar.gz!r0.log: cannot re-read (truncated)"
    assert str(CitationProblem("nccl_trace_rank_0", 3, ProblemKind.entry_differs)) == \
        "nccl_trace_rank_0:3: cited entry differs from the dump"


def test_a_flight_recorder_citation_is_checked_against_the_dump():
    from pathlib import Path
    fixtures = Path(__file__).resolve().parents[1] / "sources" / "flight_recorder" / "fixtures" / "gloo-2.13"
    from trainlog_debugger.tools.sources.flight_recorder.analyze import analyze_bundle
    with open_bundle(fixtures) as b:
        rep = analyze_bundle(b)
        evs = [e for f in rep.findings() for e in f.evidence]
        srcs = {s.rel: s for s in b.sources}
        assert evs and check_citations(evs, srcs) == []
        bad = evs[0].model_copy(update={"text": evs[0].text + " "})
        (p,) = check_citations([bad], srcs)
        assert p.kind == ProblemKind.entry_differs


def test_a_kind_with_a_declared_verifier_is_rechecked_by_it(bundle, monkeypatch):
    """The re-reader knows no kind of its own: a source declares VERIFIERS = {kind: "module:function"} and the
    citations of that kind's files go to the function (source, line, text) -> bool, imported only when one is
    checked; text files are still read line by line."""
    import sys
    import types
    from trainlog_debugger.tools import sources

    calls = []

    def verify(src, line, text):
        calls.append((src.rel, line))
        return text == f'{{"record_id": {line - 1}, "profiling_name": "nccl:all_reduce"}}'

    impl = types.ModuleType("synthetic_dump_reader")
    impl.verify = verify
    monkeypatch.setitem(sys.modules, "synthetic_dump_reader", impl)
    fmt = types.ModuleType("synthetic_dump_format")
    fmt.VERIFIERS = {"synthetic_dump": "synthetic_dump_reader:verify"}
    monkeypatch.setitem(sources.SOURCES, "synthetic_dump", fmt)

    class Dump:
        rel, kind = "trace_rank_3.bin", "synthetic_dump"

        def open(self):
            raise AssertionError("a verified kind is never read as lines")

    srcs = {s.rel: s for s in bundle.sources} | {Dump.rel: Dump()}
    good = Evidence(file=Dump.rel, line=2, text='{"record_id": 1, "profiling_name": "nccl:all_reduce"}')
    bad = Evidence(file=Dump.rel, line=3, text='{"record_id": 7, "profiling_name": "nccl:all_reduce"}')
    line = Evidence(file="rank_3.log", line=2, text=RANK3[1])
    (p,) = check_citations([good, bad, line], srcs)
    assert (p.file, p.line, p.kind) == (Dump.rel, 3, ProblemKind.entry_differs)
    assert calls == [(Dump.rel, 2), (Dump.rel, 3)]


def test_the_flight_recorder_declares_the_dump_verifier():
    from trainlog_debugger.tools.bundle.reread import verifiers
    from trainlog_debugger.tools.scan.driver import text_skip_kinds
    from trainlog_debugger.tools.sources import resolve
    from trainlog_debugger.tools.sources.flight_recorder.analyze import verify_entry
    assert resolve(verifiers()["fr_dump"]) is verify_entry
    assert "fr_dump" in text_skip_kinds()  # a kind with its own verifier has no lines to scan
