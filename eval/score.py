"""Scoring one diagnosis against one truth, the totals over many, and regressions against a stored report.

Dimensions (each case, then totals):
- category: exact match with the truth's category.
- culprit: see `culprit_score` (0 when a true culprit is missed, else precision; skipped with no known culprit).
- time: the trigger's time within ±60 s of the truth's first_failure_time; skipped when either is missing (the
  totals count both kinds of skip apart: a trigger line with no time, where the truth has one, is a weakness that
  the accuracy alone would hide).
- grounding: the fraction of cited lines that exist verbatim in the bundle (re-read from the files). Must be 1.0.
- control: on a control case (tools `Truth.is_control`), a predicted category that differs from the truth is a
  false alarm, i.e. a failed control.
- all-clear: on a case where something failed, an answer of `completed` is a false all-clear, the one mistake a tool
  for 3 AM must never make; counted. `no fault found` (category `none`, status `inconclusive`: no rank printed an
  error-level line, and nothing proves a normal end) is counted apart: it is the honest answer to a paste that shows
  no failure, and a miss everywhere else.
- refused: the bundle was rejected as unusable (no training-job logs recognised); counted.
A real incident's `category_accept` labels count as right (a second label TAXONOMY genuinely allows).
Runtime (and, in LLM mode, tokens and cost) is reported, never scored.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from statistics import fmean

from trainlog_debugger.tools.model import Diagnosis, Evidence

TIME_TOLERANCE_S = 60.0
UNTAGGED = "(untagged)"
EPS = 1e-9


# -- culprits -----------------------------------------------------------------------------------------------
def culprit_set(ranks: Iterable[int] = (), nodes: Iterable[str] = ()) -> set[str]:
    """`rank:N` for each rank and `node:x` for each node (node names compared case-insensitively)."""
    return {f"rank:{int(r)}" for r in ranks} | {f"node:{str(n).strip().lower()}" for n in nodes if str(n).strip()}


def culprit_score(true_ranks: Iterable[int], true_nodes: Iterable[str], got_ranks: Iterable[int],
                  got_nodes: Iterable[str]) -> float | None:
    """How well the blamed ranks/nodes match the true culprits, in [0, 1]; None (skipped) with no known culprit.

    truth = {rank:N for culprit_ranks} ∪ {node:x for culprit_nodes}; predicted likewise from the diagnosis.
    - truth empty → None: the case does not count for this dimension.
    - any true culprit missing from the prediction → 0.0: a missed culprit is a wrong answer, however many
      others were blamed.
    - else precision |truth| / |predicted|: blaming every rank of a 1024-rank job to catch the one culprit
      scores ~0.001, blaming exactly the culprits scores 1.0.
    Predicted entries of a kind the truth does not state are not counted: a truth that names only a node says
    nothing about ranks (and vice versa), so a diagnosis that also names the rank on that node is not penalised
    for being more specific.
    """
    true_ranks, true_nodes = list(true_ranks), list(true_nodes)
    truth = culprit_set(true_ranks, true_nodes)
    if not truth:
        return None
    got = culprit_set(got_ranks if true_ranks else (), got_nodes if true_nodes else ())
    if not truth <= got:
        return 0.0
    return len(truth) / len(got)


# -- first failure time -------------------------------------------------------------------------------------
_ISO = re.compile(r"^\s*(?:(?:(?P<y>\d{4})|-)-(?P<mo>\d{2})-(?P<d>\d{2}))?[T ]?"
                  r"(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?\s*"
                  r"(?P<z>Z|[+-]\d{2}:?\d{2})?(?:\[[^\]]*\])?\s*$")


def parse_time(text: str | None) -> dict | None:
    """The parts an ISO-ish time states: year (None when unknown, as in '--11-05T12:04:45'), month/day (None with
    no date, 'T12:04:45'), seconds of the day, UTC offset in minutes (None when unknown). None if unparseable
    (e.g. 'uptime+12.5s')."""
    if not text:
        return None
    m = _ISO.match(str(text))
    if not m:
        return None
    frac = float("0." + m["f"]) if m["f"] else 0.0
    z = m["z"]
    off = None
    if z == "Z":
        off = 0
    elif z:
        zz = z.replace(":", "")
        off = (1 if zz[0] == "+" else -1) * (int(zz[1:3]) * 60 + int(zz[3:5]))
    return {"year": int(m["y"]) if m["y"] else None, "month": int(m["mo"]) if m["mo"] else None,
            "day": int(m["d"]) if m["d"] else None,
            "sec": int(m["h"]) * 3600 + int(m["mi"]) * 60 + int(m["s"] or 0) + frac, "offset": off}


def time_delta(truth: str | None, got: str | None) -> float | None:
    """|got - truth| in seconds; None when either is missing or unparseable. A side without a year is compared on
    month/day/time only (the other's year is ignored); a side without a date on the time of day only (modulo 24 h);
    UTC offsets are applied only when both sides state one."""
    a, b = parse_time(truth), parse_time(got)
    if a is None or b is None:
        return None
    shift = 0.0
    if a["offset"] is not None and b["offset"] is not None:
        shift = (b["offset"] - a["offset"]) * 60.0  # local = utc + offset: subtract to compare in UTC
    if a["month"] is None or b["month"] is None:
        d = abs((b["sec"] - shift) - a["sec"]) % 86400.0
        return min(d, 86400.0 - d)
    year_known = a["year"] is not None and b["year"] is not None
    ya, yb = (a["year"], b["year"]) if year_known else (2000, 2000)  # 2000 is a leap year: Feb 29 parses
    try:
        da = dt.datetime(ya, a["month"], a["day"]) + dt.timedelta(seconds=a["sec"])
        db = dt.datetime(yb, b["month"], b["day"]) + dt.timedelta(seconds=b["sec"] - shift)
    except ValueError:
        return None
    return abs((db - da).total_seconds())


def trigger_time(diag: Diagnosis) -> str | None:
    """The time of the diagnosis's trigger: chain[0].evidence[0].time's ISO form (None when it has none)."""
    if not diag.chain:
        return None
    t = diag.chain[0].evidence[0].time
    return t.iso() if t else None


# -- grounding ----------------------------------------------------------------------------------------------
def cited(diag: Diagnosis) -> list[Evidence]:
    """Every cited line of a diagnosis (chain, timeline, alternatives, job, coverage), once each."""
    out, seen = [], set()
    for e in diag.evidence() + list(diag.coverage.expected_evidence):
        k = (e.file, e.line, e.text)
        if k not in seen:
            seen.add(k)
            out.append(e)
    return out


def grounding(diag: Diagnosis, bundle) -> tuple[float, int, list[str]]:
    """(fraction of cited lines found verbatim in the bundle, number cited, problems), re-read by the one re-reader
    (tools.bundle.reread, as `ask` does before it shows anything). A diagnosis that cites nothing grounds
    trivially (1.0 of 0)."""
    from trainlog_debugger.tools.bundle.reread import check_citations
    evs = cited(diag)
    if not evs:
        return 1.0, 0, []
    problems = check_citations(evs, {s.rel: s for s in bundle.sources})
    bad_files = {p.file for p in problems if p.line is None}
    bad = {(p.file, p.line, p.cited) for p in problems}
    ok = sum(1 for e in evs if e.file not in bad_files and (e.file, e.line, e.text) not in bad)
    return ok / len(evs), len(evs), sorted(dict.fromkeys(str(p) for p in problems))


# -- one case -----------------------------------------------------------------------------------------------
def got_view(diag: Diagnosis) -> dict:
    return {"status": diag.status.value, "category": diag.category, "culprit_ranks": list(diag.culprit_ranks),
            "culprit_nodes": list(diag.culprit_nodes), "trigger_time": trigger_time(diag),
            "confidence": diag.confidence, "verified": diag.verified, "headline": diag.headline}


def score(truth, diag: Diagnosis, bundle) -> dict:
    """Scores of one diagnosis (`truth` is an eval.cases.Truth)."""
    g, n, problems = grounding(diag, bundle)
    delta = time_delta(truth.first_failure_time, trigger_time(diag))
    category_ok = truth.category_ok(diag.category)
    failing = truth.category != "none" and not truth.is_control
    return {
        "category": category_ok,
        "culprit": culprit_score(truth.culprit_ranks, truth.culprit_nodes, diag.culprit_ranks, diag.culprit_nodes),
        "time": None if delta is None else delta <= TIME_TOLERANCE_S,
        "time_delta_s": None if delta is None else round(delta, 3),
        "time_skipped": None if delta is not None else "no truth time" if not truth.first_failure_time
        else "no trigger time",
        "grounding": round(g, 6),
        "cited": n,
        "grounding_problems": problems[:10],
        "control": category_ok if truth.is_control else None,
        "all_clear": diag.status.value == "completed" if failing else None,
        "no_fault": (diag.category == "none" and diag.status.value != "completed") if failing else None,
        "refused": False,
    }


def failed_scores(truth, error: str = "") -> dict:
    """The scores of a case whose diagnosis raised: every scored dimension fails. Grounding (the share of cited lines
    that re-read) fails for a crash; a refusal (`BundleError`: no training-job logs recognised) cites no line, so it
    has no grounding to score: it is counted as `refused` and fails category, culprit and time."""
    refused = error.startswith("BundleError: ")
    return {"category": False, "culprit": 0.0 if culprit_set(truth.culprit_ranks, truth.culprit_nodes) else None,
            "time": False if truth.first_failure_time else None, "time_delta_s": None,
            "time_skipped": None if truth.first_failure_time else "no truth time",
            "grounding": None if refused else 0.0,
            "cited": 0, "grounding_problems": [], "control": False if truth.is_control else None,
            "all_clear": None, "no_fault": None, "refused": refused}


# -- totals -------------------------------------------------------------------------------------------------
def _mean(xs: list) -> float | None:
    return round(fmean(xs), 4) if xs else None


def totals(rows: list[dict], key: str | None = None) -> dict:
    """Totals per dimension over case rows; with `key` ('baseline') over `row[key]` of each row instead, i.e. the
    baseline's scores, runtime and error (rows without it are left out)."""
    rows = [r if key is None else r.get(key) for r in rows]
    rows = [r for r in rows if r is not None and r.get("scores") is not None]
    sc = [r["scores"] for r in rows]
    cul = [s["culprit"] for s in sc if s["culprit"] is not None]
    tim = [s["time"] for s in sc if s["time"] is not None]
    gro = [s["grounding"] for s in sc if s["grounding"] is not None]
    ctl = [s["control"] for s in sc if s["control"] is not None]
    rt = [r.get("runtime_s") or 0.0 for r in rows]
    return {
        "cases": len(rows),
        "errors": sum(1 for r in rows if r.get("error")),
        "category_accuracy": _mean([float(s["category"]) for s in sc]),
        "culprit_mean": _mean(cul), "culprit_scored": len(cul), "culprit_skipped": len(sc) - len(cul),
        "time_accuracy": _mean([float(t) for t in tim]), "time_scored": len(tim), "time_skipped": len(sc) - len(tim),
        # of the skipped: the truth states no time, or it does but the diagnosis's trigger line has none
        "time_skipped_no_truth": sum(1 for s in sc if s["time"] is None and s.get("time_skipped") != "no trigger time"),
        "time_skipped_no_trigger": sum(1 for s in sc if s.get("time_skipped") == "no trigger time"),
        "grounding_min": round(min(gro), 4) if gro else None, "grounding_mean": _mean(gro),
        "control_pass_rate": _mean([float(c) for c in ctl]), "controls": len(ctl),
        "false_all_clear": sum(1 for s in sc if s.get("all_clear")),
        "no_fault_found": sum(1 for s in sc if s.get("no_fault")),
        "refused": sum(1 for s in sc if s.get("refused")),
        "runtime_total_s": round(sum(rt), 3), "runtime_max_s": round(max(rt), 3) if rt else None,
        "tokens": None, "cost_usd": None,
    }


def per_tag(rows: list[dict], key: str | None = None) -> dict[str, dict]:
    """Totals per tag (a case counts for each of its tags), tags in name order, then the cases with no tag."""
    tags = sorted({t for r in rows for t in r.get("tags", [])})
    out = {t: totals([r for r in rows if t in r.get("tags", [])], key) for t in tags}
    untagged = [r for r in rows if not r.get("tags")]
    if untagged:
        out[UNTAGGED] = totals(untagged, key)
    return out


#: Where a case comes from, by its tags: a generator's output, a run in our lab, or (no such tag) a real incident
#: someone else posted, by its split. Real test comes first: it is the only set nobody read while writing rules.
ORIGINS = ("real test", "real dev", "real", "lab", "generated")


def origin(tags, split: str = "") -> str:
    tags = set(tags or ())
    if "generated" in tags:
        return "generated"
    if "lab" in tags:
        return "lab"
    return f"real {split}" if split in ("dev", "test") else "real"


def per_origin(rows: list[dict], key: str | None = None) -> dict[str, dict]:
    """Totals per origin (real test, real dev, real without a split, lab, generated), only the origins present."""
    out = {}
    for o in ORIGINS:
        sel = [r for r in rows if origin(r.get("tags"), r.get("split", "")) == o]
        if sel:
            out[o] = totals(sel, key)
    return out


#: (totals key, label): the scored dimensions, higher is better, in display order. Against the baseline a tie can
#: be the best possible (grounding is 1.0 for both when all is well; a healthy control is easy for both).
DIMENSIONS = (("category_accuracy", "category"), ("culprit_mean", "culprit"), ("time_accuracy", "time ±60 s"),
              ("grounding_min", "grounding min"), ("grounding_mean", "grounding mean"),
              ("control_pass_rate", "control pass"))


def beats(ours: dict, base: dict) -> dict[str, str | None]:
    """Per dimension: 'better', 'tie' or 'worse' for `ours` against `base` (None when either has no score)."""
    out: dict[str, str | None] = {}
    for k, _ in DIMENSIONS:
        a, b = ours.get(k), base.get(k)
        out[k] = None if a is None or b is None else "better" if a > b + EPS else "tie" if a >= b - EPS else "worse"
    return out


# -- regressions against a stored report --------------------------------------------------------------------
def regressions(stored: dict, current: dict, tags: Iterable[str] | None = None) -> list[dict]:
    """Every case that got worse than in `stored` (a report as written by `--json`): a dimension that went down
    (category or time or control pass → fail, culprit score or grounding lower, a new error) or a case of the
    stored report that is missing from the current run. Cases new in the current run are fine. With `tags`, only
    stored cases carrying one of them are expected in the current run."""
    want = set(tags or ())
    now = {c["id"]: c for c in current.get("cases", [])}
    out: list[dict] = []
    for old in stored.get("cases", []):
        cid = old.get("id")
        if want and not want & set(old.get("tags", [])):
            continue
        new = now.get(cid)
        if new is None:
            out.append({"id": cid, "dimension": "case", "was": "present", "now": "missing"})
            continue
        so, sn = old.get("scores") or {}, new.get("scores") or {}
        for dim in ("category", "time", "control"):
            if so.get(dim) is True and sn.get(dim) is not True:
                out.append({"id": cid, "dimension": dim, "was": "pass", "now": "fail" if sn.get(dim) is False
                            else "not scored"})
        for dim in ("culprit", "grounding"):
            a, b = so.get(dim), sn.get(dim)
            if a is not None and (b is None or b < a - EPS):
                out.append({"id": cid, "dimension": dim, "was": a, "now": b})
        if new.get("error") and not old.get("error"):
            out.append({"id": cid, "dimension": "error", "was": None, "now": new["error"]})
    return out
