"""tools.sources.ais.analyze (+ ais_files, ais_stats, ais_chain, ais_report) and agent/render/ais.py.

Two kinds of input: small hand-written daemon logs in the exact formats of FORMATS.md §4 (time reconstruction,
stats parsing, deltas, restarts, malformed lines), and the seeded `ais log get cluster` bundle of eval/synth/ais.py
(several targets and proxies, a restart inside the failure window, files spanning midnight, workers in UTC−7)
for the end-to-end chain. Every Evidence the report cites is read back from the bundle: same line, same text.
"""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from trainlog_debugger.agent.render.ais import render_ais
from trainlog_debugger.eval.synth.ais import Scenario, generate
from trainlog_debugger.tools.sources.ais import files as ais_files
from trainlog_debugger.tools.sources.ais.analyze import analyze, analyze_paths, correlate, inventory
from trainlog_debugger.tools.sources.ais.files import read_ais, signature
from trainlog_debugger.tools.sources.ais.report import files_for_window, restarts
from trainlog_debugger.tools.sources.ais.stats import Sample, error_jumps, flat_in, intervals, parse_stats, traffic_stop
from trainlog_debugger.tools.bundle.open import BundleError, open_bundle
from trainlog_debugger.tools.jsonable import dumps
from trainlog_debugger.tools.model import Evidence

NAME = "aistarget.ais-target-0.INFO.0821-235800.42"


def read(lines: list[str], name: str = NAME, rel: str | None = None):
    data = ("\n".join(lines) + "\n").encode()
    return read_ais(rel or name, "ais_target", len(data), io.BytesIO(data))


def start(at: str = "2025/08/21 23:58:00", how: str = "Started up", host: str = "ais-target-0") -> list[str]:
    return [f"{how} at {at}, host {host}, go1.22.3 for linux/amd64",
            "Node t[KqRt8081], Version 3.27.1.6b7de24, build 2025-08-01T09:00:00+0000, CPUs(64, runtime=64)"]


# -- time reconstruction ---------------------------------------------------------------------------------------------
def test_midnight_rollover_without_header_is_inferred():
    f = read(start() + ["I 23:59:00.000000 {get.n:10}", "I 00:01:00.000000 {get.n:20}", "I 00:01:00.500000 {get.n:21}"])
    times = [f.time(rec).to_json() for rec, _ in f.stats]  # the public JSON of Evidence.time
    assert [t["iso"][:19] for t in times] == ["2025-08-21T23:59:00", "2025-08-22T00:01:00", "2025-08-22T00:01:00"]
    assert times[0]["date"] == "start" and times[1]["date"] == "rollover"
    assert not any(t["certain"] for t in times)  # no header: the zone is unknown
    assert times[0]["zone"] is None and not times[0]["has_zone"]


def test_hourly_header_states_date_and_zone():
    f = read(start("2025/08/21 22:58:00") + [
        "I 23:59:00.000000 {get.n:10}",
        "I 00:00:03.117200 common:494 22 Aug 25 00:00 PDT =============",
        "I 00:01:00.000000 {get.n:20}"])
    before, after = (f.time(rec).to_json() for rec, _ in f.stats)
    assert after["iso"] == "2025-08-22T00:01:00.000000-07:00" and after["certain"] and after["date"] == "header"
    assert before["zone"] == "PDT" and before["zone_from"] == "file" and not before["certain"]
    assert f.ts(f.stats[1][0]) - f.ts(f.stats[0][0]) == 120


def test_header_corrects_a_day_lost_in_a_silent_gap():
    # 23:00 → (a day without lines) → 22:00: time went back only 1 h, the rollover guess is wrong; the header fixes it
    f = read(start("2025/08/21 22:58:00") + [
        "I 23:00:00.000000 {get.n:10}", "I 23:30:00.000000 common:494 22 Aug 25 23:30 UTC =============",
        "I 23:31:00.000000 {get.n:20}"])
    assert f.time(f.stats[1][0]).iso().startswith("2025-08-22T23:31")


