"""The agent's tools, one plain function each, registered in TOOLS: the only place a tool is declared. The tools
over the protocol's questions live here; those over raw lines (`lines`, `histogram`) in tools_lines.py and those
over the other reports `ask` makes (stack dumps, hardware, flight recorder, Kubernetes records, scan hits, rank map,
files) in tools_reports.py.

Why these and no others: the protocol needs every rank at once (overview, where each rank stops, grep grouped by
rank with the ranks that did NOT match), the collective state of every rank, step times, the storage side, the
timeline and the rank diff, the raw lines around any `file:line`, and the upstream's own reading of a line; and
every report the CLI prints or `ask` computes is a tool, so the model never has to guess what a report would say.

How a tool is written (agent/graph/toolbox.py makes the rest of it):
- its docstring is written for the model: the first paragraphs become the tool's description, `Args:` the
  description of each parameter; its signature gives the parameters' types and defaults. The first parameter is
  the Toolbox, injected, never shown to the model;
- it reads a report only through `box.report(name)`, that report's to_json() (the Diagnosis, a pydantic model, is
  read directly), and cuts what it shows with the named caps of agent/graph/caps.py, each cut said in `cut`;
- it returns `ok(data, cut, lines)`, `no_data(what was searched)` or `error(why)` (agent/graph/result.py); `lines`
  are the bundle lines `data` quotes, made with `line()`: only those can become shown lines for the verifier;
- `data` starts with the fields that answer (counts, culprits, the ranks with no match), rank sets written with
  `ranges()` (`0-1023 except 17`), and ends with the lists of rows and lines, a page at a time (`offset`, `limit`,
  `caps.page` says how to see the next): what the token cap cuts is then a list's tail, said in `cut`;
- a tool that runs the model's regex runs its body through `box.regex(...)`, in a child process killed after
  caps.REGEX_SECONDS; every call ends within caps.TOOL_SECONDS (agent/graph/bounded.py says why both).
"""

from __future__ import annotations

import re
from typing import Annotated, Callable

from pydantic import Field

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.caps import page, take
from trainlog_debugger.agent.graph.result import (ToolResult, ToolStatus, error, line, no_data, ok, quote, rank_list,
                                                 ranges)
from trainlog_debugger.agent.graph.toolbox import Box
from trainlog_debugger.agent.graph.tools_lines import histogram, lines
from trainlog_debugger.agent.graph.tools_reports import (files, flight_recorder, hardware, rank_map, records, scan_hits,
                                                         stacks)
from trainlog_debugger.tools.rules.asymmetry import MIN_RANKS  # a rank diff over fewer has no majority to differ from

# a group that holds a quantifier and is itself quantified: `(\w+\s?)*`, `(a|aa)+` (catastrophic backtracking)
_NESTED_QUANT = re.compile(r"\((?:[^()\\]|\\.)*(?:[*+]|\{\d*,?\d*\})(?:[^()\\]|\\.)*\)(?:[*+]|\{\d*,\d*\})")


def overview(box: Box) -> ToolResult:
    """Ranks seen/expected/missing, nodes, files by kind, and the deterministic answer."""
    scan, d = box.report("scan") or {}, box.inv.diagnosis
    cov = scan.get("coverage", {})
    kinds: dict[str, int] = {}
    for f in scan.get("files", ()):
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    nodes = sorted({n for rs in scan.get("ranks", {}).values() for n in rs.get("nodes", ())})
    cut: list[str] = []
    data = {
        "ranks_seen": len(cov.get("seen_ranks", ())), "ranks_expected": cov.get("expected_ranks"),
        "expected_from": cov.get("expected_from"), "missing_ranks": ranges(cov.get("missing_ranks", [])) or None,
        "nodes": take(nodes, caps.OVERVIEW_NODES, "nodes", cut), "nodes_total": len(nodes),
        "files": len(scan.get("files", ())), "files_by_kind": kinds,
        "files_without_rank": cov.get("files_without_rank", 0),
        "deterministic": {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
                          "culprit_nodes": d.culprit_nodes, "confidence": d.confidence, "headline": d.headline},
        "job": d.job.model_dump(exclude_none=True),
    }
    return ok(data, cut)


