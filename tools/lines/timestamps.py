"""Timestamps of every format that distributed-training logs carry (FORMATS.md §0–§8).

Why a module of its own: the stack mixes clocks and formats, and most of them say *less* than a
datetime needs. The c10 C++ header has no year and no zone, AIStore lines have no date, dmesg has no
wall clock at all. A Stamp therefore keeps what the text states and marks the rest unknown
(year/month/day/tz = None); a later stage anchors them (AIStore hourly header, file name, Cloud
Logging entry). Nothing here ever assumes UTC or the current year.

    glog          [rank3]:[E219 08:58:32.606233339 ProcessGroupNCCL.cpp:616] ...   (§1.1)
    torch_py      W0813 22:08:39.776000 2585 torch/distributed/elastic/.../api.py:898] ...   (§2.3)
    torchelastic    time      : 2024-04-12_14:58:30                                (§2.1)
    py_logging    [2024-11-05 12:00:00,123] torch.distributed.elastic...: [WARNING] (§2.3, torch 2.1–2.2)
    iso           2024-11-05T12:00:01.123456789Z, [NeMo I 2025-04-11 14:46:18 nemo_logging:393],
                  [2026-03-03 12:11:38] host:pid:tid (NCCL ≥2.26 WARN), CANCELLED AT 2024-11-05T12:34:56
    ais           I 21:30:01.123456 moss:589 ...                                   (§4.2)
    ais_header    I 12:00:03.117200 common:494 21 Aug 26 12:00 UTC =============  (§4.3)
    ais_start     Started up at 2024/08/21 19:17:52, host ...                      (§4.1)
    go_log        2024/08/21 19:17:52 msg   (Go `log` default; same shape without the AIStore words)
    ctime         [Tue Oct 22 03:18:42 2024] NVRM: Xid ...   (dmesg -T; has a year)
    syslog        Oct 22 03:18:42 host kernel: NVRM: Xid ...   (journald may add .123456)  (§6)
    dmesg         [ 5107.644336] NVRM: Xid ...   → uptime_s only                   (§6)
    ais_filename / glog_filename: a daemon log's file name (tools/sources/ais/format.py, log_name_stamp).

Stamps with and without a zone mix in one bundle (a Cloud Logging export: `timestamp` ends in `Z`, the text of
the line carries the c10 header without one). The rule, in one place: stamps are compared through order_key (the
wall clock as printed, zone left out) and job_seconds (minus the stated offset; a stamp without one counts as UTC),
never as Python datetimes, so no naive/aware comparison can arise; to_datetime(..., assume_utc=True) gives an aware
datetime for a naive stamp by the same rule. mixed_zone_note() says it where a bundle mixes the two.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, cast

__all__ = ["Stamp", "parse_stamp", "parse_stamp_bytes", "order_key", "order_then_place",
           "mixed_zone_note"]

_MONTHS = {m: i for i, m in enumerate(
    "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_MON = "(?P<mon>" + "|".join(_MONTHS) + ")"
_DAYS_IN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29 allowed while the year is unknown
# Zone abbreviations whose offset is unambiguous. CST, IST, BST ... mean several zones → offset stays None.
_ABBR_MIN = {"UTC": 0, "GMT": 0, "UT": 0, "Z": 0, "EST": -300, "EDT": -240, "PST": -480, "PDT": -420,
             "MST": -420, "MDT": -360, "CET": 60, "CEST": 120, "EET": 120, "EEST": 180, "JST": 540,
             "KST": 540, "HKT": 480, "AEST": 600, "AEDT": 660}


@dataclass(frozen=True, slots=True)
class Stamp:
    """One parsed timestamp; unknown parts are None, never guessed.

    For `dmesg` stamps hour/minute/second are 0 and meaningless: only `uptime_s` (and `micro`,
    its fraction) is known. `nanos` is the full sub-second part in ns (c10 and Cloud Logging print 9
    digits; `micro` truncates them). `text` is the stamp proper, without the severity letter that c10,
    torch and AIStore glue to it (`[E219 08:58:32.606233339` → '219 08:58:32.606233339').
    """
    text: str
    fmt: str
    hour: int
    minute: int
    second: int
    micro: int = 0
    year: int | None = None
    month: int | None = None
    day: int | None = None
    tz: str | None = None
    utc_offset_min: int | None = None
    uptime_s: float | None = None
    nanos: int = 0
    # Provenance that travels in the JSON beside the parsed parts, as (key, value) pairs: how a date the line does
    # not print was reconstructed (AIStore: `date` basis, `zone_from`, `certain`, a `has_year` that says the year
    # came from a file name), or a worker line moved onto a daemon clock (`aligned`, `offset_s`, `aligned_by`).
    extra: tuple[tuple[str, Any], ...] = ()

    def __reduce__(self):
        """Pickled as the constructor's arguments. Why: a scan's workers send every kept hit's Stamp to the parent,
        and the default for a frozen, slotted dataclass (__getstate__, then object.__setattr__ per field in Python)
        cost ~9 µs each way, 0.6 s of a 4,096-rank scan; this is ~1.5 µs to write and ~3 µs to read."""
        return type(self), (self.text, self.fmt, self.hour, self.minute, self.second, self.micro, self.year,
                            self.month, self.day, self.tz, self.utc_offset_min, self.uptime_s, self.nanos, self.extra)

    @property
    def has_date(self) -> bool:
        return self.month is not None and self.day is not None

    @property
    def has_year(self) -> bool:
        return self.year is not None

    @property
    def has_zone(self) -> bool:
        return self.tz is not None

    def iso(self) -> str:
        """ISO-8601 with the unknown parts left out: '--MM-DD' (no year, ISO 8601:2000 truncated form),
        'T..' (no date), no suffix (zone unknown), '[CST]' (zone named but its offset ambiguous).
        The fraction is always 6 digits so one source's strings compare consistently."""
        if self.uptime_s is not None:
            return f"uptime+{int(self.uptime_s)}.{self.micro:06d}s"
        t = f"T{self.hour:02d}:{self.minute:02d}:{self.second:02d}.{self.micro:06d}"
        if self.has_date:
            y = f"{self.year:04d}" if self.year is not None else "-"
            t = f"{y}-{self.month:02d}-{self.day:02d}{t}"
        if self.utc_offset_min is not None:
            sign, off = ("-" if self.utc_offset_min < 0 else "+"), abs(self.utc_offset_min)
            t += f"{sign}{off // 60:02d}:{off % 60:02d}"
        elif self.tz is not None:
            t += f"[{self.tz}]"
        return t

    def to_json(self) -> dict:
        """The public JSON of `Evidence.time`: the parsed parts, `iso`, the has_* flags, then any provenance."""
        # not dataclasses.asdict (it deep-copies: ~200 µs a call), nor a loop over _JSON_FIELDS: one dict display,
        # in _JSON_FIELDS' order, at a third of the cost (`scan --json` of 4,096 ranks writes ~20,000 of these)
        d = {"text": self.text, "fmt": self.fmt, "hour": self.hour, "minute": self.minute, "second": self.second,
             "micro": self.micro, "year": self.year, "month": self.month, "day": self.day, "tz": self.tz,
             "utc_offset_min": self.utc_offset_min, "uptime_s": self.uptime_s, "nanos": self.nanos,
             "iso": self.iso(), "has_date": self.month is not None and self.day is not None,
             "has_year": self.year is not None, "has_zone": self.tz is not None}
        if self.extra:
            d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Stamp:
        """The inverse of to_json (a report read back, a baseline): keys that are not parts become `extra`,
        derived keys are kept only where they differ from what the parts imply."""
        parts = {f: d[f] for f in _JSON_FIELDS if f in d}
        if "hour" not in parts and isinstance(d.get("iso"), str):  # only the ISO form was given: read the parts from it
            parts = {**_iso_parts(d["iso"]), **parts}
        parts.setdefault("text", d.get("iso", ""))
        parts.setdefault("fmt", "")
        for f in ("hour", "minute", "second"):
            parts.setdefault(f, 0)
        st = cls(**parts)
        derived = {"iso": st.iso(), "has_date": st.has_date, "has_year": st.has_year, "has_zone": st.has_zone}
        extra = tuple((k, v) for k, v in d.items() if k not in parts and derived.get(k, _MISSING) != v)
        return replace(st, extra=extra) if extra else st

    def meta(self, key: str, default: Any = None) -> Any:
        """A provenance value (see `extra`)."""
        for k, v in self.extra:
            if k == key:
                return v
        return default

    def with_meta(self, **kw: Any) -> Stamp:
        kept = tuple((k, v) for k, v in self.extra if k not in kw)
        # the constructor, not dataclasses.replace (which reads the fields each call): ~3x cheaper, and a scan marks
        # the inferred time of every untimed fatal line this way (a few per rank file)
        return type(self)(self.text, self.fmt, self.hour, self.minute, self.second, self.micro, self.year, self.month,
                          self.day, self.tz, self.utc_offset_min, self.uptime_s, self.nanos, kept + tuple(kw.items()))

    def order_key(self) -> tuple | None:
        """THE ordering key of times within one job, used everywhere times are compared.

        (month, day, hour, minute, second, microsecond): the year is left out because most formats do not print
        it (a c10 line says `1105 12:04:45`, a NeMo line `2024-11-05 12:04:45`) and a job spans days, not years,
        so a year-less and a dated stamp of the same job still order correctly. None when the stamp has no date
        (time-only AIStore lines before their header, dmesg uptime): such times are not comparable with the
        others, and callers put them after the dated ones instead of guessing."""
        if self.uptime_s is not None or self.month is None or self.day is None or self.meta("date") is not None:
            return None  # `date` in extra: reconstructed on another clock (an AIStore daemon's); tools/sources/ais/clocks.py aligns
        return (self.month, self.day, self.hour, self.minute, self.second, self.micro)

    def job_seconds(self) -> float | None:
        """Seconds on one job's scale, for gaps and medians: the order_key's parts (year left out, as there) read
        as a date in a fixed leap year, minus the stated UTC offset when there is one. None without an order_key."""
        k = self.order_key()
        if k is None:
            return None
        month, day, h, mi, s, us = k
        try:
            secs = (datetime(2000, month, day, h, mi, s, us) - datetime(2000, 1, 1)).total_seconds()
        except ValueError:
            return None
        return secs - (self.utc_offset_min or 0) * 60

    def shifted(self, seconds: float) -> Stamp | None:
        """The same clock `seconds` later (earlier when negative), keeping what is unknown unknown: a year-less
        stamp stays year-less (the arithmetic runs in a fixed leap year). None without a date."""
        if self.uptime_s is not None or self.month is None or self.day is None:
            return None
        try:
            dt = datetime(self.year or 2000, self.month, self.day, self.hour, self.minute, self.second,
                          self.micro) + timedelta(seconds=seconds)
        except (ValueError, OverflowError):
            return None
        st = replace(self, year=dt.year if self.year is not None else None, month=dt.month, day=dt.day,
                     hour=dt.hour, minute=dt.minute, second=dt.second, micro=dt.microsecond,
                     nanos=dt.microsecond * 1000, extra=())
        return replace(st, text=st.iso())

    def sort_key(self) -> tuple:
        """Orders stamps of ONE source (same clock, same known parts); unknown parts → -1."""
        if self.uptime_s is not None:
            return (-1, -1, -1, -1, -1, int(self.uptime_s), self.micro)
        n = lambda v: -1 if v is None else v  # noqa: E731
        return (n(self.year), n(self.month), n(self.day), self.hour, self.minute, self.second, self.micro)

    def to_datetime(self, year: int | None = None, tz: tzinfo | str | None = None,
                    assume_utc: bool = False) -> datetime | None:
        """A datetime when the date is known. The caller's `year`/`tz` only fill what the text lacks;
        without a year (and none supplied) → None; zone unknown and none supplied → naive, or UTC with
        `assume_utc` (the module's rule for comparing stamps of mixed zones)."""
        if assume_utc and tz is None and self.utc_offset_min is None:
            tz = timezone.utc
        if self.uptime_s is not None or not self.has_date:
            return None
        y = self.year if self.year is not None else year
        if y is None or self.month is None or self.day is None:
            return None
        zone: tzinfo | None = None
        if self.utc_offset_min is not None:
            zone = timezone(timedelta(minutes=self.utc_offset_min))
        elif isinstance(tz, str):
            off = _zone_offset(tz)
            zone = None if off is None else timezone(timedelta(minutes=off))
        else:
            zone = tz
        try:
            return datetime(y, self.month, self.day, self.hour, self.minute, self.second, self.micro, zone)
        except ValueError:  # Feb 29 anchored to a non-leap year
            return None


