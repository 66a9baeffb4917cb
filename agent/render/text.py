"""Tool results → rich terminal output (scan, grep, catalog, nccl). Every cut says what it cut; every line shown
carries `file:line` (`cite` and `short` live in plain.py: the rich-free formats say them too)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.fit import proof, sentence
from trainlog_debugger.agent.render.plain import cite
from trainlog_debugger.tools.groups import parse_rank_set, rank_set
from trainlog_debugger.tools.lines.isotime import human_time
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.sources.pattern import TIERS


def row(table: Table, *cells) -> None:
    """Add a row of plain text: log lines are full of `[rank3]:` that rich would read as markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells))


def _time(ev: Evidence | None) -> str:
    if ev is None or not ev.time:
        return ""
    return human_time(ev.time.iso())


def render_scan(res, console: Console, max_patterns: int = 60, max_groups: int = 6) -> None:
    """`debugger scan`: what was read, which ranks, the pattern tables by tier, then the ranks and the files in
    groups (tools.scan.grouped: the rank that differs first, each group's ranks as a range set with a `file:line`),
    then what stands out. Sized for a screen at any number of ranks: every list is a range set or cut (said)."""
    _scan_header(res, console)
    for tier in (1, 2, 3, 0):
        _tier_table(res, tier, console, max_patterns)
    _first_lines(res, console)
    _rank_groups(res, console, max_groups)
    _file_groups(res, console, max_groups)
    _retries(res, console)
    _silent_first(res, console)
    _rank_nodes(res, console)
    _skipped_and_notes(res, console)


def _line(console: Console, text: str, style: str | None = None) -> None:
    """One line of ours, wrapped to the terminal with a hanging indent, whole in a pipe (agent/render/fit.py)."""
    sentence(console, text, style)


def _ranks(ranks, width: int = 32) -> str:
    """A rank set exact when it is short (`0-4095 except 1365`), else cut (tools.ranks.ranks_str says how many)."""
    exact = rank_set(ranks)
    return exact if len(exact) <= width else ranks_str(ranks, cap=4)


def _scan_header(res, console: Console) -> None:
    cov = res.coverage
    mbs = res.bytes / max(res.seconds, 1e-9) / 1e6
    console.print(Text.assemble(("scan ", "bold"), f"{res.root}: {len(res.files)} files"))
    console.print(f"  {res.lines:,} lines, {res.bytes / 1e6:,.1f} MB in {res.seconds:.2f}s ({mbs:,.0f} MB/s, "
                  f"{res.engine})", markup=False)
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
        return f"only {_ranks(p.only_ranks, 24)}"
    if p.missing_ranks:
        return f"all but {_ranks(p.missing_ranks, 24)}"
    return ""


def _tier_table(res, tier: int, console: Console, max_patterns: int) -> None:
    """One row per pattern: id, role, hits, ranks, the ranks that stand out, where it first printed. Laid out by
    hand, each row cut at the console's width: a rich table squeezes the ids to `pytorc…` at 80 columns."""
    rows = [p for p in res.patterns if p.tier == tier]
    if not rows:
        return
    id_w = max(len(p.id) for p in rows)
    console.print(f"[bold]tier {tier}: {TIERS[tier]}[/bold]")
    _line(console, f"  {'pattern':<{id_w}} {'role':<7} {'hits':>7} {'ranks':>5}  outliers  first (file:line)", "dim")
    shown = rows[:max_patterns]
    for p in shown:
        ranks = f"{len(p.rank_counts)}" + (f" +{p.unranked} unranked" if p.unranked else "")
        odd = _outliers(p)
        _line(console, f"  {p.id:<{id_w}} {p.role.replace('_candidate', ''):<7} {p.count:>7,} {ranks:>5}  "
                       f"{odd + '  ' if odd else ''}{cite(p.first)}")
    if len(rows) > len(shown):
        console.print(f"  showing {len(shown)} of {len(rows)} patterns in tier {tier}", style="dim")


