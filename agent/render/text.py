"""Tool results → rich terminal output (scan, grep, catalog, nccl). Every cut says what it cut; every line shown
carries `file:line` (`cite` and `short` live in plain.py: the rich-free formats say them too)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.plain import cite, short
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.sources.pattern import TIERS


def row(table: Table, *cells) -> None:
    """Add a row of plain text: log lines are full of `[rank3]:` that rich would read as markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells))


def _time(ev: Evidence | None) -> str:
    if ev is None or not ev.time:
        return ""
    return ev.time.iso()


def render_scan(res, console: Console, max_patterns: int = 60) -> None:
    """`debugger scan`: what was read, which ranks, the pattern tables by tier, then what stands out."""
    _scan_header(res, console)
    for tier in (1, 2, 3, 0):
        _tier_table(res, tier, console, max_patterns)
    _first_lines(res, console)
    _retries(res, console)
    _silent_first(res, console)
    _rank_nodes(res, console)
    _skipped_and_notes(res, console)


def _scan_header(res, console: Console) -> None:
    cov = res.coverage
    mbs = res.bytes / max(res.seconds, 1e-9) / 1e6
    console.print(Text.assemble(("scan ", "bold"), f"{res.root}: {len(res.files)} files, {res.lines:,} lines, "
                                f"{res.bytes / 1e6:,.1f} MB in {res.seconds:.2f}s ({mbs:,.0f} MB/s, {res.engine})"))
    if cov.expected_ranks and cov.expected_from == "max rank seen":
        exp = f"at least {cov.expected_ranks} expected (max rank seen; no world size in the logs)"
    elif cov.expected_ranks:
        exp = f"{cov.expected_ranks} expected ({cov.expected_from})"
    else:
        exp = "world size unknown"
    line = f"ranks: {len(cov.seen_ranks)} seen, {exp}"
    if cov.missing_ranks:
        line += f"; MISSING {len(cov.missing_ranks)}: {ranks_str(cov.missing_ranks)}"
    console.print(line)
    if cov.expected_evidence:
        console.print(f"  world size from {cite(cov.expected_evidence[0])}", style="dim")
    if cov.files_without_rank:
        console.print(f"  {cov.files_without_rank} file(s) with no rank attribution", style="dim")


def _outliers(p) -> str:
    """The ranks that stand out for one pattern: a minority that printed it, or a minority that did not."""
    if p.only_ranks:
        return f"only {ranks_str(p.only_ranks)}"
    if p.missing_ranks:
        return f"all but {ranks_str(p.missing_ranks)}"
    return ""


def _tier_table(res, tier: int, console: Console, max_patterns: int) -> None:
    rows = [p for p in res.patterns if p.tier == tier]
    if not rows:
        return
    t = Table(title=f"tier {tier}: {TIERS[tier]}", title_justify="left", show_lines=False, expand=False)
    t.add_column("pattern", style="bold", no_wrap=True)
    for name in ("role", "hits", "ranks", "outliers", "first (file:line)", "first time"):
        t.add_column(name, justify="right" if name in ("hits", "ranks") else "left")
    shown = rows[:max_patterns]
    for p in shown:
        ranks = f"{len(p.rank_counts)}" + (f" +{p.unranked} unranked" if p.unranked else "")
        row(t, p.id, p.role.replace("_candidate", ""), f"{p.count:,}", ranks, _outliers(p), cite(p.first),
            _time(p.first))
    console.print(t)
    if len(rows) > len(shown):
        console.print(f"  showing {len(shown)} of {len(rows)} patterns in tier {tier}", style="dim")


def _first_lines(res, console: Console) -> None:
    firsts = [p for p in res.patterns if p.tier in (1, 2, 3) and p.first is not None]
    if firsts:
        console.print("[bold]first line of each tier-1/2 pattern[/bold]")
        for p in [p for p in firsts if p.tier in (1, 2)][:15]:
            console.print(f"  {cite(p.first)}  {short(p.first.text)}", markup=False, highlight=False)


def _retries(res, console: Console) -> None:
    states: dict[str, list[int]] = {}
    for r, rs in res.ranks.items():
        if rs.retry:
            states.setdefault(rs.retry["state"], []).append(r)
    if states:
        console.print("retries: " + "; ".join(f"{k}: ranks {ranks_str(v)}" for k, v in sorted(states.items())))


def _silent_first(res, console: Console) -> None:
    if not res.silent_first:
        return
    console.print("[bold]silent first[/bold] (last line well before the others)")
    for s in res.silent_first[:10]:
        ev = s["last_line"]
        console.print(f"  rank {s['rank']}: last at {s['last_time']} ({s['seconds_before_median']:.0f}s before the "
                      f"median)  {cite(ev)}  {short(ev.text, 100)}", markup=False, highlight=False)
    if len(res.silent_first) > 10:
        console.print(f"  showing 10 of {len(res.silent_first)} silent ranks", style="dim")


def _rank_nodes(res, console: Console) -> None:
    if not res.rank_nodes:
        return
    nodes: dict[str, list[int]] = {}
    for r, ev in res.rank_nodes.items():
        nodes.setdefault(ev.node or "?", []).append(r)
    console.print("rank→node (stated in logs): " + "; ".join(f"{n}: {ranks_str(rs)}" for n, rs in sorted(nodes.items())[:20]))


def _skipped_and_notes(res, console: Console) -> None:
    cov = res.coverage
    if cov.skipped:
        console.print(f"[bold]skipped {len(cov.skipped)} file(s)[/bold]")
        for s in cov.skipped[:20]:
            console.print(f"  {s['file']}: {s['reason']}", markup=False, highlight=False)
        if len(cov.skipped) > 20:
            console.print(f"  showing 20 of {len(cov.skipped)} skipped files", style="dim")
    for n in (res.notes + cov.notes)[:20]:
        console.print(f"note: {n}", style="yellow", markup=False, highlight=False)