def test_zone_change_inside_one_file_applies_from_its_header_on():
    # DST ends: 02:59 CEST (+02:00) is followed by 02:00 CET (+01:00) one real minute later
    f = read(start("2025/10/26 01:58:00") + [
        "I 01:59:00.000000 common:494 26 Oct 25 01:59 CEST =============", "I 02:59:00.000000 {get.n:1}",
        "I 02:00:00.000000 common:494 26 Oct 25 02:00 CET =============", "I 02:00:30.000000 {get.n:2}"])
    a, b = (f.ts(rec) for rec, _ in f.stats)
    assert b - a == 90 and f.time(f.stats[1][0]).iso().endswith("+01:00")


def test_start_from_file_name_when_the_first_line_is_missing():
    f = read(["I 10:00:00.000000 {get.n:1}", "I 10:00:02.000000 common:494 21 Aug 25 10:00 UTC ============="],
             name="aistarget.ais-target-0.INFO.0821-095900.42")
    assert f.start is not None and f.started == "unknown"
    assert f.time(f.stats[0][0]).iso().startswith("2025-08-21T10:00:00")
    assert any("file name" in n for n in f.notes)


# -- stats lines -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, why", [
    ("{err.get.n:12,get.n:4811734", "no closing brace"),
    ("err.get.n:12}", "no opening brace"),
    ("{}", "no counters"),
    ("{get.n:5,get.n:6}", "twice"),
    ("{get.n:x,err.get.n:1}", "malformed pair"),
    ("{get.n:5,,err.get.n:1}", "malformed pair"),
    ("{get.n:5 err.get.n:1}", "malformed pair"),
    ("{get.n:1.5}", "malformed pair"),
])
def test_malformed_stats_lines_are_rejected_whole(body, why):
    counters, reason = parse_stats(body)
    assert counters is None and why in reason


def test_stats_line_parses_every_counter():
    line = ("{err.get.n:12,err.getbatch.n:3,err.http.write.n:41,get.bps:183500800,get.n:4811734,get.ns:1843002,"
            "get.size:9123456789012,getbatch.n:90211,getbatch.obj.n:5773504,kalive.ns:712345,state.flags:8198}")
    c, why = parse_stats(line)
    assert why is None and c["err.http.write.n"] == 41 and c["getbatch.obj.n"] == 5773504 and len(c) == 11


def test_malformed_stats_lines_are_skipped_with_a_note_and_never_raise():
    f = read(start() + ["I 23:59:00.000000 {get.n:10}", "I 23:59:30.000000 {get.n:1", "I 23:59:40.000000 {get.n:x}",
                        "I 23:59:50.000000 {\x00\xff garbage", "I 23:59:55.000000 {get.n:20}", "\x00\x01\x02 binary"])
    assert [c["get.n"] for _, c in f.stats] == [10, 20]
    assert f.malformed_count == 3 and f.malformed[0][0].line == 4
    assert any("3 malformed stats line(s)" in n for n in f.notes)


def test_deltas_across_a_counter_reset_after_restart():
    ev = Evidence(file="x", line=1, text="x")
    s = [Sample(0, {"get.n": 100, "err.get.n": 5, "get.ns": 7}, ev, 0), Sample(180, {"get.n": 160, "err.get.n": 5}, ev, 0),
         Sample(360, {"get.n": 30}, ev, 1),  # restarted: counters from zero, err.get.n omitted (= 0)
         Sample(540, {"get.n": 90, "err.get.n": 2}, ev, 1),
         Sample(720, {"get.n": 10}, ev, 1)]  # went down without a new file: also a reset
    ivs = intervals("t[A]", "target", s)
    assert [iv.deltas.get("get.n", 0) for iv in ivs] == [60, 30, 60, 10]
    assert [iv.reset for iv in ivs] == [False, True, False, True]
    assert ivs[2].deltas == {"get.n": 60, "err.get.n": 2} and "get.ns" not in ivs[0].deltas  # interval values: not deltas


def _ivs(counts: list[dict], step: float = 180.0):
    ev = Evidence(file="x", line=1, text="x")
    acc: dict = {}
    samples = [Sample(0, {}, ev)]
    for i, c in enumerate(counts):
        for k, v in c.items():
            acc[k] = acc.get(k, 0) + v
        samples.append(Sample((i + 1) * step, dict(acc), ev))
    return intervals("t[A]", "target", samples)