_JSON_FIELDS = ("text", "fmt", "hour", "minute", "second", "micro", "year", "month", "day", "tz", "utc_offset_min",
                "uptime_s", "nanos")
_MISSING = object()


_ISO_OUT = re.compile(r"(?:(?P<y>\d{4}|-)-(?P<mo>\d\d)-(?P<d>\d\d))?T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
                      r"(?:\.(?P<f>\d{1,9}))?(?P<off>[+-]\d\d:\d\d)?")


def _iso_parts(iso: str) -> dict:
    """The parts of a string Stamp.iso() wrote ('--11-05T12:04:45.000000', '2024-11-05T12:00:01.000000+00:00')."""
    m = _ISO_OUT.search(iso)
    if not m:
        return {}
    frac = (m["f"] or "0").ljust(9, "0")
    out: dict[str, int | None] = {"hour": int(m["h"]), "minute": int(m["mi"]), "second": int(m["s"]), "micro": int(frac[:6]),
           "nanos": int(frac)}
    if m["mo"]:
        out.update(month=int(m["mo"]), day=int(m["d"]), year=None if m["y"] == "-" else int(m["y"]))
    if m["off"]:
        out["utc_offset_min"] = _zone_offset(m["off"])
    return out


def mixed_zone_note(stamps) -> str | None:
    """The note for a bundle whose times are partly with a UTC offset and partly without one: which rule reads them."""
    aware = naive = 0
    for st in stamps:
        if st is None or st.uptime_s is not None:
            continue
        if st.utc_offset_min is None:
            naive += 1
        else:
            aware += 1
    if aware and naive:
        return (f"times with a zone offset ({aware} file(s)) and without one ({naive}) are mixed: times without a "
                "zone are read as UTC when durations are computed, and ordered on the clock as printed")
    return None


