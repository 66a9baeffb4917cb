"""The agent's tools over raw lines: `lines` (a rank's or a node's lines between two times, optionally matching a
regex, a page at a time) and `histogram` (how many lines match a regex per time bucket: when an error started,
whether it grew). Registered in agent/graph/tools.py TOOLS.

Why they read the files and not the scan: the scan keeps the first and last few hits per rank and pattern, which
answers "did rank 17 print it" but not "what did rank 17 print between 12:03 and 12:05" or "how many timeouts per
minute". Both read only the files the scan attributed to the rank or node (or, for a histogram, the text files it
read), line by line, numbered exactly as the re-reader numbers them (tools/bundle/reread.py), so a line they show
can be cited.

Times: a line's time is the stamp it prints (tools/lines/timestamps.py), or for a line that prints none (a
traceback's frames) the stamp of the line before it. `since` / `until` are compared on month, day and time of day
(many logs never print a year); given as a time of day alone (`12:03`), on the time of day only.

The model's regex runs in a child process killed after caps.REGEX_SECONDS (Toolbox.regex): `re` has no timeout.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.caps import page
from trainlog_debugger.agent.graph.result import ToolResult, error, line, no_data, ok, ranges
from trainlog_debugger.agent.graph.toolbox import Box

Pattern = Annotated[str, Field(min_length=1, max_length=caps.GREP_PATTERN_CHARS)]
_WHEN = re.compile(r"^\s*(?:(?:\d{4}|-)?-?(?P<mo>\d\d)-(?P<d>\d\d)[T ])?T?(?P<h>\d\d):(?P<mi>\d\d)"
                   r"(?::(?P<s>\d\d)(?:[.,](?P<f>\d{1,9}))?)?")
READ = 8 << 20  # bytes per read of a file (lines are split per read)


def lines(box: Box, rank: int | None = None, node: str | None = None, since: str | None = None,
          until: str | None = None, pattern: Pattern | None = None, ignore_case: bool = False,
          limit: Annotated[int, Field(ge=1, le=caps.LINES_MAX)] = caps.LINES,
          offset: Annotated[int, Field(ge=0)] = 0) -> ToolResult:
    """The lines one rank (or one node) printed, in file order, optionally between two times and matching a regex,
    a page at a time; with how many lines matched in all.

    Args:
        rank: the rank whose lines to read (give rank or node)
        node: the node whose lines to read
        since: the earliest time, e.g. `12:03`, `11-05T12:03:10` or `2024-11-05T12:03` (the year is ignored)
        until: the latest time, same forms
        pattern: only lines matching this Python regex
        ignore_case: match the pattern regardless of case
        limit: how many lines to show
        offset: how many matching lines to skip: to page on
    """
    if (rank is None) == (node is None):
        return error("give rank or node (one of them)")
    bounds = []
    for name, when in (("since", since), ("until", until)):
        key = _when(when) if when else None
        if when and key is None:
            return error(f"{name}: {when!r} is not a time (e.g. 12:03, 11-05T12:03:10, 2024-11-05T12:03:10)")
        bounds.append(key)
    scan = box.report("scan") or {}
    if rank is not None:
        rs = scan.get("ranks", {}).get(str(rank))
        if rs is None:
            return error(f"no log line names rank {rank}; ranks seen: "
                         f"{ranges(int(r) for r in scan.get('ranks', {})) or 'none'}")
        names, who = rs["files"], ("rank", rank)
    else:
        names = [f["file"] for f in scan.get("files", []) if node in (f.get("nodes") or ())]
        if not names:
            return error(f"no file holds lines of a node {node!r}")
        who = ("node", node)
    # per file: None when every line is the rank's (or node's), else the file's ranks in order, by which a line
    # that names only its local rank (`[default3]:`, torchrun's --tee prefix) is placed: local l is the l-th of them
    placed = {f["file"]: (None if len(f["ranks" if who[0] == "rank" else "nodes"]) <= 1 else sorted(f["ranks"]))
              for f in scan.get("files", [])}
    files = [(box.sources[n], placed.get(n, [])) for n in names if n in box.sources]
    args = (files, who, bounds[0], bounds[1], pattern, ignore_case, offset, limit)
    return box.regex(_lines, *args) if pattern else _lines(*args)


def _lines(files, who, since, until, pattern, ignore_case, offset, limit) -> ToolResult:
    from trainlog_debugger.tools.lines.attribution import attribute_line
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0) if pattern else None
    rows: list[dict] = []
    matched, read, stopped = 0, 0, False
    first = last = None
    for src, ranks in files:
        when = None
        for n, text in _numbered(src):
            read += 1
            if read > caps.LINES_SCANNED:
                stopped = True
                break
            when = _stamp(text) or when
            if ranks is not None:
                a = attribute_line(text)
                r = a.rank if a.rank is not None or a.local_rank is None or a.local_rank >= len(ranks) else \
                    ranks[a.local_rank]
                if (r if who[0] == "rank" else a.node) != who[1]:
                    continue
            if (since or until) and not _within(when, since, until):
                continue
            if rx is not None and not rx.search(text):
                continue
            matched += 1
            first = first or when
            last = when or last
            if offset < matched <= offset + limit:
                cut_text = text if len(text) <= caps.LINE_CHARS else text[:caps.LINE_CHARS] + " … [line cut]"
                rows.append(line({"file": src.rel, "line": n, "text": cut_text,
                                  **({"time": {"iso": when}} if when else {})}))
        if stopped:
            break
    what = f"{who[0]} {who[1]}"
    searched = {"who": what, "files": [s.rel for s, _ in files][:10], "since": since and since[1],
                "until": until and until[1], "pattern": pattern}
    cut = [f"stopped reading after {caps.LINES_SCANNED} lines: the count is a lower bound"] if stopped else []
    if not matched:
        return no_data({"matches": 0, **searched}, cut)
    shown = list(rows)
    page(range(matched), offset, limit, f"matching lines of {what}", cut)
    return ok({"matches": matched, "first_time": first, "last_time": last, **searched, "lines": rows}, cut, shown)


def histogram(box: Box, pattern: Pattern, bucket: Annotated[int, Field(ge=1, le=86_400)] = 60,
              ignore_case: bool = False) -> ToolResult:
    """How many lines match a Python regex per time bucket, over every text file of the bundle: when an error
    began, whether it grew or came in bursts, and how many ranks printed it in each bucket.

    Args:
        pattern: the regex (Python syntax)
        bucket: the bucket's width in seconds (widened when the span needs more buckets than are shown)
        ignore_case: match regardless of case
    """
    try:
        rx = re.compile(pattern.encode(), re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
    except re.error as e:
        return error(f"not a valid Python regex: {e}")
    names = [f["file"] for f in (box.report("scan") or {}).get("files", []) if not f.get("error")]
    srcs = [box.sources[n] for n in names if n in box.sources]
    return box.regex(_histogram, srcs, rx, bucket)


def _histogram(srcs, rx, bucket: int) -> ToolResult:
    from trainlog_debugger.tools.bundle.reread import normalise
    from trainlog_debugger.tools.lines.attribution import attribute_line
    from trainlog_debugger.tools.lines.isotime import seconds_of
    counts: dict[int, list[Any]] = {}
    total = untimed = 0
    for src in srcs:
        with src.open() as fh:
            from trainlog_debugger.tools.bundle.chunks import chunks
            for ch in chunks(fh, READ):
                buf, pos = ch.buf, 0
                while total < caps.LINES_SCANNED and (m := rx.search(buf, pos)):
                    start = buf.rfind(b"\n", 0, m.start()) + 1
                    end = buf.find(b"\n", max(m.end(), m.start() + 1) - 1)
                    end = len(buf) if end == -1 else end
                    text = normalise(buf[start:end])
                    total += 1
                    iso = _stamp(text)
                    sec = seconds_of(iso, ignore_year=True) if iso else None
                    if sec is None:
                        untimed += 1
                    else:
                        b = counts.setdefault(int(sec // bucket), [0, set()])
                        b[0] += 1
                        if (r := attribute_line(text).rank) is not None:
                            b[1].add(r)
                    pos = end + 1
    if not total:
        return no_data({"matches": 0, "files": len(srcs)})
    cut: list[str] = []
    width = bucket
    if counts:
        keys = sorted(counts)
        while (keys[-1] - keys[0]) * bucket // width + 1 > caps.HISTOGRAM_BUCKETS:
            width *= 2
        if width != bucket:
            cut.append(f"buckets widened from {bucket} s to {width} s to show the whole span in "
                       f"{caps.HISTOGRAM_BUCKETS} buckets or fewer")
    merged: dict[int, list[Any]] = {}
    for k in sorted(counts):
        c, ranks = counts[k]
        m = merged.setdefault(k * bucket // width, [0, set()])
        m[0] += c
        m[1] |= ranks
    rows = [{"from": _at(k * width), "count": c, "ranks": len(rs)} for k, (c, rs) in merged.items()]
    peak = max(rows, key=lambda r: r["count"]) if rows else None
    if total >= caps.LINES_SCANNED:
        cut.append(f"stopped counting at {caps.LINES_SCANNED} matching lines")
    data = {"matches": total, "untimed": untimed, "bucket_seconds": width, "first": rows[0]["from"] if rows else None,
            "last": rows[-1]["from"] if rows else None, "peak": peak, "buckets": rows}
    return ok(data, cut)


def _at(seconds: int) -> str:
    """A bucket's start as `--MM-DDTHH:MM:SS` (the year is never compared, so never shown)."""
    import datetime as dt
    return "-" + (dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
        seconds=seconds - 946684800)).strftime("-%m-%dT%H:%M:%S")


