"""tools/scan/labels.py: the shortcut that gives a c10 log line its attribution without attributing it must answer
exactly as attribution does, on every line it answers for."""

from __future__ import annotations

from pathlib import Path

from trainlog_debugger.eval.bench.logs import generate
from trainlog_debugger.tools.scan.labels import bounded_attribution, c10_attribution

ROOT = Path(__file__).resolve().parents[2]


def _fields(a):
    return a.rank, a.local_rank, a.node


def _corpus_lines():
    """Every line of the project's cases (real incidents, lab runs, generated bundles): what real c10, torchrun,
    srun, Ray and NCCL prefixes look like."""
    for f in sorted((ROOT / "cases").rglob("*")):
        if f.is_file() and f.suffix in (".log", ".out", ".txt", ".err") and f.stat().st_size < 8 << 20:
            yield from f.read_text("utf-8", "replace").splitlines()


def test_the_c10_shortcut_agrees_with_attribution_on_every_corpus_line():
    answered = 0
    for line in _corpus_lines():
        got = c10_attribution(line)
        if got is not None:
            answered += 1
            assert _fields(got) == _fields(bounded_attribution(line)), line
    assert answered > 100  # the corpus holds c10 lines: the shortcut was exercised


def test_the_c10_shortcut_agrees_on_a_per_node_cascade(tmp_path):
    """The generated per-node torchrun bundle (8 ranks a file behind `[defaultN]:[rankM]:`): every watchdog line."""
    root, _ = generate(tmp_path, 0.002, ranks=16, scenario="cascade", layout="node")
    answered = 0
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        for line in f.read_text().splitlines():
            if (got := c10_attribution(line)) is not None:
                answered += 1
                assert _fields(got) == _fields(bounded_attribution(line)), line
                assert got.local_rank is not None  # the role label's local rank
    assert answered > 16


def test_the_c10_shortcut_leaves_every_other_line_to_attribution():
    """Where something after the prefix may name another rank or a node, it does not answer."""
    header = "[E1105 03:33:27.000023757 ProcessGroupNCCL.cpp:636] "
    for line in ("[rank3]:" + header + "gpu-node-7:1234:1300 [3] NCCL INFO comm 0x1 rank 3",  # an NCCL host
                 "[rank3]:" + header + "see [rank5]: too",                                    # a second label
                 "\x1b[31m[rank3]:" + header + "red",                                         # a colour escape
                 "[rank3]:" + header + "50%\r[rank4]:" + header + "x",                        # tqdm's CR
                 "[rank3]: Traceback (most recent call last):",                               # no c10 header
                 "gpu-node-7: [rank3]:" + header + "pdsh"):                                   # a wrapper first
        assert c10_attribution(line) is None, line
    a = c10_attribution("[default2]:[rank10]:" + header + "[Rank 10] Watchdog caught collective operation timeout")
    assert a is not None and _fields(a) == (10, 2, None)


def test_a_c10_line_is_stripped_as_its_wrappers_say():
    """tools.lines.attribution.strip_prefixes cuts a c10 log line after its `[rankN]:` at once; the same line behind
    a colour escape takes the full path (_clean, _wrappers, _peel) and must come out the same."""
    from trainlog_debugger.tools.lines.attribution import _C10_HEADED, strip_prefixes
    n = 0
    for line in _corpus_lines():
        if line.startswith("[") and _C10_HEADED.match(line):
            n += 1
            assert strip_prefixes(line) == strip_prefixes("\x1b[0m" + line), line
    assert n > 100