def _first_lines(res, console: Console, most: int = 8) -> None:
    """The first line of each tier-1/2 pattern, once per line (two patterns often match the same one)."""
    seen: list = []
    for p in res.patterns:
        if p.tier in (1, 2) and p.first is not None and p.first not in seen:
            seen.append(p.first)
    if seen:
        console.print("[bold]first line of each tier-1/2 pattern[/bold]")
        for ev in seen[:most]:
            proof(console, f"  {cite(ev)}  {_time(ev)}  ", ev.text, None)
        if len(seen) > most:
            console.print(f"  showing {most} of {len(seen)} (debugger scan --json: patterns[].first)", style="dim")


def _profile_diff(g, usual) -> str:
    """How a group's counts differ from the largest group's: `+id` printed only here, `-id` not printed here,
    `id 2→3` printed as often."""
    out = []
    for pid in sorted(set(g.counts) | set(usual.counts)):
        a, b = usual.counts.get(pid), g.counts.get(pid)
        if a == b:
            continue
        out.append(f"+{pid}" if a is None else f"-{pid}" if b is None else f"{pid} {a}→{b}")
    if g.last_template != usual.last_template:
        out.append("another last line")
    if g.retry != usual.retry:
        out.append(f"retry {g.retry or 'none'}")
    return ", ".join(out[:4]) + (f", +{len(out) - 4} more" if len(out) > 4 else "")


def _rank_groups(res, console: Console, max_groups: int) -> None:
    """Ranks by profile, the smallest group first: each line says how it differs from the largest group and
    where its ranks stop (`file:line`)."""
    from trainlog_debugger.tools.scan.grouped import rank_groups
    groups = rank_groups(res)
    if len(groups) < 2 and not (groups and len(groups[0].ranks) > 1):
        return
    usual = max(groups, key=lambda g: len(g.ranks))
    console.print(f"[bold]ranks by profile[/bold]: {len(groups)} group(s), the smallest first")
    shown = [g for g in groups if g is not usual][:max_groups] + [usual]
    for g in shown:
        n = len(g.ranks)
        what = "the usual profile" if g is usual else _profile_diff(g, usual) or "as the usual"
        ranks = _ranks(g.ranks)
        ranks += "" if ranks.endswith(" ranks)") else f" ({n} rank{'s' if n > 1 else ''})"
        ev = g.first.first_match or g.first.last_line
        _line(console, f"  ranks {ranks}: {cite(ev)}  {what}",
              "bold" if g is not usual and n * 10 < len(usual.ranks) else None)
        stop = g.first.last_line
        if stop is not None and (g is usual or g.last_template != usual.last_template):
            proof(console, f"      stops at {cite(stop)}  ", stop.text)
    if len(groups) > len(shown):
        rest = [g for g in groups if g not in shown]
        console.print(f"  … {len(rest)} more group(s) of {sum(len(g.ranks) for g in rest)} ranks "
                      "(debugger scan --json: rank_groups)", style="dim")