def order_key(t: Stamp | None) -> tuple | None:
    """Stamp.order_key() of an optional stamp."""
    return t.order_key() if t is not None else None


def order_then_place(t: Stamp | None, *place) -> tuple:
    """A total sort key: dated stamps first in time order, then undated ones; ties broken by `place` (file, line)."""
    k = order_key(t)
    return (k is None, k or (), *place)


def _zone_offset(z: str) -> int | None:
    """'UTC'/'Z' → 0, '+02:00' / '+0200' → 120, unambiguous abbreviations via _ABBR_MIN; else None."""
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", z)
    if m:
        h, mi = int(m[2]), int(m[3])
        return None if h > 23 or mi > 59 else (-1 if m[1] == "-" else 1) * (h * 60 + mi)
    return _ABBR_MIN.get(z.upper())


def _norm_zone(z: str | None) -> tuple[str | None, int | None]:
    if not z:
        return None, None
    z = z.strip()
    off = _zone_offset(z)
    if z[0] in "+-":
        return (f"{z[0]}{abs(off) // 60:02d}:{abs(off) % 60:02d}", off) if off is not None else (None, None)
    return ("UTC" if z.upper() in ("Z", "UTC", "UT") else z), off


# Building blocks. Every time is HH:MM:SS with two-digit fields, so tqdm's `[05:55<00:10` or a
# duration `05:55` never qualifies; digit guards stop `2.4.1`, `10.3.0.41`, `SeqNum=31` matching.
_HMS = r"(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
_YMD = r"(?<!\d)(?P<Y>\d{4})-(?P<m>\d\d)-(?P<d>\d\d)"
_ZONE = r"(?P<z>[Zz]|[+-]\d\d:?\d\d(?!\d)| ?(?:UTC|GMT)\b)?"

