"""tools/sources/ais/format.py: AIStore daemon error signatures (FORMATS.md §4.5).

Each row: a line in the AIStore nlog format `{I|W|E} HH:MM:SS.uuuuuu [file:line] message`, the pattern ids the
scanner records for it after the fallback rule, and the fields each id extracts (a subset; None = absent).
"""

from __future__ import annotations

import pytest
from matching import check, params

PRESSURE = "ais.resource_pressure"
DM = "ais.shared_dm_error"

SIGNATURES = [
    ("moss throttle, critical with detail",
     "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=high] throttle: 100ms",
     {PRESSURE: dict(load="critical", detail="mem=critical dsk=high")}),
    ("moss throttle, high without detail",
     "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 13 resource pressure: load=high sleep=10ms throttle: 10ms",
     {PRESSURE: dict(load="high", detail=None)}),
    ("moss 429 rejection",
     "E 19:17:52.204518 moss:412 x-get-batch[Xf3kW9p0q]: wid=\"Xf3kW9p0q\" rejected due to resource pressure (load=critical sleep=100ms [mem=critical], pending=130)",
     {PRESSURE: dict(load="critical", detail="mem=critical")}),
    ("out-of-bounds index on Rx",
     "E 19:18:03.001234 moss:712 x-get-batch[Xf3kW9p0q] t[KqRt8081] out-of-bounds index 17 (recv'd len=0, wid=\"Xf3kW9p0q\")",
     {"ais.out_of_bounds": dict(index=17, recvd=0)}),
    ("shared-dm reconnect failure (the broken pipe is also io.broken_pipe)",
     "E 19:18:01.554210 shared_dm:233 shared-dm: failed reconnecting to t[Pz7Ab910] (write: broken pipe --> dial tcp 10.1.2.3:51081: i/o timeout) - closing/aborting...",
     {DM: {}, "io.broken_pipe": {}}),
    ("shared-dm send error",
     "E 19:18:01.554210 shared_dm:240 t[KqRt8081] reconnect/send: shared-dm --> t[Pz7Ab910] write tcp 10.1.2.4:40000->10.1.2.3:51081: write: broken pipe",
     {DM: {}, "io.broken_pipe": {}}),
    ("shared-dm Rx failure",
     "E 19:18:01.554210 shared_dm:250 shared-dm Rx failure: [ xid: Xf3kW9p0q err: EOF oname: shard-17/utt-42.flac num Rx errors: 3 ]",
     {DM: {}}),
    ("stream terminated on Tx",
     "E 19:18:04.100000 transport:99 shared-dm[t[KqRt8081]=>t[Pz7Ab910]] terminated [write: broken pipe ctx: send]",
     {DM: {}, "io.broken_pipe": {}}),
    ("objects dropped after abort",
     "W 19:18:04.100000 shared_dm:301 shared-dm xid Xf3kW9p0q not found - dropping shard-17/utt-42.flac",
     {"ais.xid_not_found": {}}),
    ("low memory alert", "W 19:17:40.000001 common:811 t[KqRt8081] mmsa alert: low memory", {"ais.memory_pressure": {}}),
    ("oom alert", "E 19:17:40.000001 common:811 t[KqRt8081] mmsa alert: oom", {"ais.memory_pressure": {}}),
    ("out of space",
     "E 19:10:00.000000 space:120 out of space: used 97% of total capacity on at least one of the mountpaths (total used 9.1TiB out of 9.4TiB)",
     {"ais.out_of_space": {}}),
    ("forced GC under memory pressure (memsys/gc.go)",
     "W 00:05:00.000000 gc:45 mmsa.t[KqRt8081] free mem to OS(pressure,force,togc,load) [ 4 true 1.2GiB 37 ]",
     {"ais.forced_gc": dict(pressure=4, force="true", togc="1.2GiB", load=37)}),
    ("forced GC, older Info form",
     "I 00:05:00.000000 mmsa.t[KqRt8081]: free mem to OS: 1.2GiB, load 3.10, force true",
     {"ais.forced_gc": dict(pressure=None)}),
    ("CPU extremely high", "E 00:05:00.000000 common:790 t[KqRt8081] CPU utilization: extremely high [ 63.2 64 ]",
     {"ais.cpu_pressure": dict(load="63.2", ncpu=64)}),
    ("stream broken on receive",
     "E 00:06:10.500000 transport:201 shared-dm[t[Pz7Ab910]=>t[KqRt8081]] sbr_obj_data_eof:[ctx: recv err: unexpected EOF]",
     {"ais.stream_rx_broken": dict(code="sbr_obj_data_eof")}),
    ("low on free space",
     "W 19:10:00.000000 space:120 low on free space: used capacity 91% exceeded cleanup watermark(90%) (total used 8.5TiB out of 9.4TiB)",
     {"ais.out_of_space": {}}),
]

