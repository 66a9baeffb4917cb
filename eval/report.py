"""`debugger eval` → rich terminal: one row per case, one per tag, the totals per dimension beside the regex
baseline's, and every regression against a stored report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainlog_debugger.eval.score import DIMENSIONS

OK, BAD, DIM = "green", "bold red", "dim"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _flag(ok: bool | None) -> Text:
    if ok is None:
        return Text("-", style=DIM)
    return Text("pass", style=OK) if ok else Text("FAIL", style=BAD)


def _time_cell(s: dict) -> Text:
    if s.get("time") is False and s.get("time_delta_s") is not None:
        return Text(f"FAIL Δ{s['time_delta_s']:.0f}s", style=BAD)
    return _flag(s.get("time"))


def _culprits(d: dict | None) -> str:
    if not d:
        return "-"
    parts = [str(r) for r in d.get("culprit_ranks") or []] + list(d.get("culprit_nodes") or [])
    if len(parts) > 4:
        parts = parts[:4] + [f"+{len(parts) - 4}"]
    return ",".join(parts) or "-"


def _score_cell(x: float | None) -> Text:
    if x is None:
        return Text("-", style=DIM)
    return Text(f"{x:.2f}", style=OK if x >= 1 - 1e-9 else BAD if x == 0 else "yellow")


def _case_table(rep: dict) -> Table:
    side = rep.get("baseline_totals") is not None
    t = Table(title=f"cases ({rep['mode']})", title_justify="left")
    t.add_column("case", no_wrap=True, overflow="ellipsis", max_width=40)
    t.add_column("tags", no_wrap=True, overflow="ellipsis", max_width=16)
    t.add_column("category (expected → got)", no_wrap=True, overflow="ellipsis", max_width=40, min_width=10)
    t.add_column("culprit (expected → got)", no_wrap=True, overflow="ellipsis", max_width=30)
    t.add_column("culprit", justify="right", min_width=7)
    t.add_column("time", justify="left", min_width=4)
    t.add_column("grounding", justify="right", no_wrap=True, min_width=9)
    t.add_column("runtime", justify="right", no_wrap=True, min_width=7)
    if side:
        t.add_column("baseline got", no_wrap=True, overflow="ellipsis", max_width=18, min_width=8)
        t.add_column("b.culprit", justify="right", min_width=7)
    agent = rep["mode"] == "llm"
    if agent:
        t.add_column("model: agent outcome", no_wrap=True, overflow="ellipsis", max_width=28)
    for r in rep["cases"]:
        s, got = r["scores"], r.get("got")
        exp = r["expected"]["category"]
        if r.get("error"):
            cat = Text(f"{exp} → error: {r['error']}", style=BAD)
        elif s["category"]:
            cat = Text(exp, style=OK)
        else:
            cat = Text(f"{exp} → {got['category']}", style=BAD)
        g = (Text("-", style=BAD) if s["grounding"] is None else
             Text(f"{s['grounding']:.2f}/{s['cited']}", style=OK if s["grounding"] >= 1 else BAD))
        name = Text(r["id"], style="bold" if r.get("control") else "")
        cells = [name, Text(",".join(t for t in r.get("tags", []) if t != "generated")), cat,
                 Text(f"{_culprits(r['expected'])} → {_culprits(got)}"), _score_cell(s["culprit"]),
                 _time_cell(s), g, Text(f"{r.get('runtime_s', 0):.2f}s")]
        if side:
            b = r.get("baseline") or {}
            bs = b.get("scores") or {}
            bcat = (b.get("got") or {}).get("category", "error")
            cells += [Text(bcat, style=OK if bs.get("category") else BAD), _score_cell(bs.get("culprit"))]
        if agent:
            oc = r.get("agent_outcome") or "-"
            cells.append(Text(f"{r.get('model') or '-'}: {oc}", style=OK if oc == "answered" else BAD))
        t.add_row(*cells)
    return t


def _effect_table(rep: dict) -> Table:
    """Per model: the verdict before verification (what it submitted) and after (what the agent's section holds),
    against the truth, beside the deterministic verdict on the same cases."""
    t = Table(title="what the verifier changed, per model (category accuracy / culprit mean / false all-clear)",
              title_justify="left")
    for col in ("model", "cases", "outcomes", "deterministic", "before verification", "after verification",
                "kept aside"):
        t.add_column(col, justify="left" if col in ("model", "outcomes") else "right")
    for model, m in rep["llm_effect"].items():
        def cell(side: str) -> Text:
            v = m[side]
            return Text(f"{_pct(v['category_accuracy'])} / {_num(v['culprit_mean'])} / {v['false_all_clear']}")
        oc = ", ".join(f"{k} {n}" for k, n in sorted(m["outcomes"].items()))
        t.add_row(Text(model, style="bold"), Text(str(m["cases"])),
                  Text(oc, style=OK if set(m["outcomes"]) <= {"answered"} else BAD),
                  cell("deterministic"), cell("before"), cell("after"), Text(str(m.get("unconfirmed", 0))))
    t.caption = ("before: the model's last submit_answer, scored as submitted (no answer scores 0); after: the "
                 "verified verdict; kept aside: cases where the model's verdict is shown only as its unconfirmed "
                 "view; a case whose agent did not answer fails the run")
    return t


def _tag_table(rep: dict) -> Table:
    side = rep.get("baseline_per_tag") is not None
    t = Table(title="per tag", title_justify="left")
    for col in ("tag", "cases", "category", "culprit", "time", "grounding min", "control"):
        t.add_column(col, justify="left" if col == "tag" else "right")
    if side:
        t.add_column("baseline category", justify="right")
        t.add_column("baseline culprit", justify="right")
    for tag, s in rep["per_tag"].items():
        cells = [tag, str(s["cases"]), _pct(s["category_accuracy"]), _num(s["culprit_mean"]),
                 _pct(s["time_accuracy"]), _num(s["grounding_min"]), _pct(s["control_pass_rate"])]
        if side:
            b = rep["baseline_per_tag"].get(tag, {})
            cells += [_pct(b.get("category_accuracy")), _num(b.get("culprit_mean"))]
        t.add_row(*(Text(c) for c in cells))
    return t


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    return _num(v) if key.startswith(("culprit", "grounding")) else _pct(v)


def _totals_table(rep: dict) -> Table:
    tot, base = rep["totals"], rep.get("baseline_totals")
    t = Table(title="totals" + (" (the diagnosis must beat the regex baseline on every dimension)" if base else ""),
              title_justify="left")
    t.add_column("dimension")
    t.add_column(rep["mode"], justify="right")
    if base:
        t.add_column("baseline", justify="right")
        t.add_column("vs baseline", justify="center")
    t.add_column(f"scored on ({rep['mode']})", justify="left")
    counts = {"culprit_mean": f"{tot['culprit_scored']} cases ({tot['culprit_skipped']} with no known culprit)",
              "time_accuracy": f"{tot['time_scored']} cases ({tot.get('time_skipped_no_truth', 0)} with no time in the "
                               f"truth, {tot.get('time_skipped_no_trigger', 0)} with no time on the trigger line)",
              "control_pass_rate": f"{tot['controls']} control cases",
              "category_accuracy": f"{tot['cases']} cases" + (f", {tot['errors']} errors" if tot["errors"] else "")}
    for key, label in DIMENSIONS:
        cells = [Text(label), Text(_fmt(key, tot.get(key)))]
        if base:
            ok = rep.get("beats_baseline", {}).get(key)
            cells += [Text(_fmt(key, base.get(key))), _mark(ok)]
        cells.append(Text(counts.get(key, ""), style=DIM))
        t.add_row(*cells)
    rt = [Text("runtime (sum)"), Text(f"{tot['runtime_total_s']:.1f}s (max {_num(tot['runtime_max_s'])}s)")]
    if base:
        rt += [Text(f"{base['runtime_total_s']:.1f}s"), Text("")]
    t.add_row(*rt, Text(f"wall {rep['wall_s']:.1f}s for the whole run" if rep.get("wall_s") is not None else "",
                        style=DIM))
    if tot.get("tokens") is not None:
        t.add_row(Text("tokens / cost"), Text(f"{tot['tokens']} / ${tot['cost_usd']:.2f}"), *([Text("")] * (3 if base else 1)))
    return t


def _origin_table(rep: dict) -> Table:
    """Real incidents first (the headline), then lab runs, then generated cases: never one blended figure."""
    base = rep.get("baseline_per_origin") or {}
    t = Table(title="by origin (real incidents of the test split are the headline)", title_justify="left")
    t.add_column("origin")
    t.add_column("cases", justify="right")
    for _, label in DIMENSIONS:
        t.add_column(label, justify="right")
    t.add_column("false all-clear", justify="right")
    t.add_column("no fault found", justify="right")
    t.add_column("refused", justify="right")
    for o, s in rep["per_origin"].items():
        cells = [Text(o, style="bold" if o in ("real test", "real") else ""), Text(str(s["cases"]))]
        for key, _ in DIMENSIONS:
            b = base.get(o, {}).get(key)
            cells.append(Text(_fmt(key, s.get(key)) + (f" ({_fmt(key, b)})" if b is not None else "")))
        for key in ("false_all_clear", "no_fault_found", "refused"):
            n = s.get(key) or 0
            cells.append(Text(str(n), style=(BAD if key != "no_fault_found" else "yellow") if n else OK))
        t.add_row(*cells)
    if base:
        t.caption = "(regex baseline in parentheses)"
    return t


def _mark(verdict: str | None) -> Text:
    if verdict is None:
        return Text("-", style=DIM)
    return Text(verdict, style={"better": OK, "tie": "yellow"}.get(verdict, BAD))


def render_eval(rep: dict, console: Console) -> None:
    commit = (rep.get("commit") or "no git")[:12] + (" (modified)" if rep.get("dirty") else "")
    console.print(Text.assemble(("eval ", "bold"), f"{', '.join(rep['paths'])}: {len(rep['cases'])} cases, "
                                f"mode {rep['mode']}, commit {commit}"))
    console.print(_case_table(rep))
    if rep["per_tag"]:
        console.print(_tag_table(rep))
    if rep.get("per_origin"):
        console.print(_origin_table(rep))
    console.print(_totals_table(rep))
    if rep.get("llm_effect"):
        console.print(_effect_table(rep))
    bad = [r for r in rep["cases"] if not r.get("error") and r["scores"]["grounding"] < 1]
    if bad:
        console.print(Text(f"{len(bad)} case(s) cite lines that are not in the bundle verbatim:", style=BAD))
        for r in bad[:10]:
            console.print(Text(f"  {r['id']}: " + "; ".join(r["scores"].get("grounding_problems", [])[:3])))
    if "regressions" in rep:
        regs = rep["regressions"]
        src = rep.get("compared_with", {})
        where = f"{src.get('file')} (commit {(src.get('commit') or '?')[:12]})"
        if not regs:
            console.print(Text(f"no regression against {where}", style=OK))
        else:
            console.print(Text(f"{len(regs)} regression(s) against {where}:", style=BAD))
            for g in regs:
                console.print(Text(f"  {g['id']}: {g['dimension']} {g['was']} → {g['now']}"))