def where_ranks_stop(box: Box, limit: Annotated[int, Field(ge=1, le=caps.STOP_RANKS_MAX)] = caps.STOP_RANKS,
                     offset: Annotated[int, Field(ge=0)] = 0) -> ToolResult:
    """Every rank's last log line, earliest first, a page at a time.

    Args:
        limit: how many ranks to list, earliest first
        offset: how many of the earliest ranks to skip: to page on
    """
    last = [rs["last_line"] for rs in (box.report("scan") or {}).get("ranks", {}).values() if rs.get("last_line")]
    if not last:
        return no_data("no line in the bundle names a rank")
    last.sort(key=lambda e: ("time" not in e, e["time"]["iso"] if "time" in e else "", e.get("rank") or 0))
    cut: list[str] = []
    shown = [line(e) for e in page(last, offset, limit, "ranks (earliest first)", cut)]
    return ok(shown, cut, shown)


def grep(box: Box, pattern: Annotated[str, Field(min_length=1, max_length=caps.GREP_PATTERN_CHARS)],
         ignore_case: bool = False, offset: Annotated[int, Field(ge=0)] = 0,
         limit: Annotated[int, Field(ge=1, le=caps.GREP_RANKS_MAX)] = caps.GREP_RANKS) -> ToolResult:
    """A Python regex over every line of every rank: first which ranks matched and which did NOT (as ranges), then
    the matching lines grouped by rank, a page of ranks at a time. A pattern that runs longer than a few seconds
    is stopped and returned as an error.

    Args:
        pattern: the regex (Python syntax)
        ignore_case: match regardless of case
        offset: the first rank (in rank order) whose lines are listed: to page through the ranks with matches
        limit: how many ranks with matches to list with their lines
    """
    try:
        re.compile(pattern)
    except re.error as e:
        return error(f"not a valid Python regex: {e}")
    if _NESTED_QUANT.search(pattern):
        return error("nested quantifiers such as (\\w+\\s?)* can take hours on a large bundle: use a simpler "
                     "pattern (e.g. a literal phrase, or .*? between literals)")
    return box.regex(_grep, box.bundle, pattern, ignore_case, offset, limit)


def _grep(bundle, pattern: str, ignore_case: bool, offset: int, limit: int) -> ToolResult:
    """grep's body, run in a child process that is killed at caps.REGEX_SECONDS (Toolbox.regex)."""
    from trainlog_debugger.tools.scan.grep import grep_bundle
    from trainlog_debugger.tools.groups import per_rank_listing
    with per_rank_listing():  # by rank, paged below (schema_version 2 groups them by template otherwise)
        g = grep_bundle(bundle, pattern, ignore_case=ignore_case).to_json()
    if not g["total"]:
        missing = ranges(g["missing_ranks"])
        return no_data({"matches": 0, "ranks_seen": g["seen_ranks"], **({"missing_ranks": missing} if missing else {})})
    cut: list[str] = []
    shown: list[dict] = []
    by_rank = []
    for rm in page(g["ranks"], offset, limit, "ranks with matches", cut):
        lines = [line(e) for e in (rm["lines"] or [x for x in (rm.get("first"), rm.get("last")) if x])]
        lines = lines[:caps.LINES_PER_RANK]  # per rank, `count` says how many there are
        shown += lines
        by_rank.append({"rank": rm["rank"], "count": rm["count"], "lines": lines})
    unranked = [line(e) for e in g["unranked"][:caps.GREP_UNRANKED]]
    shown += unranked
    if g["unranked_count"] > len(unranked):
        cut.append(f"showing {len(unranked)} of {g['unranked_count']} lines without a rank")
    data = {"matches": g["total"], "ranks_with_match": ranges(r["rank"] for r in g["ranks"]) or None,
            "ranks_without_match": ranges(g["ranks_without_match"]) or None,
            "missing_ranks": ranges(g["missing_ranks"]) or None, "ranks_seen": g["seen_ranks"],
            "files_with_matches": g["files_with_matches"], "unranked_count": g["unranked_count"],
            "by_rank": by_rank, "unranked": unranked}
    return ok(data, cut + list(g["notes"]), shown)


def read_lines(box: Box, file: str, line: int, before: int = caps.WINDOW_CONTEXT,
               after: int = caps.WINDOW_CONTEXT) -> ToolResult:
    """The raw lines around file:line (at most 60).

    Args:
        file: a file of the bundle, as the tools name it
        line: the line number (1-based)
        before: lines before it
        after: lines after it
    """
    from trainlog_debugger.tools.bundle.reread import read_window
    src = box.sources.get(file)
    if src is None:
        near = [r for r in box.sources if r.endswith(file.split("/")[-1])][:5]
        return error(f"no file {file!r} in the bundle" + (f"; did you mean {', '.join(near)}" if near else ""))
    if getattr(src, "kind", None) == "fr_dump":
        return error("a flight-recorder dump is not text; use nccl_state")
    w = read_window(src, line, before, after, max_lines=caps.WINDOW_LINES)
    if not w.lines:
        return no_data(f"{file} has no line {line}", w.cut)
    shown = [_line_of(file, n, t) for n, t in w.lines]
    return ok(shown, w.cut, shown)


