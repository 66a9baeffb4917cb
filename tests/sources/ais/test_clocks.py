"""tools/sources/ais/clocks.py: offset rounding (zone vs raw skew), anchor agreement, explicit zones, worker-node clock skew.

Anchors are built by a factory with defaults (FR's create_one_event); the worker side comes from eval/synth/ais.py's
SLURM files scanned by tools.scan.summary, so the stamps are the real c10 / NeMo / SLURM shapes of FORMATS.md.
"""

from __future__ import annotations

import pytest

from trainlog_debugger.eval.synth.ais import Scenario, generate
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.sources.ais.clocks import (
    Anchor,
    WorkerEvent,
    estimate,
    hm,
    iso,
    node_skew,
    round_offset,
    stamp_ts,
    worker_events,
    zone_name,
)
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.scan.driver import scan_bundle
from trainlog_debugger.tools.lines.timestamps import parse_stamp

H = 3600
EV = Evidence(file="w.out", line=1, text="x")
DEV = Evidence(file="d.log", line=1, text="y")


def anchor(name="job_death", offset=7 * H, unc=60.0, group="", priority=0, worker_ts=1_000_000.0) -> Anchor:
    return Anchor(name, worker_ts, worker_ts + offset, unc, [EV], [DEV], name, group, priority)


@pytest.mark.parametrize("raw, unc, want, zone", [
    (7 * H + 3, 0, 7 * H, True),             # a zone difference plus 3 s of NTP skew
    (-7 * H - 90, 0, -7 * H, True),           # within FIT_S
    (5.5 * H + 40, 0, 5.5 * H, True),         # half-hour zones exist (India)
    (7 * H + 900, 0, 7 * H + 900, False),     # 15 min off any half hour: raw skew, reported as is
    (7 * H + 200, 0, 7 * H + 200, False),     # 200 s: too far for a tight measurement ...
    (7 * H + 200, 150, 7 * H, True),          # ... but fits when the anchors are loose (±150 s)
    (7 * H + 700, 1000, 7 * H + 700, False),  # never rounded more than MAX_FIT_S
    (95, 0, 0, True),                         # same zone, 95 s residual skew
    (150, 0, 150, False),                     # 2.5 min: not a zone, raw skew
])
def test_round_offset(raw, unc, want, zone):
    off, is_zone, resid = round_offset(raw, unc)
    assert off == want and is_zone == zone
    assert resid == (raw - want if zone else 0)


def test_two_agreeing_anchors_give_a_zone_with_high_confidence():
    est = estimate([anchor(offset=7 * H + 4, unc=100), anchor("first_loader_error", offset=7 * H - 3)], daemon_zone_min=0)
    assert est.kind == "zone" and est.offset_s == 7 * H and est.confidence == "high"
    assert est.worker_zone == "UTC-07:00" and not est.rejected
    assert "UTC-07:00" in est.summary and "job_death + first_loader_error" in est.summary
    assert est.to_daemon(100.0) == 100.0 + 7 * H


def test_one_anchor_zone_is_medium_and_raw_skew_is_low():
    assert estimate([anchor(offset=-2 * H + 20)], 0).confidence == "medium"
    raw = estimate([anchor(offset=12 * 60 + 5)], 0)
    assert raw.kind == "skew" and raw.offset_s == 725 and raw.confidence == "low" and raw.worker_zone is None
    assert "raw skew" in raw.summary


def test_same_zone_is_said_so():
    est = estimate([anchor(offset=40), anchor("first_loader_error", offset=35)], 0)
    assert est.offset_s == 0 and est.kind == "zone" and "same zone" in est.summary and "residual skew" in est.summary


def test_daemon_zone_unknown_still_measures_but_names_no_zone():
    est = estimate([anchor(offset=3 * H), anchor("first_loader_error", offset=3 * H + 10)], daemon_zone_min=None)
    assert est.kind == "zone" and est.offset_s == 3 * H and est.worker_zone is None
    assert "daemon zone not stated" in est.summary


def test_alternative_pairing_agreeing_with_the_loader_anchor_wins():
    # GET traffic stopped when the ranks hung, not when the job died: the hang_start pairing is the right one
    death = anchor("job_death", offset=6 * H + 30 * 60 + 5, unc=100, group="get_stop", priority=0)
    hang = anchor("hang_start", offset=7 * H + 5, unc=100, group="get_stop", priority=1)
    loader = anchor("first_loader_error", offset=7 * H - 2, group="burst")
    est = estimate([death, hang, loader], 0)
    assert est.offset_s == 7 * H and {a.name for a in est.used} == {"hang_start", "first_loader_error"}
    assert est.confidence == "high"  # a rejected alternative of the same event is no conflict
    (rej, why), = est.rejected
    assert rej.name == "job_death" and "alternative pairing" in why