NEAR_MISSES = [
    ("moderate load is not pressure",
     "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 3 resource pressure: load=moderate sleep=1ms throttle: 1ms", {}),
    ("memory back to normal", "I 19:17:40.000001 common:811 t[KqRt8081] mmsa back to normal", {}),
    ("hourly date header", "I 12:00:03.117200 common:494 21 Aug 26 12:00 UTC =============", {}),
    ("periodic stats line with err.* counters",
     "I 19:18:02.100016 {err.get.n:12,err.getbatch.n:3,err.http.write.n:41,get.bps:183500800,get.n:4811734,get.ns:1843002,get.size:9123456789012,getbatch.n:90211,getbatch.obj.n:5773504,kalive.ns:712345,state.flags:8198}",
     {}),
    ("shared-dm stats", "I 19:18:04.100000 shared_dm:310 shared-dm stats: drops 4 rxerr 3 sbrs 1", {}),
    ("CPU merely high is a warning, not extreme", "W 00:05:00.000000 common:790 t[KqRt8081] CPU utilization: high [ 40.1 64 ]", {}),
    ("an sbr_ code named in prose, no ctx", "I 00:06:10.500000 transport:120 counting sbr_obj_data_eof events", {}),
    ("per-disk line", "I 19:18:02.100016 nvme0n1: 1GiB/s, 128KiB, 0B/s, 0B, 97%", {}),
]


@pytest.mark.parametrize("line, expected", params(SIGNATURES))
def test_signatures(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


# ---- the daemons' files: names, first lines and path hints, known in tools/sources/ais/format.py only ---------------

from trainlog_debugger.tools.sources.ais.format import is_daemon_log_path, log_name_stamp  # noqa: E402
from trainlog_debugger.tools.sources.detect import sniff  # noqa: E402
from trainlog_debugger.tools.sources.paths import attribute_path  # noqa: E402

N = None


@pytest.mark.parametrize("name,fmt,fields", [
    ("aistarget.ais-target-3.INFO.0821-191752.4171", "ais_filename", (N, 8, 21, 19, 17, 52)),
    ("/logs/aisproxy.ais-proxy-0.ERROR.1231-235959.17", "ais_filename", (N, 12, 31, 23, 59, 59)),
    ("train.host.user.log.INFO.20241105-123456.1234", "glog_filename", (2024, 11, 5, 12, 34, 56)),
    ("aistarget.INFO", None, None), ("aistarget.ais-target-3.INFO.1321-191752.4171", None, None),
    ("aistarget.ais-target-3.INFO.0821-191752", None, None),
])
def test_log_name_stamp(name, fmt, fields):
    s = log_name_stamp(name)
    if fmt is None:
        assert s is None
        return
    assert s.fmt == fmt and (s.year, s.month, s.day, s.hour, s.minute, s.second) == fields and not s.has_zone


@pytest.mark.parametrize("rel,head,kind", [
    # the title line wins over any name, and says target or proxy
    ("node3.txt", b"Node p[Xy12Ab34], Version 3.24.rc3.5d2b1e7a, build 2024-08-20T17:02:38+0000\n", "ais_proxy"),
    ("aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171",
     b"Started up at 2025/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64\n"
     b"I 19:17:52.204518 config:1234 log.dir: /ais/log\n", "ais_target"),
    ("aisproxy.ais-proxy-0.INFO.0821-191752.17", b"Rotated at 2025/08/21 20:00:00, host ais-proxy-0, go1.22.3\n",
     "ais_proxy"),
    # a name alone, content saying nothing
    ("logs/aisproxy-0.log", b"hello\n", "ais_proxy"),
    ("logs/aistarget.x.log", b"hello\n", "ais_target"),
    # near miss: `Started up` of some other program, without the host part
    ("svc.log", b"Started up at 2025/08/21 19:17:52\n", "generic"),
])
def test_daemon_logs_are_detected(rel, head, kind):
    assert sniff(rel, head) == kind


@pytest.mark.parametrize("rel,node", [
    ("aistarget.ais-target-3.INFO.0821-191752.4171", "ais-target-3"),
    # the archive's ID beats the host token of its member (pods may share a truncated host token, FORMATS §4.6)
    ("aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171", "KqRt8081"),
    ("train/rank_0.log", None),
])
def test_daemon_paths_name_the_node(rel, node):
    assert attribute_path(rel).node == node


def test_the_daemon_file_filter_takes_dotted_hosts_and_needs_the_stamp():
    assert is_daemon_log_path("x.tgz!aistarget.ais-t.ns.svc.INFO.0821-191752.4171")
    assert not is_daemon_log_path("aistarget.ais-target-3.INFO")
