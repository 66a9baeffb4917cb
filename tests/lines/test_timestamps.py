"""trainlog_debugger.tools.lines.timestamps: every log timestamp format, with what is unknown kept explicit (FORMATS.md §0–§8)."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainlog_debugger.tools.lines.timestamps import Stamp, order_then_place, parse_stamp, parse_stamp_bytes

N = None
# line, fmt, text, (year, month, day, hour, minute, second, micro), tz, utc_offset_min
POSITIVE = [
    # §1.1 c10 C++ header (real lines): unpadded MMDD, 9-digit fraction, no year, no zone
    ("[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000) "
     "ran for 600031 milliseconds before timing out.",
     "glog", "219 08:58:32.606233339", (N, 2, 19, 8, 58, 32, 606233), N, N),
    ("[rank5]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 5] Process group watchdog "
     "thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=67, "
     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
     "glog", "117 08:28:16.358824199", (N, 1, 17, 8, 28, 16, 358824), N, N),
    ("[rank368]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 PG GUID 0(default_pg) Rank 368] First "
     "PG on this rank to signal dumping.",
     "glog", "808 04:21:41.161045406", (N, 8, 8, 4, 21, 41, 161045), N, N),
    ("Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46][rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] ...",
     "glog", "709 17:05:38.162555850", (N, 7, 9, 17, 5, 38, 162555), N, N),
    ("[default0]:[rank0]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] x",
     "glog", "1105 12:34:56.789012345", (N, 11, 5, 12, 34, 56, 789012), N, N),
    (" 3: [rank3]:[E1218 20:27:21.484910731 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 0]  failure detected",
     "glog", "1218 20:27:21.484910731", (N, 12, 18, 20, 27, 21, 484910), N, N),
    ("[I1105 00:00:00.000000001 TCPStore.cpp:1] x", "glog", "1105 00:00:00.000000001", (N, 11, 5, 0, 0, 0, 0), N, N),
    # §2.3 torch Python logger: zero-padded MMDD, 6-digit µs
    ("W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] Sending process 2711 closing "
     "signal SIGTERM",
     "torch_py", "0813 22:08:39.776000", (N, 8, 13, 22, 8, 39, 776000), N, N),
    ("[default1]:E0102 12:16:33.285456 140215829362496 /opt/conda/lib/python3.10/site-packages/torch/distributed/"
     "elastic/agent/server/api.py:680] x",
     "torch_py", "0102 12:16:33.285456", (N, 1, 2, 12, 16, 33, 285456), N, N),
    # §2.1 ChildFailedError (real line from an incident)
    ("  time      : 2021-11-26_21:07:21", "torchelastic", "2021-11-26_21:07:21", (2021, 11, 26, 21, 7, 21, 0), N, N),
    ("  time      : 2024-04-12_14:58:30", "torchelastic", "2024-04-12_14:58:30", (2024, 4, 12, 14, 58, 30, 0), N, N),
    # §2.3 torch 2.1–2.2 stdlib header
    ("[2024-11-05 12:00:00,123] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 518 closing "
     "signal SIGTERM",
     "py_logging", "2024-11-05 12:00:00,123", (2024, 11, 5, 12, 0, 0, 123000), N, N),
    ("[rank1]:[2024-02-29 23:59:59,999] torch.distributed.elastic: [ERROR] x",
     "py_logging", "2024-02-29 23:59:59,999", (2024, 2, 29, 23, 59, 59, 999000), N, N),
    # §8 Cloud Logging, §5.1 SLURM, §7.3 Megatron, §7.2 NeMo, §3.1 NCCL ≥2.26
    ('"timestamp":"2024-11-05T12:00:01.123456789Z", "receiveTimestamp":"2024-11-05T12:00:04.5Z"',
     "iso", "2024-11-05T12:00:01.123456789Z", (2024, 11, 5, 12, 0, 1, 123456), "UTC", 0),
    ("slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***",
     "iso", "2024-11-05T12:34:56", (2024, 11, 5, 12, 34, 56, 0), N, N),
    (" [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | elapsed time per "
     "iteration (ms): 1234.5 |",
     "iso", "2024-11-05 12:00:00", (2024, 11, 5, 12, 0, 0, 0), N, N),
    (" [2024-11-05 12:00:00.123456] iteration      100/   10000 | consumed samples:        25600 |",
     "iso", "2024-11-05 12:00:00.123456", (2024, 11, 5, 12, 0, 0, 123456), N, N),
    ("[NeMo I 2025-04-11 14:46:18 nemo_logging:393] Global Checkpoint Load : Rank : 0 : Start time : ...",
     "iso", "2025-04-11 14:46:18", (2025, 4, 11, 14, 46, 18, 0), N, N),
    ("\x1b[32m[NeMo W 2025-04-11 14:46:18 nemo_logging:393]\x1b[0m x",
     "iso", "2025-04-11 14:46:18", (2025, 4, 11, 14, 46, 18, 0), N, N),
    ("[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got "
     "completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send)",
     "iso", "2026-03-03 12:11:38", (2026, 3, 3, 12, 11, 38, 0), N, N),
    ("2024-11-05T12:00:00+02:00 x", "iso", "2024-11-05T12:00:00+02:00", (2024, 11, 5, 12, 0, 0, 0), "+02:00", 120),
    ("2024-11-05T12:00:00.5-0530 x", "iso", "2024-11-05T12:00:00.5-0530", (2024, 11, 5, 12, 0, 0, 500000),
     "-05:30", -330),
    ("2024-11-05t12:00:00,25z", "iso", "2024-11-05t12:00:00,25z", (2024, 11, 5, 12, 0, 0, 250000), "UTC", 0),
    ("2024-11-05 12:00:00.123456 UTC job", "iso", "2024-11-05 12:00:00.123456 UTC",
     (2024, 11, 5, 12, 0, 0, 123456), "UTC", 0),
    # §4 AIStore
    ("I 21:30:01.123456 moss:589 x-get-batch[Xf3kW9p0q] pending: 130", "ais", "21:30:01.123456",
     (N, N, N, 21, 30, 1, 123456), N, N),
    ("E 19:17:52.204518 {err.get.n:12,err.getbatch.n:3}", "ais", "19:17:52.204518",
     (N, N, N, 19, 17, 52, 204518), N, N),
    ("W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms "
     "[mem=critical dsk=high] throttle: 100ms",
     "ais", "19:17:52.204518", (N, N, N, 19, 17, 52, 204518), N, N),
    ("I 12:00:03.117200 common:494 21 Aug 26 12:00 UTC =============", "ais_header", "21 Aug 26 12:00 UTC",
     (2026, 8, 21, 12, 0, 0, 0), "UTC", 0),
    ("I 12:00:03.117200 05 Jan 25 12:00 PST =============", "ais_header", "05 Jan 25 12:00 PST",
     (2025, 1, 5, 12, 0, 0, 0), "PST", -480),
    ("I 12:00:03.117200 common:494 21 Aug 26 12:00 IST =============", "ais_header", "21 Aug 26 12:00 IST",
     (2026, 8, 21, 12, 0, 0, 0), "IST", N),  # IST is ambiguous (India/Israel/Ireland): zone named, offset unknown
    ("Started up at 2024/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64", "ais_start",
     "2024/08/21 19:17:52", (2024, 8, 21, 19, 17, 52, 0), N, N),
    ("Rotated at 2024/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64", "ais_start",
     "2024/08/21 19:17:52", (2024, 8, 21, 19, 17, 52, 0), N, N),
    ("2024/08/21 19:17:52 nvidia-device-plugin started", "go_log", "2024/08/21 19:17:52",
     (2024, 8, 21, 19, 17, 52, 0), N, N),
    # §6 kernel log carriers
    ("Oct 22 03:18:42 host kernel: NVRM: Xid (PCI:0000:81:00): 31, pid='<unknown>', name=<unknown>, Ch 00000016",
     "syslog", "Oct 22 03:18:42", (N, 10, 22, 3, 18, 42, 0), N, N),
    ("Jan 22 18:38:35 host kernel: NVRM: Xid (PCI:0000:81:00): 31, pid='<unknown>', name=<unknown>, Ch 00000016, "
     "intr 10000000. MMU Fault: ENGINE GRAPHICS HUBCLIENT_FECS faulted @ 0x0_00000000.",
     "syslog", "Jan 22 18:38:35", (N, 1, 22, 18, 38, 35, 0), N, N),
    ("Oct  2 03:18:42.123456 host kernel: NVRM: Xid", "syslog", "Oct  2 03:18:42.123456",
     (N, 10, 2, 3, 18, 42, 123456), N, N),
    ("[Tue Oct 22 03:18:42 2024] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.", "ctime",
     "Tue Oct 22 03:18:42 2024", (2024, 10, 22, 3, 18, 42, 0), N, N),
]


@pytest.mark.parametrize("line,fmt,text,fields,tz,off", POSITIVE, ids=[f"{p[1]}-{i}" for i, p in enumerate(POSITIVE)])
def test_parse_positive(line, fmt, text, fields, tz, off):
    s = parse_stamp(line)
    assert s is not None
    assert (s.fmt, s.text) == (fmt, text)
    assert text in line
    assert (s.year, s.month, s.day, s.hour, s.minute, s.second, s.micro) == fields
    assert (s.tz, s.utc_offset_min) == (tz, off)
    assert s.has_year is (fields[0] is not None)
    assert s.has_date is (fields[1] is not None)
    assert s.has_zone is (tz is not None)
    assert s.uptime_s is None
    assert parse_stamp_bytes(line.encode()) == s


def test_nanos_kept():
    s = parse_stamp("[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] x")
    assert (s.micro, s.nanos) == (606233, 606233339)


@pytest.mark.parametrize("line,up,micro", [
    ("[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.", 5107.644336, 644336),
    ("[    0.000001] Linux version 6.5.0", 0.000001, 1),
    ("[1234567.000000] NVRM: GPU at PCI:0000:03:00: GPU-abc", 1234567.0, 0),
])
def test_dmesg_uptime(line, up, micro):
    s = parse_stamp(line)
    assert s.fmt == "dmesg" and s.uptime_s == pytest.approx(up) and s.micro == micro
    assert not (s.has_date or s.has_year or s.has_zone)
    assert s.iso() == f"uptime+{int(up)}.{micro:06d}s"
    assert s.to_datetime(year=2024, tz=timezone.utc) is None


NEGATIVE = [
    # torch ≤2.3 header carries no time at all
    "[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout",
    "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.",
    "torch 2.4.1 on 10.3.0.41 nccl 2.21.5",
    "WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)=600000)",
    "Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46]",
    "100%|██████████| 50/50 [05:55<00:10,  1.47s/it]",
    " 45%|████▌     | 450/1000 [1:02:03<1:16:40,  8.37s/it]",
    "elapsed 01:02:03 so far",
    "H100-1:9821:9920 [1] NCCL INFO proxy.cc:679 -> 6",
    "dgxa100:1050:1315 [0] NCCL INFO Channel 03/0 : 0[90000] -> 1[1000] [send] via NET/Socket/3",
    "H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)",
    "NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.",
    "2024-13-05 12:00:00 month 13", "2024-11-32 12:00:00 day 32", "2024-11-05 25:00:00 hour 25",
    "2024-11-05 12:60:00", "2023-02-29 12:00:00 not a leap year", "2024-04-31T00:00:00",
    "2024-11-05 12:00 no seconds", "2024-11-05T12:00:00+25:00",
    "[rank0]:[E1305 12:34:56.789012345 ProcessGroupNCCL.cpp:616] month 13",
    "[rank0]:[E1132 12:34:56.789012345 ProcessGroupNCCL.cpp:616] day 32",
    "[rank0]:[E005 12:34:56.789012345 ProcessGroupNCCL.cpp:616] month 0",
    "[rank0]:[E1105 24:00:00.000000000 ProcessGroupNCCL.cpp:616] hour 24",
    "W0813 22:08:39 2585 torch/api.py:898] no fraction",
    "I 21:30:01 moss:589 no micro", "I 21:30:01.1234 moss:589 short micro", "XI 21:30:01.123456 glued",
    "Oct 22 3:18:42 host", "Foo 22 03:18:42 host", "Oct 32 03:18:42 host",
    "[0.5] [ 1.23] [12.1234567]", "id 12345678901234 at 2024-11-05", "", "   ", ":::",
]


@pytest.mark.parametrize("line", NEGATIVE)
def test_parse_negative(line):
    assert parse_stamp(line) is None


@pytest.mark.parametrize("line,fmt,text,fields,tz,off", POSITIVE, ids=[f"{p[1]}-{i}" for i, p in enumerate(POSITIVE)])
def test_formats_are_searched_from_the_first_clock_time_back(line, fmt, text, fields, tz, off):
    """parse_stamp searches the formats from HMS_LEAD characters before the first HH:MM:SS: a format whose stamp
    begins further before its clock time than that (ais_start's `Started up at 2024/08/21 `) would be missed, or
    read as another format, behind a prefix. And a time-like text that is no stamp (`99:99:99`) does not hide a
    real stamp later in the line."""
    for prefix in ("x" * 100 + " ", "[rank7]: " * 12, "took 99:99:99 | " * 3):
        s = parse_stamp(prefix + line)
        assert s is not None and (s.fmt, s.text) == (fmt, text), prefix


@pytest.mark.parametrize("line,fmt", [
    ("[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.", "dmesg"),
    ("x" * 300 + "[ 5107.644336] NVRM: Xid 79 at 12:34", "dmesg"),           # a colon, no HH:MM:SS: still dmesg
    ("[ 5107.644336] then 2024-11-05 12:00:00 later", "dmesg"),                # earliest position wins
    ("[rank0]:node00:40321:40378 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", None),
    ("frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x476 (0x7f3a in libtorch_cuda.so)", None),
])
def test_lines_without_a_clock_time(line, fmt):
    s = parse_stamp(line)
    assert (s.fmt if s else None) == fmt


@pytest.mark.parametrize("line,fmt,text", [
    ("[rank0]:[E1105 03:13:52.000000000 ProcessGroupNCCL.cpp:616] x", "glog", "1105 03:13:52.000000000"),
    ("[  5.000000] [E1105 03:13:52.000000000 x", "dmesg", "5.000000"),            # an uptime before it
    ("Oct  2 03:18:42 host [E1105 03:13:52.000000000 x", "syslog", "Oct  2 03:18:42"),  # a clock time before it
    ("[rank0]:[E1105 03:13:52.000000000 x] I 12:00:03.117200 common:494 21 Aug 26 12:00 UTC =============",
     "ais_header", "21 Aug 26 12:00 UTC"),                                           # the header wins from anywhere
    ("[E1305 12:34:56.123456 x] 2024-11-05 12:00:00", "iso", "2024-11-05 12:00:00"),  # month 13: no c10 stamp
    ("[rank3]:[W1105 03:13:52.000000 ProcessGroupNCCL.cpp:1] Jan  2 03:04:05 later", "glog", "1105 03:13:52.000000"),
])
def test_c10_stamp_taken_at_once_only_when_nothing_can_precede_it(line, fmt, text):
    """parse_stamp takes c10's `[E1105 ...` stamp without trying the other formats when none of them can start
    before it: the cases where one can, or where the stamp is invalid, go through the full search."""
    s = parse_stamp(line)
    assert (s.fmt, s.text) == (fmt, text)


def test_earliest_position_wins():
    s = parse_stamp('{"timestamp":"2024-11-05T12:00:01.123456789Z","textPayload":"[rank3]:[E1105 12:00:01.123456789 '
                    'ProcessGroupNCCL.cpp:616] x"}')
    assert s.fmt == "iso" and s.has_zone
    s = parse_stamp('{"textPayload":"[rank3]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:616] x",'
                    '"timestamp":"2024-11-05T12:00:01.123456789Z"}')
    assert s.fmt == "glog" and not s.has_year


def test_invalid_first_candidate_falls_through_to_next():
    assert parse_stamp("2024-13-01 00:00:00 then 2024-12-01 00:00:00").text == "2024-12-01 00:00:00"


def test_ais_header_beats_leading_time():
    s = parse_stamp("I 12:00:03.117200 common:494 21 Aug 26 12:00 UTC =============")
    assert s.fmt == "ais_header" and s.iso() == "2026-08-21T12:00:00.000000+00:00"


@pytest.mark.parametrize("line,iso", [
    ('"timestamp":"2024-11-05T12:00:01.123456789Z"', "2024-11-05T12:00:01.123456+00:00"),  # all known
    ("2024-11-05T12:00:00-05:00", "2024-11-05T12:00:00.000000-05:00"),
    ("CANCELLED AT 2024-11-05T12:34:56 DUE", "2024-11-05T12:34:56.000000"),                # no zone
    ("[rank0]:[E1105 12:00:01.123456789 ProcessGroupNCCL.cpp:616]", "--11-05T12:00:01.123456"),  # no year
    ("Oct 22 03:18:42 host kernel:", "--10-22T03:18:42.000000"),
    ("I 21:30:01.123456 moss:589 x", "T21:30:01.123456"),                                   # no date
    ("I 1:2:3.1 21 Aug 26 12:00 CST", None),  # not an AIStore line
    ("I 12:00:03.117200 21 Aug 26 12:00 CST =============", "2026-08-21T12:00:00.000000[CST]"),  # ambiguous zone
])
def test_iso_partial_knowledge(line, iso):
    s = parse_stamp(line)
    assert (s.iso() if s else None) == iso


def test_to_datetime_completes_only_missing_parts():
    glog = parse_stamp("[rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] x")
    assert glog.to_datetime() is None  # year unknown and not supplied
    assert glog.to_datetime(year=2025) == datetime(2025, 2, 19, 8, 58, 32, 606233)  # naive: zone unknown
    assert glog.to_datetime(2025, timezone.utc).tzinfo is timezone.utc
    assert glog.to_datetime(2025, "+02:00").utcoffset() == timedelta(hours=2)
    utc = parse_stamp("2024-11-05T12:00:01Z")
    assert utc.to_datetime(year=1999, tz="+05:00") == datetime(2024, 11, 5, 12, 0, 1, tzinfo=timezone.utc)
    assert parse_stamp("I 21:30:01.123456 moss:589 x").to_datetime(2024, timezone.utc) is None  # no date
    feb29 = parse_stamp("[rank0]:[E229 00:00:00.000000000 ProcessGroupNCCL.cpp:1] x")
    assert feb29.to_datetime(2024) is not None and feb29.to_datetime(2023) is None


def test_sort_key_orders_one_source():
    lines = ["[E1105 23:59:59.999999999 P.cpp:1]", "[E219 08:58:32.606233339 P.cpp:1]",
             "[E1105 00:00:00.000000001 P.cpp:1]", "[E1105 00:00:00.000001000 P.cpp:1]"]
    order = sorted((parse_stamp(x) for x in lines), key=Stamp.sort_key)
    assert [s.text for s in order] == ["219 08:58:32.606233339", "1105 00:00:00.000000001",
                                       "1105 00:00:00.000001000", "1105 23:59:59.999999999"]
    assert parse_stamp("I 01:00:00.000000 x").sort_key() == (-1, -1, -1, 1, 0, 0, 0)
    a, b = parse_stamp("[   10.000002] x"), parse_stamp("[    9.999999] x")
    assert b.sort_key() < a.sort_key()


def test_to_json():
    d = parse_stamp("[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] x").to_json()
    assert {k: d[k] for k in ("text", "fmt", "iso", "has_date", "has_year", "has_zone")} == {
        "text": "709 17:05:38.162555850", "fmt": "glog", "iso": "--07-09T17:05:38.162555",
        "has_date": True, "has_year": False, "has_zone": False}
    assert d["month"] == 7 and d["year"] is None and d["tz"] is None


@pytest.mark.parametrize("line", ["[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] x",
                                  "2024-11-05T12:34:41.123+02:00 x", "[  123.456789] x", "Nov  5 12:34:41 host x"])
def test_to_json_is_every_field_in_order_then_the_derived_keys_then_provenance(line):
    """to_json is written out field by field (for speed): it must still give every field of _JSON_FIELDS in that
    order, then iso and the has_* flags, then the provenance, which may override a derived key."""
    from trainlog_debugger.tools.lines.timestamps import _JSON_FIELDS
    st = parse_stamp(line).with_meta(aligned=True, has_year=True)
    d = st.to_json()
    assert list(d) == [*_JSON_FIELDS, "iso", "has_date", "has_year", "has_zone", "aligned"]
    assert [d[f] for f in _JSON_FIELDS] == [getattr(st, f) for f in _JSON_FIELDS]
    assert (d["iso"], d["has_date"], d["has_zone"], d["has_year"]) == (st.iso(), st.has_date, st.has_zone, True)
    assert Stamp.from_json(d).to_json() == d


def test_bytes_with_bad_utf8():
    s = parse_stamp_bytes(b"\xff\xfe[rank1]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] \xc3")
    assert s.fmt == "glog" and s.month == 11


def test_no_catastrophic_backtracking():
    nasty = ["1" * 50_000, "[" + " " * 50_000, "2024-11-05 " * 5_000, "Oct 22 " * 5_000, "I 1" * 10_000,
             ("[E1105 12:34:56." + "1" * 20) * 1_000, ":" * 50_000]
    t0 = time.perf_counter()
    for line in nasty:
        parse_stamp(line)
    assert time.perf_counter() - t0 < 2.0


# --- property tests -------------------------------------------------------------------------------------

_TS_ALPHABET = "0123456789:-_ .,/[]TtZzEIWFVC+ADFJMNOSacegnoprtuvbly=|<>\r\t"


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=_TS_ALPHABET, max_size=80)))
def test_never_raises_on_text(line):
    s = parse_stamp(line)
    if s is not None:
        assert s.text in line and isinstance(s.iso(), str) and isinstance(s.to_json(), dict)
        s.sort_key(), s.to_datetime(2024, timezone.utc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_never_raises_on_bytes(raw):
    parse_stamp_bytes(raw)


@settings(max_examples=300, deadline=None)
@given(d=st.dates(), t=st.times(), ns=st.integers(0, 999), sev=st.sampled_from("IWEF"),
       prefix=st.sampled_from(["", "[rank3]:", " 3: [rank12]:", "[default0]:[rank0]:",
                               "Epoch 1/2: 9it [00:05,  1.47s/it, loss=5.46]"]))
def test_glog_roundtrip(d, t, ns, sev, prefix):
    frac = t.microsecond * 1000 + ns
    line = f"{prefix}[{sev}{d.month * 100 + d.day} {t:%H:%M:%S}.{frac:09d} ProcessGroupNCCL.cpp:616] msg"
    s = parse_stamp(line)
    assert s.fmt == "glog" and not s.has_year and not s.has_zone
    assert (s.month, s.day, s.hour, s.minute, s.second, s.micro, s.nanos) == (
        d.month, d.day, t.hour, t.minute, t.second, t.microsecond, frac)
    assert s.iso() == f"--{d.month:02d}-{d.day:02d}T{t:%H:%M:%S}.{t.microsecond:06d}"


@settings(max_examples=300, deadline=None)
@given(dt=st.datetimes(min_value=datetime(1000, 1, 1)), sep=st.sampled_from("T "),
       off=st.one_of(st.none(), st.integers(-14 * 60, 14 * 60)),
       prefix=st.sampled_from(["", " [", "CANCELLED AT ", "[NeMo I ", '"timestamp":"']))
def test_iso_roundtrip(dt, sep, off, prefix):
    if off is not None:
        dt = dt.replace(tzinfo=timezone(timedelta(minutes=off)))
    text = dt.isoformat(sep=sep)
    s = parse_stamp(prefix + text + " rest")
    assert (s.fmt, s.text) == ("iso", text)
    assert s.has_zone is (off is not None) and s.utc_offset_min == off
    assert s.to_datetime() == dt
    assert s.iso() == dt.isoformat(timespec="microseconds")


# -- the one ordering key ------------------------------------------------------------------------------------------
def test_year_less_and_dated_stamps_order_by_time_not_by_their_iso_strings():
    """A c10 line prints no year ('--11-05T12:00'), a NeMo line does ('2024-11-05T11:00'): as strings the year-less
    one sorts first although it is an hour later. order_key leaves the year out and orders them by time."""
    c10 = parse_stamp("[rank0]:[E1105 12:00:00.000000000 ProcessGroupNCCL.cpp:616] x")
    nemo = parse_stamp("[NeMo I 2024-11-05 11:00:00 nemo_logging:393] x")
    assert c10.iso() < nemo.iso()  # the trap the key avoids
    assert nemo.order_key() < c10.order_key()
    assert sorted([c10, nemo], key=lambda s: s.order_key()) == [nemo, c10]
    assert order_then_place(None, "a", 1) > order_then_place(c10, "z", 9)  # undated after dated


def test_stamps_without_a_comparable_date_have_no_order_key():
    assert parse_stamp("I 21:30:01.123456 moss:589 x").order_key() is None  # AIStore: time of day only
    assert parse_stamp("[ 5107.644336] NVRM: Xid 79").order_key() is None  # dmesg: uptime, not a wall clock


def test_shifted_keeps_what_is_unknown_unknown():
    st = parse_stamp("[rank0]:[E1105 00:10:00.000000000 ProcessGroupNCCL.cpp:616] x")
    back = st.shifted(-600.5)
    assert back.iso() == "--11-04T23:59:59.500000" and back.year is None


def test_evidence_time_is_typed_and_its_json_is_the_stamps():
    from trainlog_debugger.tools.model import Evidence
    st = parse_stamp("[rank3]:[E1105 12:04:45.000000000 ProcessGroupNCCL.cpp:616] x")
    ev = Evidence(file="rank_3.log", line=7, text="x", time=st)
    assert ev.time is st and ev.model_dump(mode="json")["time"] == st.to_json()
    again = Evidence.model_validate_json(ev.model_dump_json())
    assert again.time == st and again.time.order_key() == (11, 5, 12, 4, 45, 0)
    only_iso = Evidence(file="f", line=1, text="x", time={"iso": "--11-05T12:04:45.000000", "has_date": True})
    assert only_iso.time.order_key() == st.order_key()