def test_error_jump_is_found_against_the_daemon_baseline():
    ivs = _ivs([{"err.get.n": 1, "get.n": 100}] * 6 + [{"err.get.n": 40, "err.getbatch.n": 57, "get.n": 100}]
               + [{"err.get.n": 1, "get.n": 100}] * 3)
    jumps = error_jumps(ivs)
    assert len(jumps) == 1 and jumps[0].interval is ivs[6]
    assert set(jumps[0].counters) == {"err.get.n", "err.getbatch.n"} and jumps[0].total == 97
    assert ivs[6].rate("err.get.n", "get.n") == 0.4
    assert flat_in(ivs, 0, 180)[0] and not flat_in(ivs, ivs[6].t0, ivs[6].t1)[0]


def test_small_steady_errors_are_no_jump():
    assert error_jumps(_ivs([{"err.get.n": 8, "get.n": 100}] * 6 + [{"err.get.n": 12, "get.n": 100}])) == []


def test_traffic_stop_reads_the_partial_interval_against_the_rate_before_it():
    ivs = _ivs([{"get.n": 180}] * 4 + [{"get.n": 45}] + [{}] * 2)  # 1/s, then 45 GETs: stopped 45 s in
    st = traffic_stop(ivs)
    assert st is not None and st.method == "rate" and st.ts == pytest.approx(4 * 180 + 45)
    assert traffic_stop(_ivs([{"get.n": 180}] * 4)) is None  # never seen to stop


# -- signatures ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("msg, sig", [
    ("moss:589 x-get-batch[X] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=critical] throttle: 100ms", "pressure"),
    ("moss:589 x-get-batch[X] pending: 3 resource pressure: load=moderate sleep=1ms throttle: 1ms", None),
    ("common:811 t[KqRt8081] mmsa alert: low memory", "memory"),
    ("gc:45 mmsa.t[KqRt8081] free mem to OS(pressure,force,togc,load) [ 4 true 1.2GiB 37 ]", "memory"),
    ("shared_dm:233 shared-dm: failed reconnecting to t[P] (write: broken pipe --> dial tcp 10.1.2.3:51081: i/o timeout) - closing/aborting...", "stream_break"),
    ("transport:99 shared-dm[t[A]=>t[B]] terminated [write: broken pipe ctx: send]", "stream_break"),
    ("transport:99 shared-dm[t[A]=>t[B]] terminated [end-of-stream ctx: close]", None),
    ("moss:712 x-get-batch[X] t[A] out-of-bounds index 17 (recv'd len=0, wid=\"X\")", "out_of_bounds"),
    ("shared_dm:301 shared-dm xid X not found - dropping shard-17/utt-42.flac", "xid_not_found"),
    ("space:120 out of space: used 97% of total capacity on at least one of the mountpaths", "disk"),
    ("common:790 t[A] CPU utilization: extremely high [ 63.2 64 ]", "cpu"),
    ("prxclu:120 some ordinary warning", None),
])
def test_signature(msg, sig):
    assert signature(msg) == sig


# -- files per daemon, restarts --------------------------------------------------------------------------------------
def _daemon_files():
    a = read(start("2025/08/21 20:00:00") + ["I 20:01:00.000000 common:494 21 Aug 25 20:01 UTC =============",
                                             "I 20:02:00.000000 {get.n:10}", "I 23:10:00.000000 {get.n:50}"],
             rel="aistarget-KqRt8081.tar.gz!aistarget.ais-target-0.INFO.0821-200000.42")
    b = read(start("2025/08/21 23:20:00", "Rotated") + ["I 23:21:00.000000 {get.n:60}", "I 23:40:00.000000 {get.n:70}"],
             rel="aistarget-KqRt8081.tar.gz!aistarget.ais-target-0.INFO.0821-232000.42")
    c = read(start("2025/08/21 23:50:00") + ["I 23:51:00.000000 {get.n:5}", "I 23:54:00.000000 {get.n:9}"],
             rel="aistarget-KqRt8081.tar.gz!aistarget.ais-target-0.INFO.0821-235000.77")
    return [c, a, b]  # out of order on purpose


