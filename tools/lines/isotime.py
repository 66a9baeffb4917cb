"""Stamps for people: the ISO strings that reports carry (Stamp.iso(), to_json's `iso`), shown, subtracted and
moved to another clock without ever stating more than the logs did.

Why apart from timestamps.py: that module reads stamps out of log lines and orders them; these helpers read only
our own ISO form (`2024-11-05T12:34:41.123`, `-11-05T12:34:41` when the year was never stated, `...[UTC]`), and the
renderers, rules and the AIStore clock alignment call them long after the lines are gone.
"""
from __future__ import annotations

import re

_HUMAN_ISO = re.compile(r"^(?:(?P<y>\d{4}|-)-(?P<mo>\d\d)-(?P<d>\d\d))?T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
                  r"(?:\.(?P<f>\d+))?(?P<z>[+-]\d\d:\d\d|\[[^\]]+\])?$")
_MONTH_ABBR = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


_UPTIME = re.compile(r"uptime\+\d+(?:\.\d+)?s$")


def is_iso(text: str) -> bool:
    """Whether `text` is a stamp in our ISO form (Stamp.iso(): `2024-11-05T12:34:41.123000`, `--11-05T…`,
    `T12:34:41…`, `…+02:00`, `…[CST]`, `uptime+5107.644336s`)."""
    return bool(_HUMAN_ISO.match(text) or _UPTIME.match(text))


def rfc3339(iso: str) -> str | None:
    """Our ISO form as RFC 3339 (`2024-11-05T12:34:41.123000+00:00`), or None where the log did not state a year
    and a zone offset (RFC 3339 needs both; a zone name with no single offset, `CST`, has none). Text that is not
    our form is returned as it is."""
    m = _HUMAN_ISO.match(iso)
    if m is None:
        return None if _UPTIME.match(iso) else iso
    z = m["z"]
    if m["y"] in (None, "-") or not m["mo"] or not z or z.startswith("["):
        return None
    return iso


def human_time(iso: str | None) -> str:
    """A stamp as a person reads it: `2024-11-05 12:34:41` with the year, `Nov 05 12:34:41` without one (the logs
    never said it), milliseconds only when the log had them (no false `.000000`), the zone only when known.
    Anything that is not our ISO form is returned as is."""
    if not iso:
        return "-"
    m = _HUMAN_ISO.match(iso.replace(" ", "T", 1) if iso[:1].isdigit() and " " in iso[:11] else iso)
    if not m:
        return iso
    t = f"{m['h']}:{m['mi']}:{m['s']}"
    frac = (m["f"] or "").rstrip("0")
    if frac:
        t += "." + (frac + "00")[:3]
    if m["mo"]:
        mo, d = int(m["mo"]), m["d"]
        day = f"{m['y']}-{m['mo']}-{d}" if m["y"] not in (None, "-") else f"{_MONTH_ABBR[mo - 1] if 1 <= mo <= 12 else m['mo']} {d}"
        t = f"{day} {t}"
    z = m["z"]
    if z:
        t += " UTC" if z == "+00:00" else f" {z.strip('[]')}"
    return t


def seconds_of(iso: str | None, *, ignore_year: bool = False) -> float | None:
    """Seconds since an arbitrary epoch, to subtract two stamps of one report; None when the stamp has no date.
    `ignore_year`: compare on month, day and time only (one of the two stamps never said its year)."""
    m = _HUMAN_ISO.match(iso or "")
    if not m or not m["mo"]:
        return None
    import calendar
    y = int(m["y"]) if m["y"] not in (None, "-") and not ignore_year else 2000
    try:
        days = calendar.timegm((y, int(m["mo"]), int(m["d"]), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return days + int(m["h"]) * 3600 + int(m["mi"]) * 60 + int(m["s"]) + float("0." + (m["f"] or "0"))


def duration(a: str | None, b: str | None) -> str | None:
    """`32 min`, `2 h 05 min`, `41 s` between two stamps; None when either has no date or b is before a."""
    no_year = any(x and x.startswith("--") for x in (a, b))
    sa, sb = seconds_of(a, ignore_year=no_year), seconds_of(b, ignore_year=no_year)
    if sa is None or sb is None or sb < sa:
        return None
    d = int(round(sb - sa))
    if d < 120:
        return f"{d} s"
    if d < 7200:
        return f"{d // 60} min"
    return f"{d // 3600} h {d % 3600 // 60:02d} min"


def shift_iso(iso: str | None, seconds: float) -> str | None:
    """The same ISO stamp moved by `seconds` (another clock), keeping what it did not state unstated: no year stays
    no year, no zone stays no zone (a shifted UTC stamp loses its zone: it is now on the other clock). None when the
    stamp has no date."""
    import datetime as dt
    m = _HUMAN_ISO.match(iso or "")
    if not m or not m["mo"]:
        return None
    no_year = m["y"] in (None, "-")
    try:
        t = dt.datetime(2000 if no_year else int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]),
                        int(m["s"]), int(((m["f"] or "0") + "000000")[:6])) + dt.timedelta(seconds=seconds)
    except (ValueError, OverflowError):
        return None
    out = t.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return "-" + out[4:] if no_year else out
