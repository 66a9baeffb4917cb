"""`debugger ask --html FILE`: one self-contained page (no network, no CDN) for the post-mortem and for pictures:
the report, a rank × time chart, the NCCL role of every rank as a grid, step times per rank, and the timeline with
links to the cited lines.

Why Plotly: a well-kept charting library whose Python package ships its JavaScript, so the page embeds it and
opens offline (air-gapped clusters are normal); WebGL scatter keeps 1,024+ ranks interactive (hover for rank,
node, the line's file:line). It is an optional extra (`pip install 'trainlog-debugger[html]'`): the rest of the
tool does not need it. Everything from the logs is HTML-escaped.
"""

from __future__ import annotations

import html
from collections import Counter

from trainlog_debugger.agent.render.plain import culprit, job, ranks_line, verdict_line, when, why_inconclusive
from trainlog_debugger.tools.lines.isotime import human_time, seconds_of
from trainlog_debugger.tools.model import Diagnosis, Evidence

ROLE_CODES = {"missing": 0, "waiting": 1, "ahead": 2, "behind": 3, "never_entered": 4, "crashed": 5, "no_state": 6}
ROLE_COLORS = ["#bdbdbd", "#64b5f6", "#81c784", "#ffb74d", "#e53935", "#8e24aa", "#eeeeee"]
MAX_CITED = 400


