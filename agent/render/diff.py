"""`debugger diff` → rich terminal: one list per kind ('only a few ranks printed it', 'a few ranks did not print
it'), one line per template with its ranks as a range set and a real `file:line`; every cut says what it cut.

Why lines and not a table: at 80 columns a table folds each template over ten lines, and two kinds of 50 templates
no longer fit a screen; one line per template (cut to the width, the JSON has it whole) does.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from trainlog_debugger.agent.render.fit import proof, sentence
from trainlog_debugger.agent.render.plain import cite
from trainlog_debugger.agent.render.ranksets import rank_text
from trainlog_debugger.tools.rankdiff.analyze import DiffResult, TemplateDiff

MAX_ROWS = 8                    # templates shown per kind (`--json` has the rest, up to --max-report)
MAX_FILES = 20


def render_diff(res: DiffResult, console: Console) -> None:
    n = len(res.ranks)
    mbs = res.bytes / max(res.seconds, 1e-9) / 1e6
    console.print(Text.assemble(("diff ", "bold"), f"{res.root}: {n} ranks ({rank_text(res.ranks, 40)}), "
                                f"{res.templates:,} templates from {res.lines:,} lines, {res.bytes / 1e6:,.1f} MB "
                                f"in {res.seconds:.2f}s ({mbs:,.0f} MB/s)"))
    totals = {m.group(2): int(m.group(1)) for note in res.notes if (m := _SHOWING.match(note))}
    if n >= 2:
        _rows(console, res.only, n, "only", "printed by a minority of ranks (only these ranks)",
              totals.get("minority", len(res.only)))
        _rows(console, res.missing, n, "missing", "missing from a minority of ranks (every rank but these)",
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


def _rows(console: Console, rows: list[TemplateDiff], n: int, kind: str, title: str, total: int) -> None:
    """Per template two lines: the template (wrapped on a terminal), then its ranks (the lacking
    ones for 'missing') as a range set, how many ranks have it, its lines and an example `file:line`; for
    'missing', where a lacking rank's log ends, once per distinct last line."""
    if rows:
        console.print(title, style="bold", markup=False, highlight=False)
    last_shown = None
    for d in rows[:MAX_ROWS]:
        sentence(console, "  " + d.template)
        who = "ranks" if kind == "only" else "lacking"
        console.print(f"    {who} {rank_text(d.ranks, 28)}; {d.present_in}/{n} have it, {d.count:,} line(s), e.g. "
                      f"{cite(d.example)}", markup=False, highlight=False, style="dim")
        m = d.missing_example
        if kind == "missing" and m is not None and m.cite() != last_shown:
            last_shown = m.cite()
            proof(console, f"    rank {m.rank} ends at {cite(m)}  ", m.text)
    shown = min(len(rows), MAX_ROWS)
    if total > shown:
        label = "minority" if kind == "only" else "missing"
        console.print(f"  showing {shown} of {total} {label} templates" + (" (--json for the rest)"
                                                                            if len(rows) > shown else ""),
                      style="dim")
