"""One streaming pass over one AIStore daemon log file: who wrote it, when it starts, its stats lines, its errors.

File names and first lines (FORMATS.md §4.1, §4.6), as `ais log get cluster` packs them (one flat tar.gz per node):

    aistarget-KqRt8081.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171
    Started up at 2025/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64      (or `Rotated at ...`)
    Node t[KqRt8081], Version 3.27.1.6b7de24, build 2025-08-01T00:00:00+0000, CPUs(64, runtime=64)
    I 19:18:02.100016 {err.get.n:12,get.n:4811734,...}                                  periodic stats (§4.4)
    I 20:00:03.117200 common:494 21 Aug 25 20:00 UTC =============                      hourly date + zone (§4.3)
    W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical ...

Lines carry only HH:MM:SS.µs. The date comes from the first line (else the file name, whose MMDD has no year),
is re-stated by every hourly header, and otherwise advances when the time of day goes back by more than an hour
inside the file (midnight). Every reconstructed time says which of those it rests on (`date`: start | header |
rollover | filename) and where its zone came from (`zone_from`: header | file | daemon | cluster); only a date from
the first line or a header, with a zone stated in this file, is `certain`.

Speed: the file is read once in 64 MiB newline-aligned blocks. Stats lines, E/W lines and headers are found with
literal-prefixed `finditer` over the block (` {`, `\\nE `/`\\nW `, `=============`), so Python runs only on those
lines; every other line costs one C-level newline count.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainlog_debugger.tools.sources.ais.stats import parse_stats
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.chunks import CHUNK, chunks
from trainlog_debugger.tools.lines.timestamps import Stamp
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.sources.ais import format as ais_catalog
from trainlog_debugger.tools.sources.ais.format import ARCHIVE, LOG_NAME, PROXY, TITLE, log_name_stamp
from trainlog_debugger.tools.lines.timestamps import parse_stamp

TAIL = 64 << 10  # the end of the file kept to find its last timed line
KEEP = 3  # first and last KEEP lines of every signature per file are kept as evidence
MAX_TEMPLATES = 200  # distinct other E/W templates per file
ROLLOVER_S = 3600  # time of day going back by more than this inside one file = the next day
EPOCH = datetime(1970, 1, 1)

_PFX = re.compile(rb"I (\d\d):(\d\d):(\d\d)\.(\d{6})")
_STATS = re.compile(rb" \{[^\n]*")
_EW = re.compile(rb"\n([EW]) (\d\d):(\d\d):(\d\d)\.(\d{6}) ([^\n]*)")
_EW0 = re.compile(rb"([EW]) (\d\d):(\d\d):(\d\d)\.(\d{6}) ([^\n]*)")
_HDR = re.compile(rb"=============")
_ANY = re.compile(rb"[IWE] (\d\d):(\d\d):(\d\d)\.(\d{6})(?= |$)")
_LOAD = re.compile(r"load=(\w+)")
_DIM = re.compile(r"\b(mem|cpu|dsk|gor|fdt)=(critical|high)\b")
_MASK = re.compile(r"\[[^\]\s]{4,}\]|\"[^\"]*\"|0x[0-9a-f]+|\d+")

#: Failure signatures of the storage chain (FORMATS.md §4.5), in the order the chain runs.
SIGNATURES = {
    "pressure": "resource pressure (load=high/critical)",
    "memory": "memory pressure (oom / low-memory alert, forced GC)",
    "disk": "disk trouble (out of space, FSHC, mountpath disabled)",
    "cpu": "CPU extremely high",
    "stream_break": "inter-target stream (shared-dm) broken",
    "out_of_bounds": "batch GET out-of-bounds index (objects lost)",
    "xid_not_found": "received objects dropped: batch job already aborted",
}


# The catalog's AIStore patterns (tools/sources/ais/format.py) decide what a line is; this maps them onto the chain.
_CATALOG_SIG = {"ais.out_of_bounds": "out_of_bounds", "ais.xid_not_found": "xid_not_found",
                "ais.shared_dm_error": "stream_break", "ais.stream_rx_broken": "stream_break",
                "ais.resource_pressure": "pressure", "ais.memory_pressure": "memory", "ais.forced_gc": "memory",
                "ais.out_of_space": "disk", "ais.cpu_pressure": "cpu"}
_AIS_PATTERNS = [p for p in ais_catalog.PATTERNS if p.id in _CATALOG_SIG]


def signature(msg: str) -> str | None:
    """The failure signature of one E/W message, or None (an ordinary warning or error)."""
    if "terminated" in msg and ("end-of-stream" in msg or "stopped" in msg):
        return None  # transport/err.go: a normal end of a stream, not a break
    for p in _AIS_PATTERNS:
        if any(a in msg for a in p.anchors) and p.match(msg):
            return _CATALOG_SIG[p.id]
    if "shared-dm" in msg and ("with errors" in msg or "reconnect/send" in msg or "broken pipe" in msg):
        return "stream_break"  # `closing shared-dm[...] with errors ...`, send errors without "-->"
    if "FSHC" in msg or "now disabled, reason" in msg:
        return "disk"
    return None


@dataclass
class Rec:
    """A kept line; its time is resolved once the file's zone is known."""

    line: int
    offset: int
    text: str
    local: float | None  # the daemon's local clock, seconds since the epoch (read as UTC); None: no date known
    basis: str  # start | filename | header | rollover | unknown
    seg: int = -1  # the zone segment (index into AisFile.zones) in force at this line; -1: before any header