def available() -> str | None:
    """None when --html can run, else why not (checked before the analysis)."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        return "--html needs Plotly: pip install 'trainlog-debugger[html]'"
    return None


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _anchor(ev: Evidence) -> str:
    return "L-" + "".join(c if c.isalnum() else "-" for c in ev.cite())


def _secs(ev: Evidence | None) -> float | None:
    return seconds_of(ev.time.iso(), ignore_year=True) if ev is not None and ev.time is not None else None


def _ranks_by_node(inv) -> list[tuple[int, str]]:
    """(rank, node) ordered by node in natural order (`gpu-node-2` before `gpu-node-100`), then rank: ranks of one
    node sit together and, as schedulers place ranks, row i is rank i (sorted as strings, rank 2 sat on row 362 of
    1,024)."""
    from trainlog_debugger.tools.bundle.source import natural_key
    out = []
    for r, rs in inv.scan.ranks.items():
        node = (rs.nodes[0] if rs.nodes else None) or (inv.nccl.ranks[r].node if inv.nccl and r in inv.nccl.ranks
                                                       else None) or "?"
        out.append((r, node))
    first = {}
    for r, n in out:
        first[n] = min(first.get(n, r), r)
    return sorted(out, key=lambda x: (first[x[1]], natural_key(x[1]), x[0]))


def _rank_ticks(rows: list[tuple[int, str]], most: int = 40) -> tuple[list[float], list[str]]:
    """Y-axis ticks labelled by global rank: one per node with its rank range (`0-7 gpu-node-17`) while there are
    few nodes; else ranks at evenly spaced rows (`rank 512`), never bare row numbers."""
    from trainlog_debugger.tools.groups import rank_set
    nodes: dict[str, list[int]] = {}
    pos: dict[str, list[int]] = {}
    for i, (r, n) in enumerate(rows):
        nodes.setdefault(n, []).append(r)
        pos.setdefault(n, []).append(i)
    if len(nodes) <= most:
        return ([sum(pos[n]) / len(pos[n]) for n in nodes],
                [f"{rank_set(sorted(rs))}  {n}" if n != "?" else rank_set(sorted(rs)) for n, rs in nodes.items()])
    step = max(1, len(rows) // most)
    at = list(range(0, len(rows), step))
    return [float(i) for i in at], [f"rank {rows[i][0]}" for i in at]


def rank_time_figure(d: Diagnosis, inv):
    """Each rank as a line from its first catalogued line to where its log stops, ranks grouped by node; the
    trigger, the stuck collective's start and the culprit ranks marked; ranks that stopped early highlighted."""
    import plotly.graph_objects as go
    rows = _ranks_by_node(inv)
    t0s = [s for r, _ in rows if (s := _secs(inv.scan.ranks[r].first_match)) is not None]
    if not rows or not t0s:
        return None
    zero = min(t0s)
    culprits = set(d.culprit_ranks)
    early = {x["rank"] for x in inv.scan.silent_first}
    xs, ys, stops, hover, colors = [], [], [], [], []
    for i, (r, node) in enumerate(rows):
        rs = inv.scan.ranks[r]
        a = _secs(rs.first_match)
        b = _secs(rs.last_line) if _secs(rs.last_line) is not None else _secs(rs.last_match)
        last = rs.last_line or rs.last_match
        if a is not None and b is not None:
            xs += [a - zero, b - zero, None]
            ys += [i, i, None]
        at = b if b is not None else a
        # a rank with no timed line is still drawn (at 0, hollow): leaving it out would hide the rank that differs
        stops.append((at - zero if at is not None else 0.0, i))
        when = human_time(last.time.iso()) if last is not None and last.time is not None else "no timed line"
        hover.append(f"rank {r} on {_e(node)}<br>stops: {_e(when)}<br>"
                     + (f"{_e(last.cite())}: {_e(last.text.strip()[:120])}" if last is not None else ""))
        colors.append("#e53935" if r in culprits else "#fb8c00" if r in early else
                      "#1e88e5" if at is not None else "#9e9e9e")
    fig = go.Figure()
    fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", line={"color": "#90caf9", "width": 2}, hoverinfo="skip",
                               name="activity"))
    fig.add_trace(go.Scattergl(x=[s[0] for s in stops], y=[s[1] for s in stops], mode="markers",
                               marker={"color": colors, "size": 6 if len(rows) <= 256 else 3},
                               hovertext=hover, hoverinfo="text", name="where the log stops"))
    # culprits drawn again on top, large and labelled: at 1,024 ranks a 3-pixel red dot among blue ones is invisible
    marked = [(s, h, r) for (s, h, (r, _)) in zip(stops, hover, rows) if r in culprits][:16]
    if marked:
        fig.add_trace(go.Scatter(x=[m[0][0] for m in marked], y=[m[0][1] for m in marked], mode="markers+text",
                                 marker={"color": "#e53935", "size": 12, "symbol": "diamond",
                                         "line": {"color": "#000", "width": 1}},
                                 text=[f"rank {m[2]}" for m in marked], textposition="middle right",
                                 hovertext=[m[1] for m in marked], hoverinfo="text", name="culprit"))
    trig = d.chain[0].evidence[0] if d.chain and d.chain[0].evidence else None
    if (ts := _secs(trig)) is not None:
        fig.add_vline(x=ts - zero, line={"color": "#e53935", "width": 2}, annotation_text="trigger")
    for g in (inv.nccl.groups[:1] if inv.nccl else []):
        if g.start_time and (gs := seconds_of(g.start_time, ignore_year=True)) is not None:
            fig.add_vline(x=gs - zero, line={"color": "#6d4c41", "dash": "dash"},
                          annotation_text=f"stuck {g.op or 'collective'} started", annotation_position="bottom right")
    tickvals, ticktext = _rank_ticks(rows)
    fig.update_layout(title="rank × time: each rank's activity and where its log stops (red: culprit, orange: "
                            "stopped early)", height=min(1400, max(320, 8 * len(rows) if len(rows) <= 128 else
                                                                  2 * len(rows))),
                      xaxis_title="seconds after the first timed line",
                      yaxis={"tickvals": tickvals, "ticktext": ticktext, "title": "global rank (node)",
                             "autorange": "reversed"},
                      margin={"l": 170, "r": 20, "t": 50, "b": 40}, showlegend=False)
    return fig


