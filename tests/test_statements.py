"""Every statement true to the line it cites (issue 29): the signal, retry figure and rank a sentence names are the
ones its lines hold. Unit checks of tools.statements on the real wordings, the SIGHUP incident end to end, and a
walk over every bundled case and real incident (slow: also run by CI) where no rule needed the guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.lines.signals import line_signals, signal_name
from trainlog_debugger.tools.statements import checked_statement

CASES = Path(__file__).resolve().parents[1] / "cases"
SIGHUP = CASES / "real" / "yolov8-ddp-sighup-terminal-closed-nohup"


@pytest.mark.parametrize("line, signals", [
    ("WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers", ["SIGHUP"]),
    ("W1105 12:00:00.000000 123 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, "
     "shutting down workers", ["SIGTERM"]),
    ("Sending process 4193 closing signal SIGHUP", ["SIGHUP"]),
    ("  traceback : Signal 9 (SIGKILL) received by PID 208585", ["SIGKILL"]),
    ("  exitcode  : -6 (pid: 208585)", ["SIGABRT"]),
    ("slurmstepd: error: *** STEP 12.0 ON node7 CANCELLED AT 2024-11-05T12:00:00 ***", []),
    ("[rank3]: loss 2.31 at step 15/100", []),
])
def test_the_signals_a_line_holds(line, signals):
    assert line_signals(line) == signals


def test_signal_names_from_numbers_and_enum_reprs():
    assert [signal_name(x) for x in (1, "15", "Signals.SIGTERM", "TERM", "-9", "77", "")] == \
        ["SIGHUP", "SIGTERM", "SIGTERM", "SIGTERM", "SIGKILL", None, None]


def test_a_statement_says_what_its_line_holds():
    close = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4193 closing signal SIGHUP"
    assert checked_statement("launcher sent SIGTERM to the remaining workers", [close])[0] == \
        "launcher sent SIGHUP to the remaining workers"
    death = "Received 1 death signal, shutting down workers"
    assert checked_statement("the agent got SIGTERM/SIGINT/SIGHUP from outside", [death])[0] == \
        "the agent got SIGHUP from outside"
    retry = "GET ais://train/shard-00005.tar failed, retrying 4/5: Read timed out. (read timeout=60)"
    assert checked_statement("retries ran out (5/5) on rank(s) 5", [retry])[0] == "retries ran out on rank(s) 5"
    assert checked_statement("retries ran out (5/5) on rank(s) 5", [retry.replace("4/5", "5/5")])[1] == []
    assert checked_statement("CUDA error on rank None: an illegal memory access was encountered",
                             ["RuntimeError: CUDA error: an illegal memory access was encountered"])[0] == \
        "CUDA error: an illegal memory access was encountered"
    # nothing to check against: left as it is
    assert checked_statement("SLURM cancelled the step", ["*** STEP 12.0 CANCELLED ***"]) == \
        ("SLURM cancelled the step", [])


def test_the_sighup_incident_says_sighup_and_why():
    with open_bundle(SIGHUP) as b:
        d = investigate(b)
    words = " ".join([d.headline] + [f.summary for f in d.chain] + [t.what for t in d.timeline])
    assert "SIGHUP" in words and "SIGTERM" not in words, words
    assert "terminal or SSH session closed" in words
    assert any("nohup" in r for r in d.recommendations), d.recommendations
    assert d.category == "infrastructure"


def _all_cases() -> list[Path]:
    return sorted(p.parent for p in CASES.rglob("truth.yaml"))


@pytest.mark.slow
def test_no_chain_statement_names_a_signal_rank_or_figure_its_lines_do_not_hold():
    """Every case and real incident: no step needed the guard (facts.stated_as), no `None` is printed, and each
    step's signals are ones its lines hold wherever the lines name any."""
    bad = []
    for case in _all_cases():
        try:
            with open_bundle(case) as b:
                d = investigate(b)
        except Exception as e:  # a refused bundle has no statements to check
            if type(e).__name__ == "BundleError":
                continue
            raise
        for f in d.chain:
            held = {s for e in f.evidence for s in line_signals(e.text)}
            said = set(line_signals(f.summary))
            if "stated_as" in f.facts or "None" in f.summary or (held and said - held):
                bad.append(f"{case.name}: {f.id}: {f.summary[:120]} (stated as: {f.facts.get('stated_as')})")
        bad += [f"{case.name}: timeline: {t.what[:120]}" for t in d.timeline if " None" in t.what]
    assert not bad, "\n".join(bad)
