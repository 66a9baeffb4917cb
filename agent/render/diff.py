"""`debugger diff` → rich terminal: one table per kind ('only a few ranks printed it', 'a few ranks did not print
it'), each row citing a real `file:line`; every cut says what it cut."""

from __future__ import annotations

import re

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.plain import cite, short
from trainlog_debugger.agent.render.text import row
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rankdiff.analyze import DiffResult, TemplateDiff

MAX_TEMPLATE = 110
MAX_FILES = 20


def render_diff(res: DiffResult, console: Console) -> None:
    n = len(res.ranks)
    mbs = res.bytes / max(res.seconds, 1e-9) / 1e6
    console.print(Text.assemble(("diff ", "bold"), f"{res.root}: {n} ranks ({ranks_str(res.ranks)}), "
                                f"{res.templates:,} templates from {res.lines:,} lines, {res.bytes / 1e6:,.1f} MB "
                                f"in {res.seconds:.2f}s ({mbs:,.0f} MB/s)"))
    totals = {m.group(2): int(m.group(1)) for note in res.notes if (m := _SHOWING.match(note))}
    if n >= 2:
        _table(console, res.only, n, "only", "printed by a minority of ranks (only these ranks)",
               totals.get("minority", len(res.only)))
        _table(console, res.missing, n, "missing", "missing from a minority of ranks (every rank but these)",
               totals.get("missing", len(res.missing)))
        if not res.only and not res.missing and not totals:
            console.print(f"no difference: every template was printed by all {n} ranks or by too many to be a minority")
    if res.unattributed_files:
        console.print(f"{len(res.unattributed_files)} file(s) with no rank (not compared):", style="bold")
        for f in res.unattributed_files[:MAX_FILES]:
            console.print(f"  {f}", markup=False, highlight=False)
        if len(res.unattributed_files) > MAX_FILES:
            console.print(f"  showing {MAX_FILES} of {len(res.unattributed_files)} files with no rank", style="dim")
    for note in res.notes:
        if not _SHOWING.match(note):
            console.print(f"note: {note}", style="yellow", markup=False, highlight=False)


_SHOWING = re.compile(r"showing \d+ of (\d+) (minority|missing) templates")


def _table(console: Console, rows: list[TemplateDiff], n: int, kind: str, title: str, total: int) -> None:
    if rows:
        t = Table(title=title, title_justify="left", show_lines=False, expand=False)
        t.add_column("template", overflow="fold")
        t.add_column("ranks" if kind == "only" else "lacking", overflow="fold")
        t.add_column("present in", justify="right", no_wrap=True)
        t.add_column("lines", justify="right")
        t.add_column("example (file:line)", no_wrap=True)
        if kind == "missing":
            t.add_column("a lacking rank's last line", overflow="fold")
        for d in rows:
            cells = [short(d.template, MAX_TEMPLATE), ranks_str(d.ranks), f"{d.present_in}/{n}", f"{d.count:,}",
                     cite(d.example)]
            if kind == "missing":
                m = d.missing_example
                cells.append(f"rank {m.rank} {cite(m)}  {short(m.text, 60)}" if m else "-")
            row(t, *cells)
        console.print(t)
    if total > len(rows):
        label = "minority" if kind == "only" else "missing"
        console.print(f"  showing {len(rows)} of {total} {label} templates", style="dim")