# Cheap dispatch: a regex that starts with a lookbehind or \d scans slowly (so lookbehinds sit after the
# first char where possible), and each format is tried only when a fast gate finds its skeleton somewhere
# in the line: a c10 line then costs ~15 µs instead of ~100.
_GATES = {"date": re.compile(r"[-/]\d\d[-/]\d\d[-_ Tt]\d\d:"), "usec": re.compile(r":\d\d\.\d{6}"),
          "mon": re.compile("(?:" + "|".join(_MONTHS) + ") "),
          # one skeleton per date format: a date format searches the line from its start to its end (~8 µs on a
          # 160-character line) where the shared `date` gate let it in, though the line holds another's date
          # (each opens with a literal: a gate that opens with \d scans as slowly as the format it guards)
          "date_": re.compile(r"_\d\d:\d\d:\d\d"), "date,": re.compile(r":\d\d,\d{3}"),
          "date/": re.compile(r"/\d\d \d\d:\d\d:")}
# (fmt, gate, regex); group `ts` spans Stamp.text. Order = specificity: at one position the first wins.
_SPECS: list[tuple[str, str | None, str]] = [
    # §4.3: the RFC822 part (Go "02 Jan 06 15:04 MST") gives date + zone for the AIStore hour.
    ("ais_header", "mon", r"[IWE](?<![^\s:\]][IWE]) \d\d:\d\d:\d\d\.\d{6} (?:[\w\-]+:\d+ )?(?P<ts>(?P<d>\d\d) "
     + _MON
     + r" (?P<y2>\d\d) (?P<H>\d\d):(?P<M>\d\d) (?P<z>[A-Z]{1,5}|[+-]\d{4}))(?= =+)"),
    # §1.1: MMDD = month*100+day printed unpadded by c10 (`E808` = Aug 8), hence \d{3,4}; 9-digit ns.
    ("glog", None, r"\[[IWEF](?P<ts>(?P<md>\d{3,4}) " + _HMS + r"\.(?P<f>\d{6,9}))(?= )"),
    # §2.3: Python logger uses %m%d → always 4 digits; then pid/tid and path:line].
    ("torch_py", "usec", r"[VIWEC](?<![A-Za-z0-9][VIWEC])(?P<ts>(?P<md>\d{4}) " + _HMS + r"\.(?P<f>\d{6}))"
     r"(?= +\d+ \S+:\d+\])"),
    # §2.1: datetime.isoformat(sep="_") → the underscore is the tell.
    ("torchelastic", "date_", r"(?P<ts>" + _YMD + "_" + _HMS + r"(?:\.(?P<f>\d{1,6}))?)(?!\d)"),
    # §2.3 torch 2.1–2.2 / stdlib asctime: comma + exactly 3 digits of milliseconds.
    ("py_logging", "date,", r"(?P<ts>" + _YMD + " " + _HMS + r",(?P<f>\d{3}))(?!\d)"),
    ("iso", "date", r"(?P<ts>" + _YMD + r"[Tt ]" + _HMS + r"(?:[.,](?P<f>\d+))?" + _ZONE + r")(?![\d:])"),
    ("ais_start", "date/", r"(?:Started up|Rotated) at (?P<ts>(?P<Y>\d{4})/(?P<m>\d\d)/(?P<d>\d\d) " + _HMS
     + r")(?!\d)"),
    ("go_log", "date/", r"(?<![\d/])(?P<ts>(?P<Y>\d{4})/(?P<m>\d\d)/(?P<d>\d\d) " + _HMS
     + r"(?:\.(?P<f>\d{1,6}))?)(?![\d.:])"),
    ("ctime", "mon", r"(?<![A-Za-z])(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MON + r" {1,2}(?P<d>\d{1,2}) " + _HMS
     + r" (?P<Y>\d{4}))(?!\d)"),
    ("syslog", "mon", r"(?<![A-Za-z])(?P<ts>" + _MON + r" {1,2}(?P<d>\d{1,2}) " + _HMS
     + r"(?:\.(?P<f>\d{1,6}))?)(?= )"),
    # §4.2: line starts (after outer prefixes) with the severity letter and a space.
    ("ais", "usec", r"[IWE](?<![^\s:\]][IWE]) (?P<ts>" + _HMS + r"\.(?P<f>\d{6}))(?= |$)"),
    # §6: printk `[%5lu.%06lu]` = seconds since boot.
    ("dmesg", None, r"\[\s*(?P<ts>(?P<up>\d{1,10})\.(?P<f>\d{6}))\]"),
]
_RES = [(fmt, gate, re.compile(rx)) for fmt, gate, rx in _SPECS]
_DMESG = next(r for f, _, r in _RES if f == "dmesg")
_GLOG = next(r for f, _, r in _RES if f == "glog")

