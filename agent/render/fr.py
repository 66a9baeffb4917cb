"""`debugger fr` → rich terminal: one table per process group at its stuck collective, ranks with identical rows
grouped into ranges (`0-3,7`), culprits highlighted, every cut saying what it cut ("showing X of Y")."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.plain import short
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.sources.flight_recorder.analyze import FRGroup, FRReport

MAX_ROWS = 12           # grouped rows per PG table
MAX_MISMATCHES = 8      # mismatch rows per PG
MAX_STACKS = 3          # distinct stacks per PG
MAX_FRAMES = 8          # frames per stack
MAX_P2P = 8
MAX_SKIPPED = 20
CULPRIT = "bold red"


def render_fr(report: FRReport, console: Console) -> None:
    ranks = sorted(report.dumps)
    head = f"{len(ranks)} dump(s) read (ranks {ranks_str(ranks)})"
    if report.skipped:
        head += f", {len(report.skipped)} skipped"
    console.print(Text.assemble(("fr ", "bold"), head))
    line = f"ranks expected: {ranks_str(report.expected_ranks)} ({len(report.expected_ranks)})"
    if report.no_dump_ranks:
        line += f"; NO DUMP from {len(report.no_dump_ranks)}: {ranks_str(report.no_dump_ranks)}"
    console.print(line, markup=False, highlight=False)
    if report.culprits:
        console.print(Text.assemble("culprits: ", (ranks_str(report.culprits), CULPRIT),
                                    f"   first stuck: PG {report.first_stuck}" if report.first_stuck else ""))
    elif report.first_stuck:
        console.print(f"no culprit rank found; first stuck: PG {report.first_stuck}", markup=False, highlight=False)
    for s in report.skipped[:MAX_SKIPPED]:
        console.print(f"  skipped {s['file']}: {s['reason']}", style="yellow", markup=False, highlight=False)
    if len(report.skipped) > MAX_SKIPPED:
        console.print(f"  showing {MAX_SKIPPED} of {len(report.skipped)} skipped files", style="dim")
    for g in report.groups:
        _group(report, g, console)
    for n in report.notes:
        console.print(f"note: {n}", style="yellow", markup=False, highlight=False)


def _name(g: FRGroup) -> str:
    return f"PG {g.pg}" + (f" ({g.desc})" if g.desc else "")


def _compact(v: Any) -> str:
    return "-" if v in (None, [], "") else json.dumps(v, separators=(",", ":"), default=str)


def _group(report: FRReport, g: FRGroup, console: Console) -> None:
    console.print()
    title = f"{_name(g)}: {len(g.members)} rank{'s' if len(g.members) != 1 else ''}"
    if g.stuck_seq is None:
        done = f" (last #{g.last_done_seq})" if g.last_done_seq is not None else ""
        console.print(Text.assemble((title, "bold"), f" · nothing pending{done}"))
    else:
        t = Text.assemble((title, "bold"), " · STUCK at ", (f"{g.seq_kind} #{g.stuck_seq} {g.op}", "bold"))
        if g.culprits:
            t.append(" · culprits ")
            t.append(ranks_str(g.culprits), CULPRIT)
        console.print(t)
        _table(g, console)
    for n in g.notes:
        console.print(f"  note: {n}", style="dim", markup=False, highlight=False)
    _mismatches(g, console)
    _p2p(g, console)
    _stacks(g, console)


def _table(g: FRGroup, console: Console) -> None:
    rows: dict[tuple, list[int]] = {}
    recorded: dict[int, dict] = {r: v for v in g.stuck_variants for r in v["ranks"]}
    pending = {p["rank"]: p for p in g.p2p_pending if p["seq"] == g.stuck_seq and p["op"] == g.op}
    for r in g.members:
        state = g.state_by_rank.get(r, "?")
        op = sizes = dtypes = detail = ""
        if r in recorded:
            v = recorded[r]
            op = v["op"]
            sizes = f"{_compact(v['input_sizes'])} → {_compact(v['output_sizes'])}"
            dtypes = _compact(v["input_dtypes"])
        elif r in pending:
            op, detail = pending[r]["op"], f"peer {pending[r]['peer']}: {pending[r]['peer_state']}"
        elif state == "missing":
            ls = g.last_seen.get(r, {})
            if ls.get("seq") is not None:
                detail = f"newest entry here: {ls.get('op')} #{ls.get('seq')} {ls.get('state')}"
            elif "elsewhere" in ls:
                el = ls["elsewhere"]
                detail = (f"never used this PG; newest entry: PG {el.get('pg')} {el.get('op')} #{el.get('seq')} "
                          f"{el.get('state')}")
            else:
                detail = "never used this PG; no entries at all"
        elif state == "not_recorded":
            detail = "ring buffer no longer holds this seq"
        elif state == "no_dump":
            detail = "no dump from this rank"
        reasons = ", ".join(g.culprit_reasons.get(r, []))
        rows.setdefault((state, op, sizes, dtypes, detail, reasons), []).append(r)
    ordered = sorted(rows.items(), key=lambda kv: (not kv[0][5], -len(kv[1]), kv[1][0]))
    t = Table(show_lines=False, expand=False)
    t.add_column("ranks", overflow="fold")
    t.add_column("n", justify="right")
    t.add_column(f"state @#{g.stuck_seq}", no_wrap=True)
    t.add_column("op", overflow="fold")
    t.add_column("sizes in → out", overflow="fold")
    t.add_column("dtypes", overflow="fold")
    t.add_column("culprit / detail", overflow="fold")
    for (state, op, sizes, dtypes, detail, reasons), rs in ordered[:MAX_ROWS]:
        style = CULPRIT if reasons else ("yellow" if state in ("missing", "no_dump") else "")
        cells = [ranks_str(rs, cap=20), str(len(rs)), state, short(op, 40), short(sizes, 50), short(dtypes, 30),
                 short("; ".join(x for x in (reasons, detail) if x), 90)]
        t.add_row(*(Text(c, style=style) for c in cells))
    console.print(t)
    if len(ordered) > MAX_ROWS:
        console.print(f"  showing {MAX_ROWS} of {len(ordered)} rows", style="dim")


def _mismatches(g: FRGroup, console: Console) -> None:
    if not g.mismatches:
        return
    t = Table(title=f"{_name(g)}: mismatches across ranks", title_justify="left", expand=False)
    t.add_column("seq", justify="right")
    t.add_column("type_of_mismatch", no_wrap=True)
    t.add_column("field")
    t.add_column("values (ranks)", overflow="fold")
    t.add_column("culprit", overflow="fold")
    for m in g.mismatches[:MAX_MISMATCHES]:
        vals = "; ".join(f"{short(v, 40)} on {ranks_str(rs)}" for v, rs in m.found.items())
        culprit = Text(ranks_str(m.culprit_ranks), CULPRIT) if m.culprit_ranks else Text("- (no majority)" if
                                                                                          m.expected is None else "-")
        t.add_row(Text(f"{m.kind} #{m.seq}"), Text(m.type_of_mismatch), Text(m.field), Text(vals), culprit)
    console.print(t)
    if len(g.mismatches) > MAX_MISMATCHES:
        console.print(f"  showing {MAX_MISMATCHES} of {len(g.mismatches)} mismatches", style="dim")


def _p2p(g: FRGroup, console: Console) -> None:
    if not g.p2p_pending:
        return
    console.print(f"  pending send/recv in {_name(g)}:", markup=False, highlight=False)
    for p in g.p2p_pending[:MAX_P2P]:
        line = Text(f"    rank {p['rank']} {p['op']} #{p['seq']} {p['state']}; peer {p['peer']}: ")
        line.append(p["peer_state"], CULPRIT if p["peer_state"] == "missing" else "")
        if "size_mismatch" in p:
            line.append(f" size mismatch {_compact(p['size_mismatch'])}", CULPRIT)
        console.print(line)
    if len(g.p2p_pending) > MAX_P2P:
        console.print(f"    showing {MAX_P2P} of {len(g.p2p_pending)} pending p2p ops", style="dim")


def _stacks(g: FRGroup, console: Console) -> None:
    for st in g.frames[:MAX_STACKS]:
        console.print(f"  stack at #{g.stuck_seq} on ranks {ranks_str(st['ranks'])} (innermost first):",
                      markup=False, highlight=False)
        for f in st["frames"][:MAX_FRAMES]:
            console.print(f"    {f.get('name')} ({f.get('filename')}:{f.get('line')})", markup=False,
                          highlight=False, style="dim")
        if len(st["frames"]) > MAX_FRAMES:
            console.print(f"    showing {MAX_FRAMES} of {len(st['frames'])} frames", style="dim")
    if len(g.frames) > MAX_STACKS:
        console.print(f"  showing {MAX_STACKS} of {len(g.frames)} distinct stacks", style="dim")