def render_grep(res, console: Console, max_lines: int = 3) -> None:
    console.print(Text.assemble(("grep ", "bold"), f"/{res.pattern}/ in {res.root}: {res.total:,} matching lines in "
                                f"{res.files_with_matches} file(s), {len(res.ranks)} of {res.seen_ranks} ranks"))
    if res.ranks:
        t = Table(show_lines=False)
        t.add_column("rank", justify="right")
        t.add_column("count", justify="right")
        t.add_column("first time")
        t.add_column("last time")
        t.add_column("first (file:line)")
        t.add_column("line")
        for rm in res.ranks:
            row(t, str(rm.rank), f"{rm.count:,}", _time(rm.first), _time(rm.last), cite(rm.first),
                      short(rm.first.text, 100) if rm.first else "")
        console.print(t)
        if max_lines > 1:
            for rm in res.ranks[:50]:
                for ev in rm.lines[1:max_lines]:
                    console.print(f"  rank {rm.rank} {cite(ev)}  {short(ev.text, 120)}", markup=False)
    if res.unranked_count:
        console.print(f"{res.unranked_count} matching line(s) with no rank attribution:")
        for ev in res.unranked[:max_lines * 3]:
            console.print(f"  {cite(ev)}  {short(ev.text, 140)}", markup=False)
    if res.seen_ranks:
        if res.ranks_without_match:
            console.print(f"[bold]ranks with NO match[/bold] ({len(res.ranks_without_match)} of {res.seen_ranks}): "
                          f"{ranks_str(res.ranks_without_match, cap=40)}")
        else:
            console.print(f"every rank seen ({res.seen_ranks}) has a match")
    if res.missing_ranks:
        console.print(f"ranks with no log lines at all ({len(res.missing_ranks)}): {ranks_str(res.missing_ranks)}")


def render_catalog(rows: list[dict], console: Console) -> None:
    pats = [r for r in rows if r["role"] != "reader"]
    t = Table(title=f"{len(pats)} patterns", title_justify="left")
    for c in ("id", "tier", "category", "role", "summary"):
        t.add_column(c)
    for r in pats:
        row(t, r["id"], str(r["tier"]), r["category"] or "-", r["role"], r["summary"] + (" (fallback)" if r["fallback"] else ""))
    console.print(t)
    readers = [r for r in rows if r["role"] == "reader"]
    if readers:
        t = Table(title=f"{len(readers)} structured readers (records, not lines)", title_justify="left")
        for c in ("id", "category", "summary", "formats", "rules"):
            t.add_column(c)
        for r in readers:
            row(t, r["id"], r["category"] or "-", r["summary"], "; ".join(r.get("formats", [])),
                ", ".join(r.get("rules", [])))
        console.print(t)


def render_nccl(rep, console: Console, max_rows: int = 40) -> None:
    style = {"straggler": "bold red", "crash": "bold red", "gloo_straggler": "bold red", "fabric": "bold yellow"}
    console.print(Text.assemble(("nccl ", "bold"), (rep.verdict, style.get(rep.verdict, "bold")), f": {rep.summary}"))
    exp = f"{rep.expected_ranks}" if rep.expected_ranks else "unknown"
    console.print(f"ranks: {rep.found_ranks} with logs of {exp} expected; {rep.with_state} with collective state"
                  + (f"; missing {ranks_str(rep.missing_ranks)}" if rep.missing_ranks else ""))
    for g in rep.groups:
        roles = "; ".join(f"{k} {ranks_str(v)}" for k, v in g.roles.items())
        start = f", collective started {g.start_time} (watchdog time − {g.timeout_ms} ms)" if g.start_time else ""
        console.print(f"PG {g.pg}{' (' + g.desc + ')' if g.desc else ''}: {g.ranks} ranks, stuck at SeqNum "
                      f"{g.stuck_seq} {g.op or ''}{start}; {roles}" + (" [wavefront]" if g.pg == rep.wavefront and len(rep.groups) > 1 else ""),
                      markup=False)
    t = Table(title="every rank (identical rows collapsed)", title_justify="left")
    for c in ("ranks", "role", "PG", "SeqNum", "op", "enqueued", "completed", "own watchdog", "notified", "evidence"):
        t.add_column(c)
    for r in rep.rows[:max_rows]:
        ev = r["evidence"]
        row(t, ranks_str(r["ranks"]), r["role"], r["pg"] or "-", r["seq"] if r["seq"] is not None else "-",
            r["op"] or "-", r["enqueued"] if r["enqueued"] is not None else "-",
            r["completed"] if r["completed"] is not None else "-", "yes" if r["self_detected"] else "no",
            "yes" if r["notified"] else "no", cite(ev))
    console.print(t)
    if len(rep.rows) > max_rows:
        console.print(f"  showing {max_rows} of {len(rep.rows)} row groups", style="dim")
    for r in rep.culprits[:20]:
        rs = rep.ranks[r]
        console.print(f"culprit rank {r}{' on ' + rs.node if rs.node else ''}: {rs.reason}", markup=False)
        for ev in rs.cited(2):
            console.print(f"  {cite(ev)}  {short(ev.text, 150)}", markup=False)
    if rep.suspects:
        console.print(f"suspects (no logs): {ranks_str(rep.suspects)}", markup=False)
    for n in rep.notes:
        console.print(f"note: {n}", style="yellow", markup=False)