def test_files_are_ordered_per_daemon_and_cover_until_the_next_start():
    (d,), notes = inventory(_daemon_files())
    assert d.name == "t[KqRt8081]" and [sp.started for sp in d.spans] == ["started", "rotated", "started"]
    assert [sp.restart for sp in d.spans] == [False, False, True]  # a rotation is not a restart
    assert d.spans[0].end == d.spans[1].start and d.spans[0].end_basis == "next file"
    assert d.spans[-1].end_basis == "last line"
    assert all(sp.zone == "UTC" for sp in d.spans)  # borrowed from the daemon's one header
    assert [iv.deltas.get("get.n") for iv in d.ivs] == [40, 10, 10, 5, 4]  # restart: from zero


def test_restart_and_rotation_inside_the_window():
    (d,), _ = inventory(_daemon_files())
    t0, t1 = d.spans[1].start_ts - 60, d.spans[2].start_ts + 60
    found = restarts([d], t0, t1, 0, t_fail=t0 + 30)
    assert [f.id for f in found] == ["ais.rotation", "ais.restart"]
    r = found[1]
    assert r.evidence[0].line == 1 and r.evidence[0].text.startswith("Started up at 2025/08/21 23:50:00")
    assert "pid 42 → 77" in r.summary and r.role.value == "context"  # after the first failure
    assert [sp.covers_window for sp in d.spans] == [True, True, True]
    assert restarts([d], t0, t1, 0, t_fail=t1)[1].role.value == "root_candidate"  # before the failure: a candidate


def test_files_for_a_given_window():
    (d,), _ = inventory(_daemon_files())
    a, b, c = d.spans
    assert files_for_window(d.spans, a.start_ts + 10, a.start_ts + 20) == ([a], [])
    assert files_for_window(d.spans, b.start_ts - 60, b.start_ts + 60) == ([a, b], [b])  # a rotation splits the window
    cover, inside = files_for_window(d.spans, c.start_ts - 5, c.start_ts + 5)
    assert cover == [b, c] and inside == [c] and c.restart


def test_error_files_are_dropped_when_info_files_exist_and_a_cut_head_keeps_its_daemon():
    info = read(start() + ["I 23:59:00.000000 {get.n:10}", "W 23:59:01.000000 some warning"],
                rel="aistarget.ais-target-0.INFO.0821-235800.42")
    err = read(start() + ["W 23:59:01.000000 some warning"], rel="aistarget.ais-target-0.ERROR.0821-235800.42")
    cut = read(["I 00:10:00.000000 {get.n:30}", "I 00:10:02.000000 common:494 22 Aug 25 00:10 UTC ============="],
               rel="aistarget.ais-target-0.INFO.0822-000500.42")
    (d,), notes = inventory([info, err, cut])
    assert d.name == "t[KqRt8081]" and [sp.file for sp in d.spans] == [info.rel, cut.rel]
    assert any("ERROR/WARNING file(s) ignored" in n for n in notes)


def test_results_do_not_depend_on_the_read_chunk(monkeypatch):
    lines = start() + [f"I 23:{58 + i // 60:02d}:{i % 60:02d}.000000 {{get.n:{i}}}" if i % 7 else
                       f"W 23:{58 + i // 60:02d}:{i % 60:02d}.000000 moss:589 x-get-batch[X] pending: 1 resource "
                       f"pressure: load=high sleep=1ms throttle: 1ms" for i in range(110)]
    ref = read(lines)
    monkeypatch.setattr(ais_files, "CHUNK", 97)
    small = read(lines)
    assert [(r.line, r.text, c) for r, c in small.stats] == [(r.line, r.text, c) for r, c in ref.stats]
    assert small.sigs["pressure"].count == ref.sigs["pressure"].count == 16
    assert small.lines == ref.lines == len(lines) and small.last.line == len(lines)


# -- the generated `ais log get cluster` bundle ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def case(tmp_path_factory):
    root = tmp_path_factory.mktemp("aiscase")
    truth = generate(root, Scenario(seed=3, filler=1))
    return root, truth, analyze_paths([str(root / "ais_logs")], [str(root / "workers")])