def test_conflicting_independent_anchors_lower_the_confidence():
    est = estimate([anchor("a", offset=7 * H), anchor("b", offset=7 * H + 5), anchor("c", offset=4 * H)], 0)
    assert est.offset_s == 7 * H and [a.name for a, _ in est.rejected] == ["c"] and est.confidence == "medium"


def test_explicit_zones_on_both_sides():
    est = estimate([anchor(offset=7 * H + 10)], daemon_zone_min=0, worker_zone_min=-420)
    assert est.kind == "explicit" and est.offset_s == 7 * H and est.confidence == "high" and not est.rejected
    bad = estimate([anchor(offset=2 * H)], daemon_zone_min=0, worker_zone_min=-420)
    assert bad.offset_s == 7 * H and bad.rejected and "beyond the stated zones" in bad.rejected[0][1]


def test_no_evidence_no_assumption():
    est = estimate([], daemon_zone_min=0)
    assert est.kind == "none" and est.offset_s is None and est.confidence == "none"
    assert "NOT assumed" in est.summary and est.finding() is None


def test_formatting():
    assert hm(25200) == "+7:00" and hm(-1800) == "-0:30" and hm(3725) == "+1:02:05"
    assert zone_name(-420) == "UTC-07:00" and zone_name(330) == "UTC+05:30" and zone_name(0) == "UTC"
    assert iso(0) == "1970-01-01T00:00:00" and iso(0, -420) == "1969-12-31T17:00:00-07:00"


def test_stamp_ts_takes_the_year_from_elsewhere_and_never_shifts_local_time():
    c10 = parse_stamp("[rank0]:[E821 17:06:13.000000000 ProcessGroupNCCL.cpp:616] x")  # no year, no zone
    ts, off = stamp_ts(c10, 2025)
    assert iso(ts) == "2025-08-21T17:06:13" and off is None
    assert stamp_ts(c10, None) == (None, None)
    assert stamp_ts(parse_stamp("I 01:00:00.000000 moss:589 x"), 2025) == (None, None)  # time of day only
    z = parse_stamp("2024-08-21T17:06:13+02:00 x")
    assert stamp_ts(z, 2025) == (stamp_ts(c10, 2024)[0], 120)


def _wd(node: str, start: float, seq: int = 4521, rank: int = 0) -> WorkerEvent:
    ev = Evidence(file=f"{node}.out", line=rank + 1, text=f"[rank{rank}]: Watchdog caught ... SeqNum={seq}")
    return WorkerEvent(start + 1800, ev, rank, node, None, {"seq": seq, "elapsed_ms": 1800000, "start": start})


def test_worker_nodes_whose_clocks_disagree():
    wds = [_wd("gpu-node-17", 1000 + r, rank=r) for r in range(4)] + \
          [_wd("gpu-node-18", 1240 + r, rank=4 + r) for r in range(4)] + \
          [_wd("gpu-node-19", 1002 + r, rank=8 + r) for r in range(4)]
    (f,) = node_skew(wds)
    assert f.id == "clock.worker_skew" and f.nodes == ["gpu-node-18"] and f.facts["skew_s"]["gpu-node-18"] == 238
    assert f.evidence[0].file == "gpu-node-18.out" and "+0:03:58" in f.summary
    assert node_skew([_wd("a", 1000), _wd("b", 1030), _wd("c", 1010)]) == []  # within a minute: one clock
    assert node_skew([_wd("a", 1000)]) == []


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    root = tmp_path_factory.mktemp("skew")
    truth = generate(root, Scenario(seed=5, filler=0, ranks=12, ranks_per_node=4, node_skew_s=240))
    with open_bundle(str(root / "workers")) as b:
        scan = scan_bundle(b)
    return truth, scan


def test_worker_facts_from_real_shapes(skewed):
    truth, scan = skewed
    wf = worker_events(scan)
    assert wf.year == 2025 and wf.zone_min is None
    assert [e.rank for e in wf.loader_errors] == [truth["culprit_rank"]]
    assert "Batch stream truncated" in wf.loader_errors[0].ev.text
    assert any("AISBatchLoaderError" in e.ev.text for e in wf.loader_lines)
    assert "CANCELLED AT" in wf.cancel.ev.text and wf.death.ts >= wf.cancel.ts
    assert len({e.rank for e in wf.watchdogs}) == 11 and wf.hang_start.ts < wf.death.ts - 1700


def test_generated_node_skew_is_found(skewed):
    truth, scan = skewed
    (f,) = node_skew(worker_events(scan).watchdogs)
    assert f.nodes == ["gpu-node-18"] and 230 <= f.facts["skew_s"]["gpu-node-18"] <= 250
