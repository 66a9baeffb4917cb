"""`debugger eval PATH... [--json] [--mode offline|baseline|llm] [--baseline FILE] [--write-baseline FILE] [--tags T]
[--limit N] [--scripted careful,liar,lazy,forever] [--record]`

For each case (eval.cases): copy its bundle to a neutral temp path, diagnose it from the logs alone, score it
(eval.score), then print per case, per tag and totals. In offline mode the regex baseline (eval.baseline) runs on
the same copy and its totals are shown beside the real diagnosis's: the diagnosis must beat it on every dimension.
`--baseline FILE` compares with a stored `--json` report and lists every case that got worse (exit code 1).

Exit codes: 0 fine, 1 a regression against --baseline or a case whose diagnosis (or baseline) raised, 2 bad input
(no case, bad truth.yaml, unreadable baseline report, a mode that is not available). A case whose bundle is unusable
(BundleError: nothing to read) is scored as failed and does not change the exit code; any other exception in a case
(a bug, a module that fails to import) is listed on stderr and makes the exit code 1, so that a run in which the
diagnosis never ran cannot pass. In llm mode a case whose agent did not answer (api_error, no_answer, budget, error)
fails the same way: its deterministic verdict, left in place, would otherwise score as the agent's (eval/llm.py).

Cases run in up to 2 forked processes (the project VM has 2 cores); each diagnosis itself runs single-process.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from trainlog_debugger.eval.cases import Case, CaseError, discover, filter_tags, neutral_bundle
from trainlog_debugger.eval.score import beats, failed_scores, got_view, per_origin, per_tag, regressions, score, totals

MODES = ("offline", "baseline", "llm")
# llm mode: the agent's diagnose function (handed in by agent/cli/eval.py: eval does not import the agent), where
# its cassettes are read (and written with record). Set by main() before the cases run; forked workers inherit it.
LLM = {"diagnose": None, "cassettes": None, "record": False, "scripted": None}
CASSETTES = Path(__file__).resolve().parent / "cassettes"
MAX_JOBS = 2
ROOT = Path(__file__).resolve().parent.parent


class EvalError(Exception):
    """Bad input to the eval: one line, exit code 2."""


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


UNUSABLE_BUNDLE = "BundleError: "  # how _one_line starts for tools.bundle.open.BundleError: the case's data, not a bug


def crashes(rep: dict) -> list[str]:
    """'case-id: error' (', baseline' after the id for the regex baseline's row) for every row of the report whose
    diagnosis raised anything but a BundleError, or whose agent did not answer (', model NAME' after the id in
    llm mode): exit code 1 when not empty."""
    out = []
    for c in rep.get("cases", []):
        model = f", model {c['model']}" if c.get("model") else ""
        for who, row in ((model, c), (", baseline", c.get("baseline"))):
            e = (row or {}).get("error")
            if e and not e.startswith(UNUSABLE_BUNDLE):
                out.append(f"{c.get('id')}{who}: {e}")
    return out


def git_commit(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it), or (None, None) outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                            capture_output=True, text=True, timeout=30)
        return head.stdout.strip() or None, (bool(st.stdout.strip()) if st.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):
        return None, None


def _investigate(bundle, scans: list):
    """tools.pipeline.run, keeping the catalog scan it made (in `scans`) so that the regex baseline, which needs
    exactly that scan (same bundle, same catalog), does not read every file a second time."""
    from trainlog_debugger.tools.pipeline import run
    inv = run(bundle, workers=1)
    scans.append(inv.scan)
    return inv.diagnosis


def _diagnose(mode: str, bundle, scans: list, case: Case | None = None, out: dict | None = None):
    if mode == "offline":
        return _investigate(bundle, scans)
    if mode == "baseline":
        from trainlog_debugger.eval.baseline import baseline_diagnosis, baseline_from_scan
        if scans:
            return baseline_from_scan(scans[0])
        return baseline_diagnosis(bundle, workers=1)
    if mode == "llm":
        if LLM["diagnose"] is None:
            raise EvalError("llm mode runs through `debugger eval --mode llm` (it needs the agent)")
        return _agent(bundle, case, scans, out if out is not None else {})
    raise EvalError(f"unknown mode {mode!r}")


def _agent(bundle, case: Case, scans: list, out: dict):
    """The agent on one case (eval/llm.py): scripted on loopback, or its cassette replayed (or recorded). Leaves in
    `out` the deterministic Diagnosis ("facts") and the model's last submitted answer ("before")."""
    from trainlog_debugger.eval import llm, scripted
    where = Path(LLM["cassettes"] or CASSETTES)
    if LLM["scripted"]:
        with llm.serve(scripted.MODELS[LLM["scripted"]]) as s:
            got = LLM["diagnose"](bundle, case.id, where, False, base_url=s.url)
        out["before"] = llm.submitted(s.replies)
    else:
        got = LLM["diagnose"](bundle, case.id, where, bool(LLM["record"]))
        name = case.id.strip("/").replace("/", "__")  # agent/llm/cassettes.py's case_name (eval imports no agent)
        tape = next((p for p in (where / f"{name}.yaml", where / f"{name}.handwritten.yaml") if p.exists()), None)
        leaked = llm.secrets_in(tape, os.environ.get("ANTHROPIC_API_KEY")) if tape and LLM["record"] else []
        if leaked:
            tape.unlink()
            raise EvalError(f"the recording of {case.id} held {', '.join(leaked)}: it was deleted")
        out["before"] = llm.submitted(llm.cassette_replies(tape)) if tape is not None else None
    diag, scan, *rest = got
    out["facts"] = rest[0] if rest else None
    scans.append(scan)
    return diag


def _scored(case: Case, mode: str, bundle, scans: list) -> dict:
    t0 = time.perf_counter()
    extra: dict = {}
    try:
        diag = _diagnose(mode, bundle, scans, case, extra)
    except EvalError:
        raise
    except Exception as e:  # one case's failure is that case's score, never the whole run's
        err = _one_line(e)
        return {"got": None, "scores": failed_scores(case.truth, err), "runtime_s": round(time.perf_counter() - t0, 3),
                "error": err}
    rt = time.perf_counter() - t0
    if mode == "baseline" and scans:
        rt += scans[0].seconds  # the scan it shared with the real diagnosis
    if mode == "llm":
        return _agent_row(case, diag, bundle, rt, extra)
    return {"got": got_view(diag), "scores": score(case.truth, diag, bundle), "runtime_s": round(rt, 3), "error": None}


def _agent_row(case: Case, diag, bundle, rt: float, extra: dict) -> dict:
    """An llm-mode row: scored on the agent's verified verdict, with its outcome, the model that ran, and the
    verdicts before and after verification beside the deterministic one. A case whose agent did not answer fails
    (error set, every dimension failed): the deterministic verdict left in its place proves nothing of the agent."""
    from trainlog_debugger.eval import llm
    a = diag.agent
    facts = extra.get("facts") or diag
    if a is not None and a.outcome == llm.ANSWERED:
        diag = llm.with_verdict(diag, a.verdict)
    err = llm.no_answer(a)
    out = {"got": got_view(diag), "scores": failed_scores(case.truth, err) if err else score(case.truth, diag, bundle),
           "runtime_s": round(rt, 3), "error": err, "model": LLM["scripted"] or "cassette",
           "agent_outcome": a.outcome if a is not None else None,
           "agent_notice": a.notice if a is not None else None,
           "verdicts": llm.verdicts(case.truth, facts, diag, extra.get("before"), bundle)}
    if a is not None:
        out.update(tokens=a.tokens_in + a.tokens_out, cost_usd=a.cost_usd, rounds=a.rounds,
                   tool_calls=len(a.tool_calls), changes=list(a.changes),
                   unconfirmed=getattr(a, "unconfirmed", None))  # the model's view the verifier kept aside
    return out


def evaluate_case(case: Case, mode: str = "offline", *, with_baseline: bool | None = None) -> dict:
    """One case's row: the truth in brief, what the diagnosis said, its scores and runtime (and in offline mode
    the baseline's, under "baseline"). The diagnosis sees only `<tmp>/bundle-XXXX/bundle`, without truth.yaml."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    if with_baseline is None:
        with_baseline = mode == "offline"
    t = case.truth
    row: dict = {"id": case.id, "tags": list(t.tags), "control": t.is_control, "split": t.split,
                 "expected": {"category": t.category, "category_accept": list(t.category_accept),
                              "culprit_ranks": list(t.culprit_ranks),
                              "culprit_nodes": list(t.culprit_nodes), "first_failure_time": t.first_failure_time}}
    with neutral_bundle(case.path) as root:
        t0 = time.perf_counter()
        try:
            bundle = open_bundle(str(root))
        except Exception as e:
            err = _one_line(e)
            fail = {"got": None, "scores": failed_scores(t, err), "runtime_s": round(time.perf_counter() - t0, 3),
                    "error": err}
            row.update(fail)
            if with_baseline:
                row["baseline"] = dict(fail)
            return row
        opening = time.perf_counter() - t0  # archives are extracted here: part of either's runtime
        with bundle:
            scans: list = []
            row.update(_scored(case, mode, bundle, scans))
            row["runtime_s"] = round(row["runtime_s"] + opening, 3)
            if with_baseline:
                b = _scored(case, "baseline", bundle, scans)
                row["baseline"] = b | {"runtime_s": round(b["runtime_s"] + opening, 3)}
    return row


def _job(args: tuple[Case, str, bool]) -> dict:
    case, mode, with_baseline = args
    return evaluate_case(case, mode, with_baseline=with_baseline)


def run_cases(cases: list[Case], mode: str = "offline", *, jobs: int | None = None,
              with_baseline: bool | None = None) -> list[dict]:
    """Rows in case order; cases spread over `jobs` forked processes (default up to MAX_JOBS)."""
    if mode not in MODES:
        raise EvalError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    wb = (mode == "offline") if with_baseline is None else with_baseline
    jobs = max(1, jobs or min(MAX_JOBS, os.cpu_count() or 1))
    tasks = [(c, mode, wb) for c in cases]
    if jobs == 1 or len(cases) < 2 or "fork" not in mp.get_all_start_methods():
        return [_job(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=min(jobs, len(cases)), mp_context=mp.get_context("fork")) as ex:
        return list(ex.map(_job, tasks))


def build_report(paths: Sequence[str | Path], rows: list[dict], mode: str, tags: Sequence[str] = ()) -> dict:
    commit, dirty = git_commit()
    rep = {"tool": "debugger eval", "commit": commit, "dirty": dirty, "mode": mode,
           "paths": [str(p) for p in paths], "tags": list(tags), "cases": rows,
           "totals": totals(rows), "per_origin": per_origin(rows), "per_tag": per_tag(rows), "baseline_totals": None}
    if any("baseline" in r for r in rows):
        rep["baseline_totals"] = totals(rows, "baseline")
        rep["baseline_per_tag"] = per_tag(rows, "baseline")
        rep["baseline_per_origin"] = per_origin(rows, "baseline")
        rep["beats_baseline"] = beats(rep["totals"], rep["baseline_totals"])
    return rep


def evaluate(paths: Sequence[str | Path], mode: str = "offline", *, tags: Sequence[str] | None = None,
             jobs: int | None = None, scripted: Sequence[str] = (), limit: int | None = None) -> dict:
    """Discover, run and score: the whole report (raises EvalError / CaseError on bad input). llm mode runs each
    scripted model in turn over the cases (rows carry `model`), and the report's `llm_effect` says per model
    what the verifier changed (eval/llm.py)."""
    if mode not in MODES:
        raise EvalError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    if scripted and mode != "llm":
        raise EvalError("--scripted runs the agent: it needs --mode llm")
    cases = filter_tags(discover(paths), tags)
    if not cases:
        raise EvalError(f"no case has the tag(s) {', '.join(tags or ())}")
    if limit:
        from trainlog_debugger.eval.llm import spread
        cases = spread(cases, limit)
    t0 = time.perf_counter()
    rows = []
    for name in scripted or [None]:
        LLM["scripted"] = name  # forked workers inherit it
        rows += run_cases(cases, mode, jobs=jobs)
    LLM["scripted"] = None
    rep = build_report(paths, rows, mode, tags or ())
    if mode == "llm":
        from trainlog_debugger.eval.llm import effect
        rep["llm_effect"] = effect(rows)
    rep["wall_s"] = round(time.perf_counter() - t0, 3)
    return rep


def load_report(path: str | Path) -> dict:
    try:
        rep = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise EvalError(f"cannot read baseline report {path} ({_one_line(e)})") from None
    if not isinstance(rep, dict) or not isinstance(rep.get("cases"), list):
        raise EvalError(f"{path} is not an eval report (written by `debugger eval --json`)")
    return rep


def write_report(rep: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(rep, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def main(paths: Sequence[str | Path], *, json_: bool = False, mode: str = "offline",
         baseline: str | Path | None = None, tags: Sequence[str] | None = None,
         write_baseline: str | Path | None = None, jobs: int | None = None, console=None,
         cassettes: str | Path | None = None, record: bool = False, llm=None, scripted: str | None = None,
         limit: int | None = None) -> int:
    """The `debugger eval` command: returns the exit code: 2 bad input (one line on stderr), 1 a regression
    against `baseline` or a case whose diagnosis raised (listed on stderr, see `crashes`), else 0."""
    LLM.update(cassettes=cassettes, record=record, diagnose=llm)
    try:
        names: list[str] = []
        if scripted:
            from trainlog_debugger.eval.scripted import get
            try:
                names = get(scripted)
            except ValueError as e:
                raise EvalError(str(e)) from None
            if record:
                raise EvalError("--record records the real API; --scripted runs the scripted models: not both")
        if limit is not None and limit < 1:
            raise EvalError("--limit must be at least 1")
        if mode == "llm" and record and not os.environ.get("ANTHROPIC_API_KEY"):
            raise EvalError("--record needs ANTHROPIC_API_KEY")
        stored = load_report(baseline) if baseline else None
        if stored is not None and stored.get("mode", mode) != mode:
            raise EvalError(f"{baseline} was written in mode {stored.get('mode')}, this run is mode {mode}")
        rep = evaluate(paths, mode, tags=tags, jobs=jobs, scripted=names, limit=limit)
    except (EvalError, CaseError) as e:
        sys.stderr.write(f"error: {' '.join(str(e).split())}\n")
        return 2
    regs = None
    if stored is not None:
        regs = regressions(stored, rep, tags)
        rep["regressions"] = regs
        rep["compared_with"] = {"file": str(baseline), "commit": stored.get("commit")}
    if write_baseline:
        out = {k: v for k, v in rep.items() if k not in ("regressions", "compared_with")}
        write_report(out, write_baseline)
    if json_:
        sys.stdout.write(json.dumps(rep, indent=2, ensure_ascii=False) + "\n")
    else:
        from trainlog_debugger.eval.report import render_eval
        if console is None:
            from rich.console import Console
            console = Console(highlight=False, soft_wrap=False)
            if not console.is_terminal:  # pipes and files get wide lines, as in agent/cli/options.py
                console = Console(highlight=False, soft_wrap=False, width=200)
        render_eval(rep, console)
    crashed = crashes(rep)
    if crashed:
        more = f"\n  ... and {len(crashed) - 10} more" if len(crashed) > 10 else ""
        what = "raised, or the agent did not answer" if mode == "llm" else "raised, not scorable"
        sys.stderr.write(f"error: {len(crashed)} case run(s) {what} (exit code 1):\n  "
                         + "\n  ".join(crashed[:10]) + more + "\n")
    return 1 if regs or crashed else 0


def _cli(argv: list[str]) -> int:  # `python -m trainlog_debugger.eval.run`: the same command without the `debugger` CLI
    import argparse
    ap = argparse.ArgumentParser(prog="python -m trainlog_debugger.eval.run", description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", action="store_true", dest="json_")
    ap.add_argument("--mode", default="offline", choices=MODES)
    ap.add_argument("--baseline")
    ap.add_argument("--write-baseline")
    ap.add_argument("--tags", action="append")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--limit", type=int)
    a = ap.parse_args(argv)
    return main(a.paths, json_=a.json_, mode=a.mode, baseline=a.baseline, tags=a.tags,
                write_baseline=a.write_baseline, jobs=a.jobs, limit=a.limit)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_cli(sys.argv[1:]))