def _valid(month: int | None, day: int | None, h: int, mi: int, s: int, year: int | None) -> bool:
    if not (0 <= h <= 23 and 0 <= mi <= 59 and 0 <= s <= 59):
        return False
    if month is None:
        return True
    if not (1 <= month <= 12 and day is not None and 1 <= day <= _DAYS_IN[month - 1]):
        return False
    leap = year is None or (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0))
    return not (month == 2 and day == 29 and not leap)


def build_stamp(fmt: str, m: re.Match) -> Stamp | None:
    """The Stamp of format `fmt` from a match of its regex (named groups Y/y2/mon/md/m/d, H/M/S, f, z, up), or None
    when the fields are no valid time. Public for the sources whose file names state a time (ais/format.py)."""
    g = m.groupdict()
    f = g.get("f") or ""
    nanos = int(f.ljust(9, "0")[:9]) if f else 0
    if fmt == "dmesg":
        up = int(g["up"])
        return Stamp(m["ts"], fmt, 0, 0, 0, nanos // 1000, uptime_s=up + nanos / 1e9, nanos=nanos)
    year = int(g["Y"]) if g.get("Y") else None
    if g.get("y2"):
        year = 2000 + int(g["y2"])  # Go RFC822 prints 2-digit years; AIStore postdates 2000
    month = day = None
    if g.get("md"):
        month, day = divmod(int(g["md"]), 100)
    elif g.get("m"):
        month, day = int(g["m"]), int(g["d"])
    elif g.get("mon"):
        month, day = _MONTHS[g["mon"]], int(g["d"])
    h, mi, s = int(g["H"]), int(g["M"]), int(g.get("S") or 0)
    tz, off = _norm_zone(g.get("z"))
    if g.get("z") and tz is None:  # an offset like +25:00 is no offset
        return None
    if not _valid(month, day, h, mi, s, year):
        return None
    return Stamp(m["ts"], fmt, h, mi, s, nanos // 1000, year, month, day, tz, off, nanos=nanos)


# Every wall-clock format holds HH:MM:SS, at most HMS_LEAD characters after its match's start (the longest lead:
# ais_start's `Started up at 2024/08/21 `, 25). So a line without HH:MM:SS can only hold a dmesg uptime, and no
# wall-clock match starts before the first HH:MM:SS minus HMS_LEAD: the formats are searched from there (lookbehinds
# still see the characters before it). Why: most lines read for a time have none (NCCL INFO, traceback frames) and
# cost 4-8 µs in the format loop against ~1 µs here; a Megatron line `[2024-11-05 03:00:00.928678] iteration ...`
# was searched from its start by each date format that failed on it (44 µs).
_HMS_ANY = re.compile(r"\d\d:\d\d:\d\d")
HMS_LEAD = 32
STAMP_LONGEST = 128  # no stamp of _SPECS, with what its lookaheads read, is longer
# The Stamp of each c10 stamp text seen (`[E1105 03:13:52.000000000`), by that text. Why: the glog regex's groups
# are a pure function of its match (fixed digits on both sides of fixed separators), so the same text always builds
# the same Stamp (frozen: sharing it is safe), and building one is half of parsing a c10 line (~8 of ~16 µs). A
# crash prints the same second on many lines and ranks (the watchdog cascade: every rank, several lines each).
# Bounded: cleared when full.
_GLOG_BUILT: dict[str, Stamp | None] = {}
GLOG_BUILT_MAX = 4096


def parse_stamp(line: str) -> Stamp | None:
    """The first timestamp in `line` (searched, not anchored: `[rank3]:`, ` 3: `, `[default0]:` or a
    tqdm bar may precede it). Earliest position wins; at one position the most specific format wins;
    an AIStore hourly header's RFC822 date beats the time-only stamp that starts its line."""
    hms = _HMS_ANY.search(line)
    if hms is None:  # only a dmesg uptime is left
        m = _DMESG.search(line) if "[" in line else None
        return build_stamp("dmesg", m) if m else None
    lead = max(0, hms.start() - HMS_LEAD)
    g = _GLOG.search(line, lead)
    if g is not None and hms.start() >= g.start() and _GATES["mon"].search(line, lead) is None \
            and _DMESG.search(line, 0, g.start()) is None:
        # c10's `[E1105 03:13:52.000000000 `, the most common stamp of a crash (~15 µs through the loop below, ~8
        # here, most of it building the Stamp). No other format can start before it: one that did would hold its
        # own HH:MM:SS before it (there is none: the first is at or after it) or span its `[E`, which none but
        # dmesg's `[` may (dmesg has no HH:MM:SS, and is looked for before it); none starts with `[` at its
        # position; and AIStore's header, which wins from anywhere in the line, needs a month name.
        key = g.group(0)
        st = _GLOG_BUILT.get(key, _MISSING)
        if st is _MISSING:
            st = build_stamp("glog", g)
            if len(_GLOG_BUILT) >= GLOG_BUILT_MAX:
                _GLOG_BUILT.clear()
            _GLOG_BUILT[key] = st
        if st is not None:
            return cast("Stamp", st)
    best: tuple[int, Stamp] | None = None
    gates: dict[str | None, bool] = {None: True}
    for fmt, gate, rx in _RES:
        if gate not in gates:
            gates[gate] = gate is None or _GATES[gate].search(line, lead) is not None
        if not gates[gate]:
            continue
        start = 0 if rx is _DMESG else lead
        # once a stamp is found, a later format wins only by starting before it: its search need not run on to the
        # end of the line (STAMP_LONGEST past the best start holds any stamp that starts before it)
        end = len(line) if best is None else min(len(line), best[0] + STAMP_LONGEST)
        for m in rx.finditer(line, start, end):
            if best is not None and m.start() >= best[0]:
                break
            if best is not None and m.end() > end - 4 and end < len(line):  # its lookaheads saw the cut: read it whole
                m = rx.search(line, m.start())
                if m is None or m.start() >= best[0]:
                    break
            st = build_stamp(fmt, m)
            if st is not None:
                if fmt == "ais_header":
                    return st
                best = (m.start(), st)
                break
    return best[1] if best else None


def parse_stamp_bytes(line: bytes) -> Stamp | None:
    return parse_stamp(line.decode("utf-8", "replace"))
