"""tools/scan/filepass.py: the file pass calls what the sources declare (HOOKS by pattern id, KIND_HOOKS by file
kind) without knowing them: a synthetic source, put into the registry for the test, sees its hook called on the
hits of its own pattern (kept ones, or every one for a counting hook), and on no other line."""

from __future__ import annotations

import types

import pytest

from trainlog_debugger.tools import sources
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.scan.keeper import KEEP
from trainlog_debugger.tools.sources.pattern import HitContext, Hook, P

# Megatron's checkpoint lines (megatron/training/checkpointing.py), as rank 0 of each node prints them, among the
# lines of an ordinary step log that no hook looks at
SAVED = "  successfully saved checkpoint from iteration {it:>7} to /ckpt/gpt-8b [ t 1/2, p 1/1 ]"
STEP = (" [2024-11-05 03:{m:02d}:{s:02d}] iteration {it:>8}/  500000 | consumed samples: {cs:>10} | elapsed time per "
        "iteration (ms): 1234.5 | learning rate: 3.000E-04 | lm loss: 2.131E+00 | loss scale: 1.0 |")

CKPT = P("synthetic.checkpoint_saved", 0, None, "context",
         r"successfully saved checkpoint from iteration +\d+ to \S", "successfully saved checkpoint",
         SAVED.format(it=2000), "a checkpoint was saved",
         fields=r"iteration +(?P<iteration>\d+) to (?P<path>\S+)", ints=("iteration",))


def _log(rank: int, saves: int) -> str:
    lines = []
    for i in range(saves):
        it = (i + 1) * 100
        lines += [f"[rank{rank}]:" + STEP.format(m=i // 60, s=i % 60, it=it, cs=it * 512),
                  f"[rank{rank}]:" + SAVED.format(it=it)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def synthetic(monkeypatch):
    """A source with one pattern and the hooks the test hands it, in the registry for the test only."""
    sources.patterns()  # the catalog cached as it is: the synthetic pattern is scanned only where passed in

    def install(**declared):
        mod = types.ModuleType("synthetic_source")
        mod.PATTERNS = [CKPT]
        for name, value in declared.items():
            setattr(mod, name, value)
        monkeypatch.setitem(sources.SOURCES, "synthetic", mod)
        return mod
    return install


def _scan(path, workers=1):
    with open_bundle(path) as b:
        return scan_bundle(b, workers=workers, pats=[*sources.patterns(), CKPT])


def test_a_declared_hook_runs_on_the_kept_hits_of_its_pattern(tmp_path, synthetic):
    seen: list[tuple[int, int | None, str]] = []

    def last_iteration(ctx: HitContext) -> None:
        seen.append((ctx.line, ctx.rank, ctx.text))
        ctx.fields["saved_to_node_disk"] = ctx.fields["path"].startswith("/ckpt")
        assert ctx.buf[ctx.start:ctx.end].decode() == ctx.text and ctx.line_rank == ctx.rank

    synthetic(HOOKS={"synthetic.checkpoint_saved": Hook(last_iteration)})
    for r in (0, 1):
        (tmp_path / f"rank_{r}.log").write_text(_log(r, saves=3 * KEEP))
    res = _scan(tmp_path)
    hits = [h for f in res.files for h in f.hits if h.pattern == "synthetic.checkpoint_saved"]
    # the first KEEP and the last KEEP per rank are kept; the hook ran on exactly those, once each
    assert len(hits) == 2 * 2 * KEEP
    assert sorted(seen) == sorted((h.line, h.rank, h.text) for h in hits)
    assert all(h.fields["saved_to_node_disk"] is True and h.fields["iteration"] % 100 == 0 for h in hits)
    assert sum(n for (pid, _r), n in res.files[0].counts.items() if pid == "synthetic.checkpoint_saved") == 3 * KEEP


@pytest.mark.parametrize("workers", [1, 2])
def test_a_counting_hook_sees_every_hit_and_writes_to_the_file_scan(tmp_path, synthetic, workers):
    """Hook.every: repeats that are only counted reach the hook too (the retry escalation is counted this way);
    what it writes into the FileScan comes back from the worker."""
    def count(ctx: HitContext) -> None:
        ctx.file.notes.append(f"saved {ctx.fields['iteration']} on rank {ctx.rank}")

    synthetic(HOOKS={"synthetic.checkpoint_saved": Hook(count, every=True)})
    (tmp_path / "rank_3.log").write_text(_log(3, saves=40))
    (res_file,) = _scan(tmp_path, workers=workers).files
    assert [n for n in res_file.notes if n.startswith("saved")] == [f"saved {i * 100} on rank 3" for i in range(1, 41)]


def test_a_hook_declared_by_reference_is_resolved(tmp_path, synthetic):
    """A hook that needs more than the format floor is declared as "module:function" and imported by the scan."""
    synthetic(HOOKS={"synthetic.checkpoint_saved": Hook("trainlog_debugger.tools.sources.generic:count_retry",
                                                        every=True)})
    (tmp_path / "rank_0.log").write_text(_log(0, saves=2))
    (f,) = _scan(tmp_path).files
    assert f.retries == {}  # count_retry ran (it reads attempt/max_attempts, which this pattern has not)


def test_a_kind_hook_fills_what_the_line_does_not_state(tmp_path, synthetic):
    """KIND_HOOKS: on every kept hit line of a file of that kind, after the line's own time and node were read."""
    (tmp_path / "rank_0.log").write_text(_log(0, saves=2))
    with open_bundle(tmp_path) as b:
        kind = b.sources[0].kind

    def host_from_file(ctx: HitContext) -> None:
        ctx.node = ctx.node or "gpu-node-17"

    synthetic(KIND_HOOKS={kind: Hook(host_from_file)})
    res = _scan(tmp_path)
    hits = [h for f in res.files for h in f.hits]
    assert hits and all(h.node == "gpu-node-17" for h in hits)
    assert all(h.time is not None for h in hits if "iteration" in h.text and "/  500000" in h.text)


def test_no_hook_runs_where_its_pattern_has_no_hit(tmp_path, synthetic):
    calls = []
    synthetic(HOOKS={"synthetic.checkpoint_saved": Hook(calls.append, every=True)})
    (tmp_path / "rank_0.log").write_text("\n".join("[rank0]:" + STEP.format(m=0, s=i, it=i, cs=i * 512)
                                                   for i in range(50)) + "\n")
    res = _scan(tmp_path)
    assert res.lines == 50 and calls == []


def test_the_generic_source_declares_its_hooks():
    """The traceback's final exception and the retry escalation are the generic source's hooks, not the scanner's."""
    from trainlog_debugger.tools.scan.filepass import declared_hooks
    hooks = declared_hooks("HOOKS")
    assert [h.every for h in hooks["io.retrying"]] == [True]
    assert [h.every for h in hooks["python.traceback"]] == [False]
    assert "cloud_logging" in declared_hooks("KIND_HOOKS")