def _lines_of(paths) -> dict[str, list[str]]:
    out = {}
    with open_bundle([str(p) for p in paths]) as b:
        for s in b.sources:
            with s.open() as fh:
                out[s.rel] = fh.read().decode("utf-8", "replace").split("\n")
    return out


def test_every_cited_line_is_verbatim(case):
    root, truth, rep = case
    lines = _lines_of([root / "ais_logs"]) | _lines_of([root / "workers"])
    evs = [e for f in rep.findings() for e in f.evidence]
    evs += [e for a in rep.clock.used for e in a.worker_ev + a.daemon_ev]
    assert len(evs) > 30
    for e in evs:
        assert lines[e.file][e.line - 1].rstrip("\r") == e.text, e.cite()


def test_names_the_target_under_pressure_and_the_interval_where_errors_jump(case):
    _, truth, rep = case
    assert rep.pressured == truth["pressured"]
    j = rep.main_jump
    assert j["daemon"] == truth["jump"]["daemon"] and j["start"] < truth["jump"]["contains"] < j["end"]
    assert j["counters"]["err.getbatch.n"]["delta"] == 57 and j["counters"]["err.http.write.n"]["delta"] == 41
    assert rep.comparison["verdict"] == "target-side"
    assert {r["daemon"] for r in rep.comparison["rows"] if r["jumped"]} == set(truth["pressured"])


def test_restart_inside_the_window_and_midnight_files(case):
    _, truth, rep = case
    (r,) = [f for f in rep.observations if f.id == "ais.restart"]
    assert r.nodes == [truth["restart"]["daemon"]] and r.facts["at"] == truth["restart"]["at"]
    spans = {sp.file.rsplit("!", 1)[-1]: sp for d in rep.daemons for sp in d.files}
    sp = spans[truth["restart"]["file"]]
    assert sp.restart and sp.starts_in_window and sp.covers_window
    assert {n for n, s in spans.items() if s.spans_midnight} == set(truth["midnight_files"])
    assert sum(d.restarts for d in rep.daemons) == 1


def test_zone_offset_with_its_anchors(case):
    _, truth, rep = case
    c = rep.clock
    assert c.kind == "zone" and c.offset_s == truth["offset_s"] and c.worker_zone == "UTC-07:00"
    assert {a.name for a in c.used} == {"job_death", "first_loader_error"} and c.confidence == "high"
    assert [a.name for a, _ in c.rejected] == ["hang_start"]  # the other pairing of the GET stop is 30 min off
    assert rep.observations[0].id == "clock.zone"


def test_the_chain_end_to_end(case):
    _, truth, rep = case
    assert [f.facts["name"] for f in rep.chain] == ["pressure", "stream_break", "out_of_bounds", "job_aborted",
                                                   "client_short", "loader_error", "nccl_cascade"]
    assert rep.gaps == [] and not [n for n in rep.notes if n.startswith("chain order")]
    assert rep.chain[0].role.value == "root_candidate" and rep.chain[0].nodes == truth["pressured"]
    assert {"load=critical", "mem=critical", "dsk=critical"} <= set(rep.chain[0].facts["detail"])
    loader = rep.chain[5]
    assert loader.ranks == [truth["culprit_rank"]] and "AISBatchLoaderError" in loader.evidence[0].text
    assert loader.evidence[0].time.meta("aligned").startswith("2025-08-22T00:06:4") and not loader.evidence[0].time.meta("certain")
    assert rep.chain[6].facts["straggler_ranks"] == [truth["culprit_rank"]]
    ats = [f.facts["at"] for f in rep.chain]
    assert ats == sorted(ats)
    for f in rep.chain:  # AIS lines: reconstructed time stored, marked certain (date and zone from headers)
        for e in f.evidence:
            if e.kind == "ais_target":
                assert e.time.meta("certain") and e.time.meta("zone") == "UTC"


