"""`debugger ais` → rich terminal: files per daemon and what they cover, the clock offset and its anchors, stats
and the error jump, the storage chain step by step, the merged timeline. Every claim carries `file:line`; every
cut says what it cut."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.agent.render.fit import proof, sentence
from trainlog_debugger.agent.render.plain import cite, short
from trainlog_debugger.agent.render.text import row
from trainlog_debugger.tools.sources.ais.analyze import AisReport
from trainlog_debugger.tools.sources.ais.clocks import hm, iso

MAX_FILES = 40
MAX_TIMELINE = 40
MAX_INTERVALS = 14
SIG_ORDER = ("pressure", "memory", "disk", "cpu", "stream_break", "out_of_bounds", "xid_not_found")


def _p(console: Console, text: str, style: str | None = None) -> None:
    sentence(console, text, style)


def _cited(console: Console, ev, indent: str = "     ") -> None:
    if ev is not None:
        proof(console, f"{indent}{cite(ev)}  ", ev.text)


def render_ais(rep: AisReport, console: Console) -> None:
    nt = sum(d.role == "target" for d in rep.daemons)
    nf = sum(len(d.files) for d in rep.daemons)
    head = (f"{rep.root}: {len(rep.daemons)} daemons ({nt} targets, {len(rep.daemons) - nt} proxies), {nf} files, "
            f"{rep.bytes / 1e6:,.1f} MB in {rep.seconds:.2f}s")
    if rep.workers_root:
        head += f"; workers: {rep.workers_root} ({rep.worker_ranks} ranks)"
    console.print(Text.assemble(("ais ", "bold"), head))
    if rep.window:
        w = rep.window
        _p(console, f"failure window (daemon clock): {w['start']} → {w['end']}  [{w['basis']}]")
    _files(rep, console)
    _clock(rep, console)
    _stats(rep, console)
    _chain(rep, console)
    _timeline(rep, console)
    _other(rep, console)


def _files(rep: AisReport, console: Console) -> None:
    t = Table(title="files per daemon (a file covers its start → the next file's start; ▶ covers the window, "
                    "↻ restart inside it)", title_justify="left")
    for c in ("daemon", "file", "start", "end", "how", "lines", "stats", "notes"):
        t.add_column(c, overflow="fold")
    shown = 0
    for d in rep.daemons:
        for i, sp in enumerate(d.files):
            if shown >= MAX_FILES:
                break
            shown += 1
            mark = ("▶" if sp.covers_window else "") + ("↻" if sp.starts_in_window and sp.restart else "")
            how = "RESTART" if sp.restart else sp.started
            notes = []
            if sp.spans_midnight:
                notes.append("spans midnight")
            if sp.starts_in_window and not sp.restart:
                notes.append("rotated inside the window")
            if sp.malformed_stats:
                notes.append(f"{sp.malformed_stats} malformed stats")
            notes += [n for n in sp.notes if "malformed" not in n][:1]
            row(t, d.daemon if i == 0 else "", f"{mark} {sp.file.rsplit('!', 1)[-1]}".strip(), sp.start or "?",
                f"{sp.end or '?'} ({sp.end_basis})", how, f"{sp.lines:,}", sp.stats_lines, "; ".join(notes))
    console.print(t)
    total = sum(len(d.files) for d in rep.daemons)
    if shown < total:
        _p(console, f"  showing {shown} of {total} files", "dim")


def _clock(rep: AisReport, console: Console) -> None:
    c = rep.clock
    if c is None:
        if rep.workers_root is None:
            _p(console, "clock: no worker logs given (--workers): daemon times only")
        return
    console.print(Text.assemble(("clock: ", "bold"), Text(c.summary)))
    for a in c.used:
        _p(console, f"  anchor {a.name}: {a.what}")
        _p(console, f"     worker {iso(a.worker_ts)} ↔ daemon {iso(a.daemon_ts, 0)} ±{a.uncertainty:.0f}s → offset "
                    f"{hm(a.offset)}")
        _cited(console, a.worker_ev[0] if a.worker_ev else None)
        for ev in a.daemon_ev[:2]:
            _cited(console, ev)
    for a, why in c.rejected:
        _p(console, f"  not used: {a.name} ({a.what}): {why}", "yellow")


def _stats(rep: AisReport, console: Console) -> None:
    t = Table(title="stats per daemon (Δ = increase of cumulative counters in the failure window)", title_justify="left")
    for c in ("daemon", "role", "stats lines", "restarts", "errors Δ in window", "GET Δ in window", "first error jump",
              "GET stop"):
        t.add_column(c, overflow="fold")
    for d in rep.daemons:
        errs = ", ".join(f"{k} +{v}" for k, v in d.window_deltas.items() if k.startswith("err.")) or "-"
        gets = ", ".join(f"{k} +{d.window_deltas[k]:,}" for k in ("get.n", "getbatch.n", "getbatch.obj.n")
                         if k in d.window_deltas) or "-"
        j = d.jumps[0] if d.jumps else None
        jump = f"{j['start']} → {j['end']}: {j['errors']} errors" if j else "-"
        stop = d.traffic_stop["at"] if d.traffic_stop else "-"
        row(t, d.daemon, d.role, d.samples, d.restarts, errs, gets, jump, stop)
    console.print(t)
    j = rep.main_jump
    if j:
        parts = ", ".join(f"{k} +{v['delta']} (usual {v['expected']:g}; {v['meaning']})"
                          for k, v in j["counters"].items())
        rates = ", ".join(f"{k} {v:.1%}" for k, v in j["rates"].items())
        what = f"{j['daemon']} between {j['start']} and {j['end']}: {parts}" + (f"; error rate {rates}" if rates else "")
        console.print(Text.assemble(("error jump: ", "bold red"), Text(what)))
        _cited(console, j["start_line"], "  from ")
        _cited(console, j["end_line"], "  to   ")
    cmp_ = rep.comparison
    if cmp_:
        jumped = [r["daemon"] for r in cmp_["rows"] if r["jumped"]]
        flat = [f"{r['daemon']} ({r['role']}, {r['errors']} errors)" for r in cmp_["rows"] if not r["jumped"]]
        _p(console, f"comparison in that interval: {cmp_['verdict']}: jumped {', '.join(jumped) or '-'}; flat "
                    f"{', '.join(flat) or '-'}")
    _intervals(rep, console)
    sig = Table(title="failure signatures (E/W lines) per daemon", title_justify="left")
    for c in ("daemon", "signature", "count", "in window", "first (file:line)", "last (file:line)"):
        sig.add_column(c, overflow="fold")
    any_sig = False
    for d in rep.daemons:
        for name in SIG_ORDER:
            s = d.signatures.get(name)
            if s:
                any_sig = True
                row(sig, d.daemon, name, f"{s['count']:,}", "-" if s["in_window"] is None else f"{s['in_window']:,}",
                    cite(s["first"]), cite(s["last"]))
        o = d.other
        for sev in ("E", "W"):
            if o.get(sev):
                top = next((x for x in o["top"] if x["sev"] == sev), None)
                any_sig = True
                row(sig, d.daemon, f"other {sev} lines", f"{o[sev]:,}", "-",
                    f"{cite(top['first'])} ({short(top['template'], 50)} ×{top['count']})" if top else "-", "")
    if any_sig:
        console.print(sig)


def _intervals(rep: AisReport, console: Console) -> None:
    """Stats intervals of the daemons the chain names, around the error jump: where the counters move."""
    names = set(rep.pressured) | ({rep.main_jump["daemon"]} if rep.main_jump else set())
    for d in rep.daemons:
        if d.daemon not in names or not d.window_intervals:
            continue
        ivs = d.window_intervals
        if rep.main_jump and len(ivs) > MAX_INTERVALS:
            k = next((i for i, iv in enumerate(ivs) if iv["end"][:19] == rep.main_jump["end"][:19]), 0)
            ivs = ivs[max(0, k - MAX_INTERVALS // 2):max(0, k - MAX_INTERVALS // 2) + MAX_INTERVALS]
        t = Table(title=Text(f"{d.daemon}: stats intervals in the failure window (Δ per interval)"),
                  title_justify="left")
        for c in ("from", "to", "errors Δ", "GETs Δ", "signature lines", ""):
            t.add_column(c, overflow="fold")
        for iv in ivs:
            row(t, iv["start"], iv["end"], ", ".join(f"{k} +{v}" for k, v in iv["errors"].items()) or "-",
                ", ".join(f"{k} +{v:,}" for k, v in iv["gets"].items()) or "0",
                ", ".join(f"{k} {v}" for k, v in iv["signatures"].items()) or "-",
                "counters reset (restart)" if iv["reset"] else "")
        console.print(t)
        if len(ivs) < len(d.window_intervals):
            _p(console, f"  showing {len(ivs)} of {len(d.window_intervals)} intervals", "dim")


def _chain(rep: AisReport, console: Console) -> None:
    if not rep.chain:
        _p(console, "storage chain: none found" + (f" ({'; '.join(rep.gaps)})" if rep.gaps else ""))
        return
    console.print(Text.assemble(("storage chain", "bold"), " (trigger first; target(s) at the start: ",
                                (", ".join(rep.pressured) or "?", "bold red"), ")"))
    for f in rep.chain:
        lag = f.facts.get("after_previous_s")
        when = f.facts.get("at") or "?"
        _p(console, f"  {f.facts['step']}. {f.facts['title']}  @ {when}" + (f" (+{lag:g}s)" if lag is not None else "")
           + f"  [{f.role.value}]", "bold")
        _p(console, f"     {f.summary}")
        for ev in f.evidence[:3]:
            aligned = ev.time.meta("aligned") if ev.time is not None else None
            tag = f" [worker clock → daemon {aligned}]" if aligned else ""
            proof(console, f"     {cite(ev)}{tag}  ", ev.text)
    for g in rep.gaps:
        _p(console, f"  gap: {g}", "yellow")


def _timeline(rep: AisReport, console: Console) -> None:
    if not rep.timeline:
        return
    t = Table(title="merged timeline (daemon clock; worker lines moved by the measured offset)", title_justify="left")
    for c in ("at", "clock", "what", "file:line"):
        t.add_column(c, overflow="fold")
    for r in rep.timeline[:MAX_TIMELINE]:
        row(t, r["at"], r["clock"], r["what"], r["cite"])
    console.print(t)
    if len(rep.timeline) > MAX_TIMELINE:
        _p(console, f"  showing {MAX_TIMELINE} of {len(rep.timeline)} timeline rows", "dim")


def _other(rep: AisReport, console: Console) -> None:
    for f in rep.observations:
        if f.id.startswith("clock.zone") or f.id.startswith("clock.skew") or f.id.startswith("clock.explicit"):
            continue
        style = {"noise": "dim", "root_candidate": "bold"}.get(f.role.value)
        _p(console, f"{f.id} [{f.role.value}]: {f.summary}", style)
        _cited(console, f.evidence[0], "     ")
    for s in rep.skipped[:20]:
        _p(console, f"skipped: {s['file']}: {s['reason']}", "yellow")
    for n in rep.notes[:20]:
        _p(console, f"note: {n}", "yellow")