def _file_groups(res, console: Console, max_groups: int) -> None:
    """Files alike (kind, counts, error, notes, ranks per file) as one line each: the ones with an error or a
    note first, then the smallest groups; the largest always."""
    from trainlog_debugger.tools.scan.grouped import file_groups
    groups = file_groups(res.files)
    if len(groups) < 2 and not any(g.stands_out for g in groups):
        return
    largest = max(groups, key=lambda g: g.files)
    shown = [g for g in groups if g is not largest][:max_groups // 2] + [largest]
    console.print(f"[bold]files[/bold]: {len(res.files)} in {len(groups)} group(s) (kind, counts, errors, notes)")
    for g in shown:
        names = " … ".join(g.names)
        why = f"; ERROR {g.error}" if g.error else ""
        why += f"; note: {g.notes[0]}" + (f" (+{len(g.notes) - 1})" if len(g.notes) > 1 else "") if g.notes else ""
        _line(console, f"  {g.files} {g.kind} file(s), ranks {_ranks(g.ranks, 24)}: {names}{why}",
              "yellow" if g.stands_out else None)
    if len(groups) > len(shown):
        rest = [g for g in groups if g not in shown]
        console.print(f"  … {len(rest)} more group(s) of {sum(g.files for g in rest)} files "
                      "(debugger scan --json: file_groups)", style="dim")


def _retries(res, console: Console) -> None:
    states: dict[str, list[int]] = {}
    for r, rs in res.ranks.items():
        if rs.retry:
            states.setdefault(rs.retry["state"], []).append(r)
    if states:
        console.print("retries: " + "; ".join(f"{k}: ranks {_ranks(v)}" for k, v in sorted(states.items())))


def _silent_first(res, console: Console) -> None:
    if not res.silent_first:
        return
    console.print("[bold]silent first[/bold] (last line well before the others)")
    for s in res.silent_first[:10]:
        ev = s["last_line"]
        proof(console, f"  rank {s['rank']}: last at {human_time(s['last_time'])} ({s['seconds_before_median']:.0f}s before "
                       f"the median)  {cite(ev)}  ", ev.text, None)
    if len(res.silent_first) > 10:
        console.print(f"  showing 10 of {len(res.silent_first)} silent ranks: "
                      f"{_ranks([s['rank'] for s in res.silent_first], 48)}", style="dim")


def _rank_nodes(res, console: Console) -> None:
    if not res.rank_nodes:
        return
    from trainlog_debugger.tools.scan.grouped import node_groups
    nodes, lines = node_groups(res.rank_nodes)
    _line(console, f"rank→node (stated in logs), {len(nodes)} node(s): "
                   + "; ".join(f"{n}: {rs}" for n, rs in list(nodes.items())[:20]))
    for g in lines[:3]:
        ex = g["exemplars"][0]
        proof(console, f"  ranks {_ranks(parse_rank_set(g['ranks']))} stated by lines like {ex['file']}:{ex['line']}  ",
              ex["text"])


def _skipped_and_notes(res, console: Console) -> None:
    cov = res.coverage
    if cov.skipped:
        console.print(f"[bold]skipped {len(cov.skipped)} file(s)[/bold]")
        for s in cov.skipped[:20]:
            console.print(f"  {s['file']}: {s['reason']}", markup=False, highlight=False)
        if len(cov.skipped) > 20:
            console.print(f"  showing 20 of {len(cov.skipped)} skipped files", style="dim")
    notes = res.notes + cov.notes
    for n in notes[:20]:  # a sentence: wrapped at the width, not cut
        sentence(console, f"note: {n}", "yellow")
    if len(notes) > 20:
        console.print(f"  showing 20 of {len(notes)} notes (debugger scan --json: notes)", style="dim")


def render_grep(res, console: Console, max_lines: int = 3, max_groups: int = 12) -> None:
    """`debugger grep`: the matching lines grouped by template across ranks (tools.groups: each group's ranks as a
    range set, its count, its first and last line as `file:line`; the smallest group first, so a rank whose line
    differs leads), then the ranks with NO match. `max_lines`: exemplar lines shown per group."""
    sentence(console, f"grep /{res.pattern}/ in {res.root}: {res.total:,} matching lines in "
                      f"{res.files_with_matches} file(s), {len(res.ranks)} of {res.seen_ranks} ranks", "bold")
    groups = sorted(getattr(res, "groups", None) or [], key=lambda g: len(g.ranks) or g.count)
    for g in groups[:max_groups]:
        n = len(g.ranks)
        who = f"ranks {_ranks(g.ranks)}" + ("" if n < 2 else f" ({n})") if n else "no rank"
        if g.unranked and n:
            who += f" +{g.unranked} unranked"
        _line(console, f"  {g.count:,} line(s), {who}: {g.key}", "bold")
        for ev in g.exemplars[:max_lines]:
            proof(console, f"      {cite(ev)}  {_time(ev)}  ", ev.text, None)
    if len(groups) > max_groups:
        console.print(f"  showing {max_groups} of {len(groups)} line templates (debugger grep --json: groups)",
                      style="dim")
    if res.unranked_count and not groups:
        console.print(f"{res.unranked_count} matching line(s) with no rank attribution:")
        for ev in res.unranked[:max_lines * 3]:
            proof(console, f"  {cite(ev)}  ", ev.text, None)
    if res.seen_ranks:
        if res.ranks_without_match:
            console.print(f"[bold]ranks with NO match[/bold] ({len(res.ranks_without_match)} of {res.seen_ranks}): "
                          f"{_ranks(res.ranks_without_match, 48)}")
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


def render_nccl(rep, console: Console, max_rows: int = 8, max_culprits: int = 5) -> None:
    """`debugger nccl`: the verdict, each process group's roles, then ranks grouped by their NCCL state (one line
    per group with its rank set and the first exemplar; a culprit's own line always), the culprits' lines. Why
    groups: at 4,096 ranks every rank but one waits in the same state; one line says so and the one that differs
    stands out. Fits one screen at 80 columns."""
    import re

    from trainlog_debugger.agent.render.ranksets import rank_text
    # the c10 header of a line: `[rank3]:[E1105 08:58:32.606 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0 Rank 3] `
    glog = re.compile(r"^(?:\[[^\]]{1,40}\]:)*\s*(?:\[?[EWIF]\d{4} [\d:.]+ [^\]]{0,60}\]\s*)?(?:\[PG ID [^\]]{0,80}\]\s*)?")

    def said(prefix: str, ev, style: str | None = "dim") -> None:
        """What the line says, after its c10 log header (the exemplar's `file:line` locates it), never cut."""
        proof(console, prefix, glog.sub("", ev.text.strip()), style)

    p = lambda text, style=None: sentence(console, text, style)  # noqa: E731
    style = {"straggler": "bold red", "crash": "bold red", "gloo_straggler": "bold red", "fabric": "bold yellow"}
    p(f"nccl {rep.verdict}: {rep.summary}", style.get(rep.verdict, "bold"))
    exp = f"{rep.expected_ranks}" if rep.expected_ranks else "unknown"
    p(f"ranks: {rep.found_ranks} with logs of {exp} expected; {rep.with_state} with collective state"
      + (f"; missing {rank_text(rep.missing_ranks)}" if rep.missing_ranks else ""))
    for g in rep.groups:
        roles = "; ".join(f"{k} {rank_text(v, 48)}" for k, v in g.roles.items())
        start = f", started {human_time(g.start_time)} (watchdog time − {g.timeout_ms} ms)" if g.start_time else ""
        at = f"stuck at SeqNum {g.stuck_seq} {g.op or ''}" if g.stuck_seq is not None else f"stuck in {g.op or 'a collective'}"
        p(f"PG {g.pg}{' (' + g.desc + ')' if g.desc else ''}: {g.ranks} ranks, {at}{start}; {roles}" + (" [wavefront]" if g.pg == rep.wavefront and len(rep.groups) > 1 else ""))
    groups = rep.rank_groups()
    focus = set(rep.culprits) | set(rep.suspects)
    p(f"rank groups (ranks with the same NCCL state: {len(groups)})", "bold")
    for grp in groups[:max_rows]:
        p(f"  {rank_text(grp.ranks, 40)} ({len(grp.ranks):,}): {grp.key}")
        shown = [e for e in grp.exemplars if e.rank in focus][:2] or grp.exemplars[:1]
        for ev in shown:
            said(f"    {cite(ev)}  ", ev)
    if len(groups) > max_rows:
        rest = [r for grp in groups[max_rows:] for r in grp.ranks]
        p(f"  showing {max_rows} of {len(groups)} rank groups; the rest hold ranks {rank_text(rest, 40)}", "dim")
    for r in rep.culprits[:max_culprits]:
        rs = rep.ranks[r]
        p(f"culprit rank {r}{' on ' + rs.node if rs.node else ''}: {rs.reason}")
        for ev in rs.cited(2):
            said(f"  {cite(ev)}  ", ev, None)
    if len(rep.culprits) > max_culprits:
        p(f"  showing the lines of {max_culprits} of {len(rep.culprits)} culprits", "dim")
    if rep.suspects:
        p(f"suspects (no logs): {rank_text(rep.suspects)}")
    for n in rep.notes:
        p(f"note: {n}", "yellow")