def nccl_state(box: Box) -> ToolResult:
    """The collective state of every rank per process group: the stuck collective, who never entered it, who was
    notified."""
    rep = box.report("nccl")
    if rep is None or rep["verdict"] == "no_collective_state":
        return no_data("no rank logged a collective timeout or watchdog state")
    cut: list[str] = []
    shown: list[dict] = []
    culprit_lines = [line(e) for r in take(rank_list(rep["culprits"]), caps.NCCL_CULPRITS, "culprits' lines", cut)
                     for e in _cited(rep["ranks"].get(str(r)) or {}, caps.LINES_PER_CULPRIT)]
    groups = [{"pg": g["pg"], "desc": g["desc"], "ranks": g["ranks"], "stuck_seq": g["stuck_seq"], "op": g["op"],
               "timeout_ms": g["timeout_ms"], "start": g["start_time"],
               "roles": {k: ranges(v) for k, v in g["roles"].items()}}
              for g in take(rep["groups"], caps.NCCL_GROUPS, "process groups", cut)]
    rows = [{**row, "ranks": ranges(row["ranks"])} if isinstance(row.get("ranks"), list) else row
            for row in quote(take(rep["rows"], caps.NCCL_ROWS, "rank rows", cut), shown)]
    data = {"verdict": rep["verdict"], "summary": rep["summary"], "culprits": ranges(rep["culprits"]) or None,
            "suspects": ranges(rep["suspects"]) or None, "missing_ranks": ranges(rep["missing_ranks"]) or None,
            "culprit_lines": culprit_lines, "groups": groups, "rank_rows": rows, "notes": rep["notes"]}
    return ok(data, cut, shown + culprit_lines)


def step_times(box: Box) -> ToolResult:
    """Step-time outlier ranks and regressions."""
    st = box.report("steps") or {}
    if not st.get("series"):
        return no_data("no step/iteration timing lines found")
    cut: list[str] = []
    outliers = [{"rank": o["rank"], "node": o["node"], "metric": o["metric"], "median": o["value"],
                 "group_median": o["group_median"], "slower_by": f"{o['gap']:+.0%}", "group": o["group"]}
                for o in take(st["outliers"], caps.STEP_OUTLIERS, "outlier ranks", cut)]
    regressions = [_without_evidence(r) for r in take(st["regressions"], caps.STEP_REGRESSIONS, "regressions", cut)]
    data = {"outliers": outliers, "regressions": regressions, "bound": _without_evidence(st["bound"]),
            "notes": take(st["notes"], caps.NOTES, "notes", cut)}
    return ok(data, cut)


def storage(box: Box) -> ToolResult:
    """The AIStore side: stats deltas, pressured targets, errors."""
    a = box.report("ais")
    if a is None:
        return no_data("the bundle holds no storage daemon logs (AIStore)")
    cut: list[str] = []
    shown: list[dict] = []
    chain = [{"summary": f["summary"], "lines": quote(f["evidence"][:caps.LINES_PER_FINDING], shown)}
             for f in take(a["chain"], caps.STORAGE_CHAIN, "findings of the storage chain", cut)]
    data = {"pressured": a["pressured"], "window": a["window"], "main_jump": quote(a["main_jump"], shown),
            "comparison": quote(a["comparison"], shown), "chain": chain,
            "gaps": take(a["gaps"], caps.STORAGE_GAPS, "gaps", cut)}
    return ok(data, cut, shown)


def timeline(box: Box) -> ToolResult:
    """The deterministic timeline with its lines."""
    tl = box.inv.diagnosis.timeline
    if not tl:
        return no_data("no timed events")
    lines = [line(t.evidence.to_json()) for t in tl]
    return ok([{"time": t.time, "what": t.what, "role": t.role.value, **ln} for t, ln in zip(tl, lines)], [], lines)