def _numbered(src):
    """(line number, text) of every line of `src`, numbered as tools/bundle/reread.py numbers them."""
    from trainlog_debugger.tools.bundle.chunks import chunks
    from trainlog_debugger.tools.bundle.reread import normalise
    n = 0
    with src.open() as fh:
        for ch in chunks(fh, READ):
            parts = ch.buf.split(b"\n")
            if ch.buf.endswith(b"\n"):
                parts.pop()
            for raw in parts:
                n += 1
                yield n, normalise(raw)


def _stamp(text: str) -> str | None:
    from trainlog_debugger.tools.lines.timestamps import parse_stamp
    st = parse_stamp(text)
    return None if st is None or st.uptime_s is not None else st.iso()


def _when(text: str | None) -> tuple | None:
    """(key, the text) of a time as given or as a stamp's ISO form: key = (month, day, h, m, s, µs), month and
    day None when not given."""
    m = _WHEN.match(text or "")
    if not m:
        return None
    frac = int(((m["f"] or "0") + "000000")[:6])
    return ((int(m["mo"]) if m["mo"] else None, int(m["d"]) if m["d"] else None, int(m["h"]), int(m["mi"]),
             int(m["s"] or 0), frac), text)


def _within(iso: str | None, since, until) -> bool:
    if iso is None:
        return False
    got = _when(iso)
    if got is None:
        return False
    key = got[0]
    for bound, after in ((since, True), (until, False)):
        if bound is None:
            continue
        b = bound[0]
        k, b = (key[2:], b[2:]) if b[0] is None or key[0] is None else (key, b)
        if (k < b) if after else (k > b):
            return False
    return True
