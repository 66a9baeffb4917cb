"""AIStore daemon error signatures (FORMATS.md §4.5). The stats-line parsing and per-daemon timelines live in
tools/sources/ais/analyze.py (storage issue); these patterns let the one-pass scan count the failure signatures everywhere.

Constructed line (format from moss.go):
    W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms [mem=critical dsk=high] throttle: 100ms
The storage chain runs pressure → shared-dm stream breaks → out-of-bounds index → aborted batch → client gets
fewer objects → loader error on a worker rank.
"""

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