def rank_diff(box: Box) -> ToolResult:
    """Line templates that only a few ranks printed, or only a few lack."""
    seen = (box.report("scan") or {}).get("coverage", {}).get("seen_ranks", [])
    if box.inv.diff is None and len(rank_list(seen)) < MIN_RANKS:
        return no_data(f"fewer than {MIN_RANKS} ranks have logs: nothing to compare")
    d = box.report("diff") or {}
    cut: list[str] = []
    rows, shown = [], []
    for td in (take(d.get("only", []), caps.DIFF_TEMPLATES, "templates only a few ranks print", cut)
               + take(d.get("missing", []), caps.DIFF_TEMPLATES, "templates only a few ranks lack", cut)):
        ex = [line(td["example"])] + ([line(td["missing_example"])] if td.get("missing_example") else [])
        shown += ex
        rows.append({"kind": td["kind"], "ranks": ranges(td["ranks"]), "present_in": td["present_in"],
                     "template": td["template"], "example": ex[0],
                     **({"missing_example": ex[1]} if len(ex) > 1 else {})})
    if not rows:
        return no_data(f"no template differs between the {len(rank_list(d.get('ranks', [])))} ranks")
    return ok(rows, take(d.get("notes", []), caps.NOTES, "notes", cut), shown)


def explain_line(box: Box, text: str | None = None, file: str | None = None, line: int | None = None) -> ToolResult:
    """What a log line means according to the upstream that prints it (NCCL, PyTorch, CUDA, Xid, the kernel,
    Slurm, Ray, ...): the matching message templates with category, role (trigger/cascade/noise/context),
    meaning, action and the upstream file:line; and the lexicon's reading. Give `text` (a line) or `file` and
    `line` (a line of the bundle).

    Args:
        text: a log line, as printed
        file: a file of the bundle
        line: a line number in that file (1-based)
    """
    # Why: so that the model looks a message up instead of guessing what it means. A line of the bundle is read from
    # disk (and counts as shown); a `text` the model typed is only looked up.
    from trainlog_debugger.tools.lines.attribution import strip_prefixes
    from trainlog_debugger.tools.sources.messages import catalog as messages
    shown: list[dict] = []
    if file is not None or line is not None:
        if file is None or line is None:
            return error("give both file and line, or text")
        got = read_lines(box, file, line, before=0, after=0)
        if got.status is not ToolStatus.ok or not got.lines:
            return got
        shown = [ln for ln in got.lines if ln["at"] == f"{file}:{line}"][:1]
        text = shown[0]["text"] if shown else None
    if not text:
        return error("give `text` (a log line) or `file` and `line`")
    text = text[:caps.EXPLAIN_CHARS]
    cut: list[str] = []
    found = take(messages.match(text), caps.EXPLAIN_MATCHES, "matching upstream templates", cut)
    words = messages.read_by_words(strip_prefixes(text))
    if not found and not words:
        return no_data({"line": text, "upstream": [], "lexicon": None},
                       ["no upstream table and no lexicon row knows this line"], shown)
    data = {**({"at": shown[0]["at"]} if shown else {}), "line": text,
            "upstream": [{"table": m.table, "source": m.cite(), "template": m.template, "category": m.category,
                          "role": m.role, "meaning": m.meaning, "action": m.action,
                          **({"name": m.name} if m.name else {})} for m in found],
            "lexicon": ({"category": words[0], "words": words[1], "why": words[2]} if words else None)}
    return ok(data, cut, shown)


TOOLS: list[Callable[..., ToolResult]] = [
    overview, where_ranks_stop, grep, lines, read_lines, nccl_state, flight_recorder, stacks, hardware, records,
    step_times, storage, timeline, rank_diff, rank_map, scan_hits, files, histogram, explain_line,
]


def _line_of(file: str, n: int, text: str) -> dict:
    return line({"file": file, "line": n, "text": text})


def _cited(rank: dict, n: int) -> list[dict]:
    """A rank's lines worth quoting, from its NcclReport JSON: its crash, its first `n` state lines and its last
    line, each once (as RankState.cited gives them to the diagnosis)."""
    seen, out = set(), []
    for ev in ([rank["crash"]] if rank.get("crash") else []) + rank.get("evidence", [])[:n] + (
            [rank["last_line"]] if rank.get("last_line") else []):
        at = f"{ev['file']}:{ev['line']}"
        if at not in seen:
            seen.add(at)
            out.append(ev)
    return out


def _without_evidence(claim: dict | None) -> dict | None:
    """A steps claim (a regression, the compute/communication bound) without its evidence list: the numbers are
    what step_times answers; the lines behind them are a read_lines away."""
    return None if claim is None else {k: v for k, v in claim.items() if k != "evidence"}
