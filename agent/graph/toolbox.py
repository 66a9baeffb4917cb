"""The agent's tools: bounded, read-only views of one bundle and of the deterministic reports made from it.

Why these and no others: the protocol needs every rank at once (overview, where each rank stops, grep grouped by
rank with the ranks that did NOT match), the collective state of every rank, step times, the storage side, the
timeline and the rank diff, and the raw lines around any `file:line`. Nothing here runs a shell, writes a file or
reaches the network: each tool is a function of the bundle already opened and of the reports already made.

Every tool returns one `ToolResult` (status ok / no_data / error, the parameters echoed, the data, what was cut).
What the model sees is that result as JSON, secrets redacted (tools/redact.py), capped to `max_tokens` counted with
tiktoken, with "showing X of Y" when cut. The lines whose `file:line` survive in what was sent are recorded as shown:
the verifier accepts a citation only of a line the model was actually shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trainlog_debugger.agent.llm.tokens import cap
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import ranks_str

MAX_TOOL_TOKENS = 3000  # per tool result
MAX_GREP_RANKS = 40     # ranks listed with their lines; the rest are counted
MAX_LINES_PER_RANK = 3
MAX_WINDOW = 60
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# a group that holds a quantifier and is itself quantified: `(\w+\s?)*`, `(a|aa)+` (catastrophic backtracking)
_NESTED_QUANT = re.compile(r"\((?:[^()\\]|\\.)*(?:[*+]|\{\d*,?\d*\})(?:[^()\\]|\\.)*\)(?:[*+]|\{\d*,\d*\})")


@dataclass
class ToolResult:
    tool: str
    status: str  # ok | no_data | error
    params: dict[str, Any]
    data: Any = None
    cut: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)  # the raw lines this result quotes (before the cap)

    def payload(self) -> dict:
        return {"tool": self.tool, "status": self.status, "params": self.params, "data": self.data, "cut": self.cut}


def _ev(e: Evidence) -> dict:
    out = {"at": e.cite(), "text": e.text}
    if e.rank is not None:
        out["rank"] = e.rank
    if e.time is not None:
        out["time"] = e.time.iso()
    return out


class Toolbox:
    """The tools over one open bundle and its Investigation (tools.pipeline.run). `redact`: text → text applied to
    everything the model sees (tools.redact.Redactor.redact)."""

    NAMES = ("overview", "where_ranks_stop", "grep", "read_lines", "nccl_state", "step_times", "storage", "timeline",
             "rank_diff", "explain_line")

    def __init__(self, bundle, investigation, *, redact=lambda s: s, unmask=lambda s: s,
                 max_tokens: int = MAX_TOOL_TOKENS):
        self.bundle = bundle
        self.inv = investigation
        self.redact = redact
        self.unmask = unmask  # the model's view back to the bundle's names (file paths that hold a host name)
        self.max_tokens = max_tokens
        self.sources = {s.rel: s for s in bundle.sources}

    # -- what the model sees ---------------------------------------------------------------------------------------
    def scrub(self, value):
        """Every string the model will see, cleaned one value at a time BEFORE it is encoded or shortened: ANSI
        colours dropped (they hide a name from the patterns), secrets redacted on the raw text (JSON would turn a
        tab into `\\t` and defeat them), hosts masked when asked."""
        if isinstance(value, str):
            return self.redact(_ANSI.sub("", value))
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value

    def render(self, res: ToolResult) -> tuple[str, list[Evidence]]:
        """(the text sent to the model, the lines it shows). Scrubbed value by value, then capped by tokens; a line
        counts as shown only if its `file:line` AND the start of its text are still there after the cap."""
        try:
            text = json.dumps(self.scrub(res.payload()), ensure_ascii=False, default=str)
        except Exception as e:  # a result that does not encode is an error result, never an exception
            text = json.dumps({"tool": res.tool, "status": "error", "data": f"{type(e).__name__}: {e}"})
        kept, n, total = cap(text, self.max_tokens)
        if n < total:
            kept += f"\n[showing {n} of {total} tokens of this result: ask a narrower question to see the rest]"
        shown = []
        for e in res.evidence:
            head = json.dumps(self.scrub(e.text.strip()), ensure_ascii=False)[1:41].rstrip("\\")
            if json.dumps(self.scrub(e.cite()), ensure_ascii=False) in kept and head in kept:
                shown.append(e)
        return kept, shown

    def call(self, name: str, args: dict) -> ToolResult:
        """Run a tool by name; bad arguments and failures come back as a status=error result, never an exception.
        String arguments are unmasked first: the model names files and hosts as it saw them."""
        args = {k: (self.unmask(v) if isinstance(v, str) else v) for k, v in args.items()}
        if name not in self.NAMES:
            return ToolResult(name, "error", args, f"no tool named {name!r}; tools: {', '.join(self.NAMES)}")
        try:
            return getattr(self, name)(**args)
        except TypeError as e:
            return ToolResult(name, "error", args, f"bad arguments: {e}")
        except Exception as e:  # a tool must never end the investigation
            return ToolResult(name, "error", args, f"{type(e).__name__}: {e}")

    # -- the tools ---------------------------------------------------------------------------------------------------
    def overview(self) -> ToolResult:
        """Ranks seen / expected / missing, nodes, sources by kind, and the deterministic answer."""
        scan, d = self.inv.scan, self.inv.diagnosis
        cov = scan.coverage
        kinds: dict[str, int] = {}
        for f in scan.files:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        nodes = sorted({n for rs in scan.ranks.values() for n in rs.nodes})
        data = {
            "ranks_seen": len(cov.seen_ranks), "ranks_expected": cov.expected_ranks,
            "expected_from": cov.expected_from, "missing_ranks": ranks_str(cov.missing_ranks) or None,
            "nodes": nodes[:64], "nodes_total": len(nodes), "files": len(scan.files), "files_by_kind": kinds,
            "files_without_rank": cov.files_without_rank,
            "deterministic": {"status": d.status.value, "category": d.category, "culprit_ranks": d.culprit_ranks,
                              "culprit_nodes": d.culprit_nodes, "confidence": d.confidence, "headline": d.headline},
            "job": d.job.model_dump(exclude_none=True),
        }
        cut = [f"showing 64 of {len(nodes)} nodes"] if len(nodes) > 64 else []
        return ToolResult("overview", "ok", {}, data, cut)

    def where_ranks_stop(self, limit: int = 64) -> ToolResult:
        """Every rank's last line, earliest first: a rank that stopped early, or mid-sentence, stands out."""
        limit = max(1, min(int(limit), 512))
        rows = sorted((rs.last_line for rs in self.inv.scan.ranks.values() if rs.last_line is not None),
                      key=lambda e: (e.time is None, e.time.iso() if e.time else "", e.rank or 0))
        if not rows:
            return ToolResult("where_ranks_stop", "no_data", {"limit": limit}, "no line in the bundle names a rank")
        shown = rows[:limit]
        cut = [f"showing {len(shown)} of {len(rows)} ranks (earliest first)"] if len(rows) > limit else []
        return ToolResult("where_ranks_stop", "ok", {"limit": limit}, [_ev(e) for e in shown], cut, shown)

    def grep(self, pattern: str, ignore_case: bool = False) -> ToolResult:
        """A Python regex over every line of every rank, grouped by rank, with the ranks that have no match."""
        from trainlog_debugger.tools.scan.grep import grep_bundle
        params = {"pattern": pattern, "ignore_case": bool(ignore_case)}
        if not isinstance(pattern, str) or not pattern or len(pattern) > 300:
            return ToolResult("grep", "error", params, "pattern must be a non-empty regex of at most 300 characters")
        try:
            re.compile(pattern)
        except re.error as e:
            return ToolResult("grep", "error", params, f"not a valid Python regex: {e}")
        if _NESTED_QUANT.search(pattern):
            return ToolResult("grep", "error", params, "nested quantifiers such as (\\w+\\s?)* can take hours on a "
                              "large bundle: use a simpler pattern (e.g. a literal phrase, or .*? between literals)")
        g = grep_bundle(self.bundle, pattern, ignore_case=bool(ignore_case))
        if not g.total:
            return ToolResult("grep", "no_data", params, {"matches": 0, "ranks_seen": g.seen_ranks})
        shown: list[Evidence] = []
        by_rank = []
        for rm in g.ranks[:MAX_GREP_RANKS]:
            lines = (rm.lines or [x for x in (rm.first, rm.last) if x])[:MAX_LINES_PER_RANK]
            shown += lines
            by_rank.append({"rank": rm.rank, "count": rm.count, "lines": [_ev(e) for e in lines]})
        unranked = g.unranked[:MAX_LINES_PER_RANK * 2]
        shown += unranked
        data = {"matches": g.total, "files_with_matches": g.files_with_matches, "by_rank": by_rank,
                "ranks_without_match": ranks_str(g.ranks_without_match) or None,
                "unranked": [_ev(e) for e in unranked], "unranked_count": g.unranked_count,
                "missing_ranks": ranks_str(g.missing_ranks) or None}
        cut = []
        if len(g.ranks) > MAX_GREP_RANKS:
            cut.append(f"showing {MAX_GREP_RANKS} of {len(g.ranks)} ranks with matches")
        if g.unranked_count > len(unranked):
            cut.append(f"showing {len(unranked)} of {g.unranked_count} lines without a rank")
        return ToolResult("grep", "ok", params, data, cut + list(g.notes), shown)

    def read_lines(self, file: str, line: int, before: int = 15, after: int = 15) -> ToolResult:
        """The raw lines around `file:line` (at most 60)."""
        from trainlog_debugger.tools.bundle.reread import read_window
        params = {"file": file, "line": line, "before": before, "after": after}
        src = self.sources.get(file)
        if src is None:
            near = [r for r in self.sources if r.endswith(file.split("/")[-1])][:5]
            return ToolResult("read_lines", "error", params, f"no file {file!r} in the bundle"
                              + (f"; did you mean {', '.join(near)}" if near else ""))
        if getattr(src, "kind", None) == "fr_dump":
            return ToolResult("read_lines", "error", params, "a flight-recorder dump is not text; use nccl_state")
        w = read_window(src, int(line), int(before), int(after), max_lines=MAX_WINDOW)
        if not w.lines:
            return ToolResult("read_lines", "no_data", params, f"{file} has no line {line}", w.cut)
        evs = [Evidence(file=file, line=n, text=t) for n, t in w.lines]
        return ToolResult("read_lines", "ok", params, [_ev(e) for e in evs], w.cut, evs)

    def nccl_state(self) -> ToolResult:
        """The collective state of every rank: the verdict, each process group's stuck collective, rank roles."""
        rep = self.inv.nccl
        if rep is None or rep.verdict == "no_collective_state":
            return ToolResult("nccl_state", "no_data", {}, "no rank logged a collective timeout or watchdog state")
        shown: list[Evidence] = []
        roles = []
        for row in rep.rows[:40]:
            ev = row.get("evidence")
            if isinstance(ev, Evidence):
                shown.append(ev)
            roles.append({k: (_ev(v) if isinstance(v, Evidence) else v) for k, v in row.items()})
        groups = [{"pg": g.pg, "desc": g.desc, "ranks": g.ranks, "stuck_seq": g.stuck_seq, "op": g.op,
                   "timeout_ms": g.timeout_ms, "start": g.start_time,
                   "roles": {k: ranks_str(v) for k, v in g.roles.items()}} for g in rep.groups[:16]]
        for r in rep.culprits[:8]:
            shown += rep.ranks[r].cited(2)
        data = {"verdict": rep.verdict, "summary": rep.summary, "culprits": rep.culprits, "suspects": rep.suspects,
                "missing_ranks": ranks_str(rep.missing_ranks) or None, "groups": groups, "rank_rows": roles,
                "culprit_lines": [_ev(e) for r in rep.culprits[:8] for e in rep.ranks[r].cited(2)], "notes": rep.notes}
        cut = [f"showing 40 of {len(rep.rows)} rank rows"] if len(rep.rows) > 40 else []
        return ToolResult("nccl_state", "ok", {}, data, cut, shown)

    def step_times(self) -> ToolResult:
        """Step-time outliers and regressions per rank (a second pass over the bytes when not made yet)."""
        if self.inv.steps is None:
            from trainlog_debugger.tools.steps.analyze import scan_steps
            self.inv.steps = scan_steps(self.bundle)
        st = self.inv.steps
        if not st.series:
            return ToolResult("step_times", "no_data", {}, "no step/iteration timing lines found")
        data = {"outliers": [{"rank": o.rank, "node": o.node, "metric": o.metric, "median": o.value,
                              "group_median": o.group_median, "slower_by": f"{o.gap:+.0%}", "group": o.group}
                             for o in st.outliers[:20]],
                "regressions": [str(r) for r in st.regressions[:5]], "bound": str(st.bound), "notes": st.notes[:5]}
        return ToolResult("step_times", "ok", {}, data)

    def storage(self) -> ToolResult:
        """The AIStore side: stats deltas, pressured targets, errors, and the chain to the workers."""
        a = self.inv.ais
        if a is None:
            return ToolResult("storage", "no_data", {}, "the bundle holds no storage daemon logs (AIStore)")
        shown = [e for f in a.chain for e in f.evidence][:20]
        data = {"pressured": a.pressured, "window": a.window, "main_jump": a.main_jump, "comparison": a.comparison,
                "chain": [{"summary": f.summary, "lines": [_ev(e) for e in f.evidence[:3]]} for f in a.chain[:8]],
                "gaps": a.gaps[:5]}
        return ToolResult("storage", "ok", {}, data, [], shown)

    def timeline(self) -> ToolResult:
        """The deterministic timeline: trigger, cascade and context events with their lines."""
        tl = self.inv.diagnosis.timeline
        if not tl:
            return ToolResult("timeline", "no_data", {}, "no timed events")
        evs = [t.evidence for t in tl]
        data = [{"time": t.time, "what": t.what, "role": t.role.value, **_ev(t.evidence)} for t in tl]
        return ToolResult("timeline", "ok", {}, data, [], evs)

    def rank_diff(self) -> ToolResult:
        """Line templates that only a few ranks printed, or that only a few ranks lack."""
        if self.inv.diff is None:
            if len(self.inv.scan.coverage.seen_ranks) < 3:
                return ToolResult("rank_diff", "no_data", {}, "fewer than 3 ranks have logs: nothing to compare")
            from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
            self.inv.diff = diff_bundle(self.bundle)
        d = self.inv.diff
        rows, shown = [], []
        for td in (d.only[:15] + d.missing[:15]):
            ex = [td.example] + ([td.missing_example] if td.missing_example else [])
            shown += ex
            rows.append({"kind": td.kind, "ranks": ranks_str(td.ranks), "present_in": td.present_in,
                         "template": td.template, "example": _ev(td.example),
                         **({"missing_example": _ev(td.missing_example)} if td.missing_example else {})})
        if not rows:
            return ToolResult("rank_diff", "no_data", {}, f"no template differs between the {len(d.ranks)} ranks")
        return ToolResult("rank_diff", "ok", {}, rows, d.notes[:5], shown)

    def explain_line(self, text: str | None = None, file: str | None = None, line: int | None = None) -> ToolResult:
        """The ecosystem's own reading of one line (tools/sources/messages) and the lexicon's (tools/rules/meaning),
        so that the model looks a message up instead of guessing what it means. A line of the bundle is read from
        disk (and counts as shown); a `text` the model typed is only looked up."""
        from trainlog_debugger.tools.lines.attribution import strip_prefixes
        from trainlog_debugger.tools.sources.messages import catalog as messages

        params = {k: v for k, v in (("text", text), ("file", file), ("line", line)) if v is not None}
        shown: list[Evidence] = []
        if file is not None or line is not None:
            if file is None or line is None:
                return ToolResult("explain_line", "error", params, "give both file and line, or text")
            got = self.read_lines(file, line, before=0, after=0)
            if got.status != "ok" or not got.evidence:
                return ToolResult("explain_line", got.status, params, got.data)
            shown = [e for e in got.evidence if e.line == line][:1]
            text = shown[0].text if shown else None
        if not text or not isinstance(text, str):
            return ToolResult("explain_line", "error", params, "give `text` (a log line) or `file` and `line`")
        text = text[:4096]
        found = messages.match(text)[:5]
        words = messages.read_by_words(strip_prefixes(text))
        data = {**({"at": shown[0].cite()} if shown else {}), "line": text, "upstream": [{"table": m.table, "source": m.cite(), "template": m.template,
                                            "category": m.category, "role": m.role, "meaning": m.meaning,
                                            "action": m.action, **({"name": m.name} if m.name else {})} for m in found],
                "lexicon": ({"category": words[0], "words": words[1], "why": words[2]} if words else None)}
        if not found and not words:
            return ToolResult("explain_line", "no_data", params, {"line": text, "upstream": [], "lexicon": None},
                              ["no upstream table and no lexicon row knows this line"], shown)
        return ToolResult("explain_line", "ok", params, data, [], shown)