def test_retry_noise_is_noise_not_cause(case):
    _, truth, rep = case
    (n,) = [f for f in rep.observations if f.id == "ais.noise.retry"]
    assert n.role.value == "noise" and n.ranks == truth["noise_ranks"]
    assert all("retrying 1/5: Connection reset by peer" in e.text for e in n.evidence)
    assert not any(set(f.ranks) & set(truth["noise_ranks"]) for f in rep.chain[:6])


def test_per_interval_counts_of_signatures_and_errors(case):
    _, truth, rep = case
    (d,) = [d for d in rep.daemons if d.daemon == truth["jump"]["daemon"]]
    (iv,) = [iv for iv in d.window_intervals if iv["start"] < truth["jump"]["contains"] < iv["end"]]
    assert iv["errors"]["err.getbatch.n"] == 57 and iv["signatures"]["out_of_bounds"] == 1
    assert iv["signatures"]["stream_break"] == 2 and iv["signatures"]["xid_not_found"] == 6
    assert any(x["reset"] for x in d.window_intervals)  # the restart inside the window
    others = [x for x in rep.daemons if x.daemon != d.daemon and x.role == "target"]
    assert all(not x.window_intervals or not any(i["signatures"] for i in x.window_intervals) for x in others)
    s = d.signatures["out_of_bounds"]
    assert s["count"] == 4 and s["first"].line < s["last"].line


def test_malformed_stats_line_is_a_finding(case):
    _, _, rep = case
    (m,) = [f for f in rep.observations if f.id == "ais.stats_malformed"]
    assert m.evidence[0].text.endswith("{err.get.n:1,get.n:12")


def test_render_and_json(case):
    _, truth, rep = case
    con = Console(record=True, width=220)
    render_ais(rep, con)
    out = con.export_text()
    for s in ("storage chain", truth["pressured"][0], "RESTART", "spans midnight", "daemon clock = worker clock +7:00",
              "anchor job_death", "anchor first_loader_error", "target-side", "error jump:", "ais.noise.retry [noise]",
              "merged timeline", "AISBatchLoaderError"):
        assert s in out, s
    d = json.loads(dumps(rep))
    assert d["clock"]["offset_s"] == truth["offset_s"] and len(d["chain"]) == 7


def test_extracted_folders_and_one_mixed_bundle_give_the_same_answer(tmp_path, case):
    _, truth, rep = case
    generate(tmp_path, Scenario(seed=3, filler=1), archives=False)
    rep2 = analyze_paths([str(tmp_path)])  # daemons and workers in one folder, no --workers
    assert rep2.pressured == rep.pressured and rep2.clock.offset_s == truth["offset_s"]
    assert [f.facts["name"] for f in rep2.chain] == [f.facts["name"] for f in rep.chain]
    assert any(f.id == "ais.restart" for f in rep2.observations)


def test_without_workers_the_daemon_side_stands_alone(case):
    root, truth, _ = case
    rep = analyze_paths([str(root / "ais_logs")])
    assert rep.clock is None and rep.workers_root is None
    assert [f.facts["name"] for f in rep.chain] == ["pressure", "stream_break", "out_of_bounds", "job_aborted",
                                                   "client_short"]
    assert rep.pressured == truth["pressured"]


def test_truncated_archive_is_skipped_not_raised(tmp_path, case):
    root, truth, _ = case
    arch = sorted((root / "ais_logs").glob("aistarget-*.tar.gz"))
    (tmp_path / "logs").mkdir()
    for p in arch[1:]:
        (tmp_path / "logs" / p.name).write_bytes(p.read_bytes())
    data = arch[0].read_bytes()
    (tmp_path / "logs" / arch[0].name).write_bytes(data[: len(data) // 2])
    with open_bundle(str(tmp_path / "logs")) as b:
        rep = analyze(b)
    assert rep.skipped and len(rep.daemons) >= 1


def test_no_ais_logs_is_one_clear_error(tmp_path):
    (tmp_path / "rank_0.log").write_text("[rank0]: hello\n")
    with open_bundle(str(tmp_path)) as b, pytest.raises(BundleError, match="no AIStore daemon logs"):
        analyze(b)


def test_correlate_is_pure_over_parsed_files():
    rep = correlate(_daemon_files())
    assert rep.chain == [] and rep.clock is None and len(rep.daemons) == 1 and rep.main_jump is None