@dataclass
class SigStats:
    count: int = 0
    first: list[Rec] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=KEEP))
    times: array = field(default_factory=lambda: array("d"))  # local time of every occurrence ...
    segs: array = field(default_factory=lambda: array("i"))  # ... and the zone segment in force there
    detail: Counter = field(default_factory=Counter)  # pressure: load=critical, mem=critical, dsk=critical ...
    minutes: dict = field(default_factory=dict)  # first line of every local minute: cites "the first in a window"

    def add(self, rec: Rec, msg: str) -> None:
        self.count += 1
        (self.first if len(self.first) < KEEP else self.last).append(rec)
        if rec.local is not None:
            self.times.append(rec.local)
            self.segs.append(rec.seg)
            self.minutes.setdefault(int(rec.local // 60), rec)
        if "load=" in msg:
            m = _LOAD.search(msg)
            if m:
                self.detail[f"load={m[1]}"] += 1
            self.detail.update(f"{a}={b}" for a, b in _DIM.findall(msg))


@dataclass
class AisFile:
    rel: str
    kind: str
    size: int
    role: str = "target"  # target | proxy
    daemon: str = ""  # t[ID] / p[ID] when the ID is known (archive name or title line), else sname.host
    host: str | None = None
    pid: int | None = None
    started: str = "unknown"  # started (a process start) | rotated (same process, new file) | unknown
    start: Rec | None = None  # the first line, or a synthetic record from the file name
    last: Rec | None = None  # the last line with a time
    zones: list[tuple] = field(default_factory=list)  # (from local time, offset min, zone name, header Rec)
    stats: list[tuple[Rec, dict]] = field(default_factory=list)
    malformed: list[tuple[Rec, str | None]] = field(default_factory=list)
    malformed_count: int = 0
    sigs: dict[str, SigStats] = field(default_factory=dict)
    other: dict[tuple[str, str], list] = field(default_factory=dict)  # (sev, template) → [count, first Rec]
    other_dropped: int = 0
    lines: int = 0
    bytes_read: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    fallback_zone: tuple[int, str, str] | None = None  # (offset min, name, 'daemon'|'cluster') when no header here

    # -- time --------------------------------------------------------------------------------------------------
    def zone_of(self, seg: int = -1) -> tuple[int | None, str | None, str | None]:
        """(offset minutes, zone name, where it came from) for a line in zone segment `seg`. Segments follow the
        file's order, not its local times: when DST ends, the same local hour is read twice, in two zones."""
        if self.zones:
            if 0 <= seg < len(self.zones):
                return self.zones[seg][1], self.zones[seg][2], "header"
            return self.zones[0][1], self.zones[0][2], "file"
        if self.fallback_zone:
            return self.fallback_zone
        return None, None, None

    def ts(self, rec: Rec | None) -> float | None:
        """UTC seconds when the zone is known (else the local clock read as UTC)."""
        if rec is None or rec.local is None:
            return None
        return self.utc(rec.local, rec.seg)

    def utc(self, local: float, seg: int = -1) -> float:
        return local - (self.zone_of(seg)[0] or 0) * 60

    def time(self, rec: Rec) -> Stamp | None:
        """The line's time on its daemon's clock: the date is reconstructed (`date` says from what), so it carries
        no order_key against worker lines; tools/sources/ais/clocks.py aligns the two clocks."""
        if rec.local is None:
            return None
        off, name, src = self.zone_of(rec.seg)
        dt = EPOCH + timedelta(seconds=rec.local)
        st = Stamp(dt.isoformat(timespec="microseconds"), "ais", dt.hour, dt.minute, dt.second, dt.microsecond,
                   dt.year, dt.month, dt.day, name if off is not None else None, off, nanos=dt.microsecond * 1000)
        return st.with_meta(local=dt.strftime("%H:%M:%S.%f"), date=rec.basis, zone=name, zone_from=src,
                            certain=rec.basis in ("start", "header") and src == "header",
                            has_year=rec.basis != "filename")

    def evidence(self, rec: Rec) -> Evidence:
        return Evidence(file=self.rel, line=rec.line, text=rec.text, offset=rec.offset, time=self.time(rec),
                        node=self.daemon, kind=self.kind)


def _midnight(y: int | None, m: int | None, d: int | None) -> float | None:
    if y is None or m is None or d is None:
        return None
    try:
        return (datetime(y, m, d) - EPOCH).total_seconds()
    except ValueError:
        return None


def _tod(m: re.Match, g: int = 1) -> float:
    return int(m[g]) * 3600 + int(m[g + 1]) * 60 + int(m[g + 2]) + int(m[g + 3]) / 1e6


class _Clock:
    """The current date of a file while reading it in order."""

    def __init__(self, day: float | None, basis: str):
        self.day, self.basis = day, basis
        self.prev: float | None = None

    def at(self, tod: float) -> tuple[float | None, str]:
        if self.day is None:
            return None, "unknown"
        if self.prev is not None and tod < self.prev - ROLLOVER_S:
            self.day += 86400
            self.basis = "rollover"
        self.prev = tod
        return self.day + tod, self.basis

    def header(self, day: float, tod: float) -> None:
        self.day, self.basis, self.prev = day, "header", tod


def identify(f: AisFile, head: str) -> int | None:
    """Role, daemon id, host, pid and the year the file states; returns the stated year."""
    name = f.rel.replace("\\", "/").rsplit("!", 1)[-1].rsplit("/", 1)[-1]
    m = LOG_NAME.search(name)
    if m:
        f.host, f.pid = m["host"], int(m["pid"])
        f.role = "proxy" if m["sname"] == "aisproxy" else "target"
    elif f.kind == PROXY:
        f.role = "proxy"
    t = TITLE.search(head)
    a = ([None] + list(ARCHIVE.finditer(f.rel)))[-1]  # the innermost `aistarget-<ID>.tar.gz!` names the node
    if t:
        f.role = "proxy" if t["r"] == "p" else "target"
    if a:
        f.daemon = f"{'p' if a['role'] == 'proxy' else 't'}[{a['id']}]"
    elif t:
        f.daemon = f"{t['r']}[{t['id']}]"
    else:
        f.daemon = f"{'aisproxy' if f.role == 'proxy' else 'aistarget'}.{f.host or name}"
    first = head.split("\n", 1)[0]
    st = parse_stamp(first) if first.startswith(("Started up at", "Rotated at")) else None
    if st is not None and st.fmt == "ais_start":
        f.started = "started" if first.startswith("Started") else "rotated"
        day = _midnight(st.year, st.month, st.day)
        if day is not None:
            f.start = Rec(1, 0, first.rstrip("\r"), day + st.hour * 3600 + st.minute * 60 + st.second, "start")
        return st.year
    return None


def read_ais(rel: str, kind: str, size: int, stream, year_hint: int | None = None) -> AisFile:
    """Read one daemon log (a binary stream) in one pass. Never raises on bad input: read errors end the pass with
    a note, malformed stats lines are counted and skipped."""
    f = AisFile(rel=rel, kind=kind, size=size)
    clock: _Clock | None = None
    base_line = base_off = 0
    tail = b""
    try:
        for ch in chunks(stream, CHUNK, trim=False):  # whole lines only: buf[:end]; no slicing copies
            buf, end = ch.buf, ch.end
            if clock is None:
                clock = _start_clock(f, buf, year_hint)
            pos, line = _block(f, clock, buf, end, base_line, base_off)
            base_line = line - 1 + buf.count(b"\n", pos, end)  # each newline counted once
            base_off += end
            tail = buf[max(0, end - TAIL):end] if end >= TAIL else (tail + buf[:end])[-TAIL:]
    except READ_ERRORS as exc:
        f.error = read_error_reason(exc)
        f.notes.append(f"read stopped at byte {base_off}: {f.error}")
    f.bytes_read = base_off
    f.lines = base_line + (1 if tail and not tail.endswith(b"\n") else 0)
    if clock is not None:
        _last_line(f, clock, tail, f.lines)
    if f.malformed_count:
        f.notes.append(f"{f.malformed_count} malformed stats line(s) skipped (first: line {f.malformed[0][0].line}: "
                       f"{f.malformed[0][1]})")
    return f


def _start_clock(f: AisFile, buf: bytes, year_hint: int | None) -> _Clock:
    head = buf[:64 << 10].decode("utf-8", "replace")
    year = identify(f, head)
    if f.start is not None and f.start.local is not None:
        return _Clock(f.start.local - f.start.local % 86400, "start")
    st = log_name_stamp(f.rel.rsplit("!", 1)[-1])
    if year is None:  # no first line: the first hourly header of the block states the year
        m = _HDR.search(buf)
        if m:
            ls = buf.rfind(b"\n", 0, m.start()) + 1
            hs = parse_stamp(buf[ls:m.end()].decode("utf-8", "replace"))
            year = hs.year if hs is not None and hs.fmt == "ais_header" else None
    if st is not None:
        y = year or year_hint
        day = _midnight(y or 2000, st.month, st.day)
        if day is not None:
            f.start = Rec(1, 0, "", day + st.hour * 3600 + st.minute * 60 + st.second, "filename" if not y else "start")
            f.notes.append("no 'Started up'/'Rotated' first line: start time from the file name"
                           + ("" if y else " (year unknown)"))
            return _Clock(day, "filename" if not y else "start")
    f.notes.append("no start time (first line or file name): dates come from hourly headers only")
    return _Clock(None, "unknown")


def _block(f: AisFile, clock: _Clock, buf: bytes, end: int, base_line: int, base_off: int) -> tuple[int, int]:
    """Handle every stats, E/W and header line of one block, in order. Returns (position, line number) of the last
    one handled (0, base_line + 1 when none), so the caller counts the remaining newlines only once."""
    recs: list[tuple[int, int, re.Match | None]] = []  # (line start, kind, match): 0 header, 1 stats, 2 E/W
    for m in _STATS.finditer(buf, 0, end):
        ls = buf.rfind(b"\n", 0, m.start()) + 1
        if m.start() - ls == 17 and _PFX.fullmatch(buf, ls, m.start()):
            recs.append((ls, 1, m))
    m0 = _EW0.match(buf, 0, end)
    if m0:
        recs.append((0, 2, m0))
    recs.extend((m.start() + 1, 2, m) for m in _EW.finditer(buf, 0, end))
    for m in _HDR.finditer(buf, 0, end):
        ls = buf.rfind(b"\n", 0, m.start()) + 1
        if not recs or recs[-1][0] != ls or recs[-1][1] != 0:
            recs.append((ls, 0, None))
    if not recs:
        return 0, base_line + 1
    recs.sort(key=lambda r: (r[0], r[1]))
    prev_pos, line = 0, base_line + 1
    last_ls = -1
    for ls, kind, mt in recs:
        if ls == last_ls and kind != 1:
            continue  # a header line that is also an E/W line: handled once
        last_ls = ls
        line += buf.count(b"\n", prev_pos, ls)
        prev_pos = ls
        eol = buf.find(b"\n", ls, end)
        text = buf[ls:eol if eol >= 0 else end].decode("utf-8", "replace").rstrip("\r")
        if kind == 0:
            _header(f, clock, text, line, base_off + ls)
        elif kind == 1:
            pm = _PFX.match(buf, ls)
            assert pm is not None  # a stats line was kept only where its prefix matched
            local, basis = clock.at(_tod(pm))
            rec = Rec(line, base_off + ls, text, local, basis, len(f.zones) - 1)
            counters, why = parse_stats(text[18:])
            if counters is None:
                f.malformed_count += 1
                if len(f.malformed) < KEEP:
                    f.malformed.append((rec, why))
            else:
                f.stats.append((rec, counters))
        else:
            assert mt is not None  # E/W lines are kept with their match
            local, basis = clock.at(_tod(mt, 2))
            msg = text[18:]
            sig = signature(msg)
            rec = Rec(line, base_off + ls, text, local, basis, len(f.zones) - 1)
            if sig is not None:
                f.sigs.setdefault(sig, SigStats()).add(rec, msg)
            else:
                _other(f, text[0], msg, rec)
    return prev_pos, line


def _header(f: AisFile, clock: _Clock, text: str, line: int, off: int) -> None:
    st = parse_stamp(text)
    pm = _ANY.match(text.encode())
    if st is None or st.fmt != "ais_header" or pm is None:
        return
    day = _midnight(st.year, st.month, st.day)
    if day is None:
        return
    tod = _tod(pm)
    if clock.day is not None and clock.day != day and clock.basis == "rollover":
        f.notes.append(f"line {line}: hourly header states {st.year}-{st.month:02d}-{st.day:02d}; the date inferred "
                       f"from midnight rollover differed (gap without lines?): header wins")
    clock.header(day, tod)
    rec = Rec(line, off, text, day + tod, "header", len(f.zones) - 1)
    if not f.zones or f.zones[-1][1] != st.utc_offset_min or f.zones[-1][2] != (st.tz or ""):
        rec.seg = len(f.zones)
        f.zones.append((day + tod, st.utc_offset_min, st.tz or "", rec))


def _other(f: AisFile, sev: str, msg: str, rec: Rec) -> None:
    key = (sev, _MASK.sub("N", msg)[:120])
    slot = f.other.get(key)
    if slot is not None:
        slot[0] += 1
    elif len(f.other) < MAX_TEMPLATES:
        f.other[key] = [1, rec]
    else:
        f.other_dropped += 1


def _last_line(f: AisFile, clock: _Clock, tail: bytes, total_lines: int) -> None:
    """The last line with a time: where the file's coverage ends (daemon stopped or logs collected)."""
    end = len(tail.rstrip(b"\n"))
    line = total_lines
    while end > 0:
        start = tail.rfind(b"\n", 0, end) + 1
        m = _ANY.match(tail, start)
        if m:
            local, basis = clock.at(_tod(m))
            f.last = Rec(line, f.bytes_read - len(tail) + start,
                         tail[start:end].decode("utf-8", "replace").rstrip("\r"), local, basis, len(f.zones) - 1)
            return
        end, line = start - 1, line - 1
