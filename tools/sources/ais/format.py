"""AIStore daemon error signatures (FORMATS.md §4.5). The stats-line parsing and per-daemon timelines live in
tools/sources/ais/analyze.py (storage issue); these patterns let the one-pass scan count the failure signatures everywhere.

Constructed line (format from moss.go):
    W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=high] throttle: 100ms
Its file names and first lines are known here and nowhere else (detection, path hints, the daemon reader):

    aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171     (`ais log get cluster`, §4.6)
    Started up at 2025/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64       (or `Rotated at ...`, §4.1)
    Node t[KqRt8081], Version 3.24.rc3.5d2b1e7a, build 2024-08-20T17:02:38+0000          (the title line)

The storage chain runs pressure → shared-dm stream breaks → out-of-bounds index → aborted batch → client gets
fewer objects → loader error on a worker rank.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from trainlog_debugger.tools.lines.timestamps import Stamp, build_stamp
from trainlog_debugger.tools.sources.declare import Detector, Head, PathRule, Reader
from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    P("ais.resource_pressure", 3, "storage_io", "root_candidate",
      r"resource pressure(?:: | \()load=(?:high|critical)", "resource pressure",
      "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=high] throttle: 100ms",
      "AIStore target under resource pressure",
      fields=r"load=(?P<load>\w+)(?: sleep=\S+)?(?: \[(?P<detail>[^\]]*)\])?"),
    P("ais.out_of_bounds", 3, "storage_io", "root_candidate",
      r"out-of-bounds index \d", "out-of-bounds index",
      "E 19:18:03.001234 moss:712 x-get-batch[Xf3kW9p0q] t[KqRt8081] out-of-bounds index 17 (recv'd len=0, wid=\"Xf3kW9p0q\")",
      "batch GET lost objects in inter-target streaming", fields=r"out-of-bounds index (?P<index>\d+) \(recv'd len=(?P<recvd>\d+)", ints=("index", "recvd")),
    P("ais.shared_dm_error", 3, "storage_io", "root_candidate",
      r"shared-dm(?:: failed reconnecting| Rx failure|\S* terminated| --> \S+ .*broken pipe)", "shared-dm",
      "E 19:18:01.554210 shared_dm:233 shared-dm: failed reconnecting to t[Pz7Ab910] (write: broken pipe --> dial tcp 10.1.2.3:51081: i/o timeout) - closing/aborting...",
      "inter-target data mover stream broke"),
    P("ais.xid_not_found", 3, "storage_io", "cascade",
      r"shared-dm xid \S+ not found", "not found - dropping",
      "W 19:18:04.100000 shared_dm:301 shared-dm xid Xf3kW9p0q not found - dropping shard-17/utt-42.flac",
      "received objects dropped: the batch job was already aborted"),
    P("ais.memory_pressure", 3, "storage_io", "root_candidate",
      r"alert: (?:oom|low memory)", "alert: ",
      "W 19:17:40.000001 common:811 t[KqRt8081] mmsa alert: low memory",
      "AIStore node memory pressure"),
    P("ais.out_of_space", 3, "storage_io", "root_candidate",
      r"(?:out of space: used \d+%|low on free space: used capacity)", ("out of space", "low on free space"),
      "E 19:10:00.000000 space:120 out of space: used 97% of total capacity on at least one of the mountpaths (total used 9.1TiB out of 9.4TiB)",
      "AIStore mountpath out of space"),
    # memsys/gc.go freeMemToOS (Warningln): a forced GC under memory pressure; older releases log an Info line
    # `{mmsa}: free mem to OS: {size}, load {x}, force {bool}` with the same words.
    P("ais.forced_gc", 3, "storage_io", "root_candidate",
      r"free mem to OS", "free mem to OS",
      "W 00:05:00.000000 gc:45 mmsa.t[KqRt8081] free mem to OS(pressure,force,togc,load) [ 4 true 1.2GiB 37 ]",
      "AIStore forced GC: memory returned to the OS under pressure",
      fields=r"free mem to OS\(pressure,force,togc,load\) \[ (?P<pressure>\d+) (?P<force>true|false) (?P<togc>\S+) (?P<load>\d+) \]",
      ints=("pressure", "load")),
    P("ais.cpu_pressure", 3, "storage_io", "root_candidate",
      r"CPU utilization: extremely high", "CPU utilization: extremely high",
      "E 00:05:00.000000 common:790 t[KqRt8081] CPU utilization: extremely high [ 63.2 64 ]",
      "AIStore node CPU extremely high", fields=r"extremely high \[ (?P<load>[\d.]+) (?P<ncpu>\d+) \]", ints=("ncpu",)),
    P("ais.stream_rx_broken", 3, "storage_io", "root_candidate",
      r"sbr_[a-z_]+:\[ctx: ", "sbr_",
      "E 00:06:10.500000 transport:201 shared-dm[t[Pz7Ab910]=>t[KqRt8081]] sbr_obj_data_eof:[ctx: recv err: unexpected EOF]",
      "inter-target stream broken on receive (transport sbr_* code)", fields=r"(?P<code>sbr_[a-z_]+):\[ctx: "),
]


# ---- the daemons' files ------------------------------------------------------------------------------------------
TARGET, PROXY = "ais_target", "ais_proxy"
KINDS = {TARGET: "daemon", PROXY: "daemon"}

# glog's name for a daemon log, `<prog>.<host>.<severity>.<MMDD>-<HHMMSS>.<pid>` (§4.1), read three ways: the
# reader wants every field (LOG_NAME), the path hint a host from one path part with any tail (LOG_PART), and the
# `debugger ais` file filter a whole name whose host may hold dots (LOG_PATH)
LOG_NAME = re.compile(r"(?P<sname>ais(?:target|proxy|node))\.(?P<host>[^.]+)\.(?P<sev>INFO|ERROR|WARNING)\."
                      r"(?P<md>\d{4})-(?P<hms>\d{6})\.(?P<pid>\d+)$")
LOG_PART = re.compile(r"ais(?:target|proxy|node)\.(?P<h>[^.]+)\.(?:INFO|ERROR|WARNING)(?:\..*)?")
LOG_SEVERITY = re.compile(r"\.(INFO|ERROR|WARNING)\.\d{4}-\d{6}\.\d+$")  # which of a daemon's three logs
LOG_PATH = re.compile(r"(?:^|[/!])ais(?:target|proxy|node)\.[^/!]+\.(?:INFO|ERROR|WARNING)\.\d{4}-\d{6}\.\d+$")
# `ais log get cluster` packs each node's logs as `aistarget-<ID>.tar.gz`: the ID is the node (pods may share a
# truncated host token, FORMATS §4.6). ARCHIVE_PART: one path part; ARCHIVE: the members of such an archive
ARCHIVE_PART = re.compile(r"(?:ais)?(?:target|proxy)-(?P<id>[\w\-]+)\.tar\.gz")
ARCHIVE = re.compile(r"(?:^|/)(?:ais)?(?P<role>target|proxy)-(?P<id>[^/!]+?)\.(?:tar\.gz|tgz|tar)!")
TITLE = re.compile(r"^Node (?P<r>[tp])\[(?P<id>[^\]\s]+)\], Version", re.M)
_START = re.compile(r"^(?:Started up|Rotated) at \d{4}/\d\d/\d\d \d\d:\d\d:\d\d, host ", re.M)
_NAME_HINT = re.compile(r"^ais(target|proxy|node)[.-]", re.I)
# glog's file-name stamp: MMDD-HHMMSS in AIStore's names (no year), YYYYMMDD-HHMMSS in glog's own
_NAME_STAMP = re.compile(r"\.(?:INFO|WARNING|ERROR|FATAL)\.(?P<ts>(?P<Y>\d{4})?(?P<m>\d\d)(?P<d>\d\d)-"
                         r"(?P<H>\d\d)(?P<M>\d\d)(?P<S>\d\d))\.\d+$")


def is_daemon_log_path(rel: str) -> bool:
    """Is `rel` (archive members as `a.tgz!x`) named as a daemon log, whatever its content was sniffed as?"""
    return bool(LOG_PATH.search(rel))


def log_name_stamp(name: str) -> Stamp | None:
    """Creation time encoded in a log file name (local time, no zone):
    AIStore `aistarget.ais-target-3.INFO.0821-191752.4171` (MMDD-HHMMSS, no year → `ais_filename`, §4.1);
    glog `prog.host.user.log.INFO.20241105-123456.1234` (YYYYMMDD-HHMMSS → `glog_filename`)."""
    m = _NAME_STAMP.search(os.path.basename(name))
    if not m:
        return None
    st = build_stamp("ais_filename", m)
    if st is not None and st.year is not None:
        st = replace(st, fmt="glog_filename")
    return st


def _content(h: Head) -> str | None:
    """The title line or a `Started up at`/`Rotated at` first line: a daemon log, whatever its name."""
    node = TITLE.search(h.text) if "Node " in h.text else None
    if node:
        return TARGET if node.group("r") == "t" else PROXY
    if any(t in h.text for t in ("Started up at", "Rotated at")) and _START.search(h.text):
        return PROXY if h.name.lower().startswith("aisproxy") else TARGET
    return None


def _name(h: Head) -> str | None:
    m = _NAME_HINT.match(h.name)
    return (PROXY if m.group(1).lower() == "proxy" else TARGET) if m else None


def _log_part(part: str) -> tuple[str, dict[str, object]] | None:
    m = LOG_PART.fullmatch(part)
    return ("aistore", {"node": m.group("h")}) if m else None


def _archive(path: str) -> tuple[str, dict[str, object]] | None:
    """The innermost `aistarget-<ID>.tar.gz` of the path names the node, over any host its member's name states."""
    node = None
    for part in re.split(r"[/!]", path):
        if part and (m := ARCHIVE_PART.fullmatch(part)):
            node = m.group("id")
    return ("aistore", {"node": node}) if node is not None else None


DETECT = (Detector("content", 40, _content, ("node3.txt", b"Node t[KqRt8081], Version 3.24.rc3.5d2b1e7a, build 2024\n")),
          Detector("name", 20, _name, ("logs/aisproxy-0.log", b"(empty)\n")))
PATH_HINTS = (PathRule("part", 10, _log_part, "aistarget.ais-target-3.INFO.0821-191752.4171"),
              PathRule("path", 20, _archive, "aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO"))  # after torchrun (10)

READER = Reader(
    "reader.ais", "storage_io",
    "AIStore daemon logs and stats: the storage side of a failed read, joined to the worker that waited",
    ("aistarget/aisproxy logs", "stats lines (periodic counters, deltas)"),
    "Node t[abcd1234], Version 3.24", ("storage.ais", "storage.ais_chain"))