def nccl_grid_figure(inv):
    """The collective role of every rank as a grid by GLOBAL rank: row k holds ranks k·W … k·W+W-1 (W the ranks per
    node where every node has as many, else 32), each cell one rank, its node in the hover; the row labelled with
    its first and last rank, integer columns. The culprit's cell is annotated."""
    import plotly.graph_objects as go
    rep = inv.nccl
    if rep is None or not rep.ranks or rep.verdict == "no_collective_state":
        return None
    node_of = dict(_ranks_by_node(inv))
    ranks = sorted(set(node_of) | set(rep.ranks))
    per_node = Counter(node_of.values())
    w = next(iter(per_node.values())) if per_node and len(set(per_node.values())) == 1 else 32
    w = max(1, min(w, 64))
    top = ranks[-1] if ranks else 0
    nrows = top // w + 1
    z = [[None] * w for _ in range(nrows)]
    text = [[""] * w for _ in range(nrows)]
    for r in ranks:
        role = rep.ranks[r].role if r in rep.ranks else "no_state"
        node = node_of.get(r) or (rep.ranks[r].node if r in rep.ranks else None) or "no log"
        z[r // w][r % w] = ROLE_CODES.get(role, 6)
        text[r // w][r % w] = f"rank {r} ({_e(node)}): {role}"
    n_codes = len(ROLE_COLORS)
    scale = []
    for i, c in enumerate(ROLE_COLORS):
        scale += [[i / n_codes, c], [(i + 1) / n_codes, c]]
    fig = go.Figure(go.Heatmap(z=z, text=text, hoverinfo="text", colorscale=scale, zmin=-0.5, zmax=n_codes - 0.5,
                               xgap=1, ygap=1, colorbar={"tickvals": list(range(n_codes)),
                                                         "ticktext": list(ROLE_CODES)}))
    step = max(1, nrows // 40)
    rows_at = list(range(0, nrows, step))
    for r in list(rep.culprits)[:8]:
        fig.add_annotation(x=r % w, y=r // w, text=f"rank {r}", showarrow=True, arrowhead=2, ax=30, ay=-20,
                           font={"color": "#b71c1c"})
    fig.update_layout(title=f"collective state of every rank ({rep.verdict}: {_e(rep.summary)[:90]})",
                      height=min(1200, max(260, 22 * nrows + 120)),
                      xaxis={"title": f"rank mod {w}", "tickmode": "linear", "dtick": 1 if w <= 16 else 4,
                             "tick0": 0},
                      yaxis={"tickvals": rows_at, "ticktext": [f"ranks {k * w}-{k * w + w - 1}" for k in rows_at],
                             "autorange": "reversed"},
                      margin={"l": 120, "r": 20, "t": 50, "b": 40})
    return fig


def steps_figure(inv):
    """Median step time per rank, outliers in red (only when the logs have step times)."""
    import statistics

    import plotly.graph_objects as go
    st = inv.steps
    if st is None or not st.series:
        return None
    med: dict[int, float] = {}
    for s in st.series:
        if s.rank is not None and s.metric == "step_ms" and len(s.ms):
            med[s.rank] = statistics.median(s.ms)
    if not med:
        return None
    out = {o.rank for o in st.outliers}
    ranks = sorted(med)
    fig = go.Figure(go.Scattergl(x=ranks, y=[med[r] for r in ranks], mode="markers",
                                 marker={"color": ["#e53935" if r in out else "#1e88e5" for r in ranks]},
                                 hovertext=[f"rank {r}: median {med[r]:.0f} ms" for r in ranks], hoverinfo="text"))
    fig.update_layout(title="median step time per rank (red: outlier)", xaxis_title="rank", yaxis_title="ms",
                      height=320, margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig


def to_html(d: Diagnosis, inv) -> str:
    """The whole page. `inv`: the Investigation the Diagnosis came from (the charts need every rank's state)."""
    figs = [f for f in (rank_time_figure(d, inv), nccl_grid_figure(inv), steps_figure(inv)) if f is not None]
    charts = []
    for i, f in enumerate(figs):
        charts.append(f.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False,
                                                                                    "responsive": True}))
    cited: dict[str, Evidence] = {}
    for f in d.chain:
        for e in f.evidence:
            cited.setdefault(_anchor(e), e)
    for t in d.timeline:
        cited.setdefault(_anchor(t.evidence), t.evidence)
    link = lambda e: f'<a href="#{_anchor(e)}"><code>{_e(e.cite())}</code></a>'  # noqa: E731
    chain = "".join(f"<li><b>{_e(f.role.value)}</b>: {_e(f.summary)} "
                    + " ".join(link(e) for e in f.evidence[:3]) + "</li>" for f in d.chain)
    timeline = "".join(f"<tr><td>{_e(human_time(t.time) if t.time else '-')}</td><td>"
                       f"{'-' if t.evidence.rank is None else t.evidence.rank}</td><td class=\"cite\">{link(t.evidence)}</td>"
                       f"<td>{_e(t.what)}</td></tr>" for t in d.timeline)
    lines = "".join(f'<tr id="{a}"><td class="cite"><code>{_e(e.cite())}</code></td><td><code>{_e(e.text)}</code>'
                    f'</td></tr>' for a, e in list(cited.items())[:MAX_CITED])
    recs = "".join(f"<li>{_e(r)}</li>" for r in d.recommendations)
    missing = "".join(f"<li>{_e(m)}</li>" for m in d.missing)
    alts = "".join(f"<li>{_e(a.category)}: {_e(a.summary)} — rejected: {_e(a.rejected_because)}</li>"
                   for a in d.alternatives)
    why = why_inconclusive(d)
    agent = ""
    if d.agent is not None:
        a = d.agent
        if a.outcome in ("offline", "api_error", "error", "interrupted"):
            agent = f"<h2>Agent</h2><p>{_e(a.notice)}</p>"
        else:
            claims = "".join(f"<li>{_e(c.statement)} <i>({'verified' if c.verified else 'removed: ' + _e(c.dropped_because)})</i></li>"
                             for c in a.claims)
            claims += "".join(f"<li>changed: {_e(ch)}</li>" for ch in a.changes)  # drops, refusals: said here too
            agent = (f"<h2>Agent ({_e(a.model)})</h2><p>{_e(a.narrative or '')}</p><ul>{claims}</ul>"
                     f"<p>{a.rounds} round(s); tokens {a.tokens_in}/{a.tokens_out}; cost ${a.cost_usd:.4f}</p>")
    status = d.status.value
    color = {"crashed": "#c62828", "hung": "#c62828", "inconclusive": "#6a1b9a", "completed": "#2e7d32"}.get(status,
                                                                                                          "#ef6c00")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(status)} — {_e(d.category)}</title>
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#212121}}
.verdict{{font-size:1.4em;font-weight:600;color:{color}}} code{{font-size:.9em}} table{{border-collapse:collapse}}
td,th{{border-bottom:1px solid #eee;padding:2px 8px;text-align:left;vertical-align:top}} .dim{{color:#757575}}
td.cite,td:first-child{{white-space:nowrap}} td code{{white-space:pre-wrap;word-break:break-all}}
td.cite code,a code{{white-space:nowrap;word-break:normal}}
</style></head><body>
<div class="verdict">{_e(verdict_line(d))}</div>
<p>{_e(d.headline)}</p>
{f'<p><b>why inconclusive:</b> {_e(why)}</p>' if why else ''}
<p class="dim">job: {_e(job(d))}{'; ' + _e(when(d)) if when(d) else ''}<br>{_e(ranks_line(d) or '')}<br>
culprit: {_e(culprit(d))}; restart: {_e(d.restart)}</p>
<h2>Chain (trigger first)</h2><ol>{chain}</ol>
<h2>Pictures</h2>{''.join(charts) or '<p class="dim">no timed per-rank lines to draw</p>'}
<h2>Recommendations</h2><ul>{recs}</ul>
{f'<h2>Missing evidence</h2><ul>{missing}</ul>' if missing else ''}
{f'<h2>Alternatives considered</h2><ul>{alts}</ul>' if alts else ''}
{agent}
<h2>Timeline</h2><table><tr><th>time</th><th>rank</th><th>file:line</th><th>event</th></tr>{timeline}</table>
<h2>Cited lines</h2><table>{lines}</table>
<p class="dim">{_e(verdict_line(d))} — written by trainlog-debugger; this page needs no network.</p>
</body></html>
"""
