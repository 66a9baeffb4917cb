"""The agent's tools over one bundle: what each is declared as for the model, how a call is run, what the model sees.

A tool is one plain function in agent/graph/tools.py, registered in its TOOLS list; nothing else names it. Its
signature and its docstring (Google style: a description, then `Args:`) are its schema, made by langchain_core's
`StructuredTool.from_function(parse_docstring=True)`. Why the library and not a schema written beside the function:
a written schema is a second declaration that drifts (a parameter renamed in one place only), and the same object
that writes the schema also validates the model's arguments, so a wrong type comes back as an error result naming
the field. The first parameter, the Toolbox, is marked `InjectedToolArg`: the model never sees it.

Nothing here runs a shell, writes a file or reaches the network: every tool is a function of the bundle already
opened and of the reports already made, and reads a report only through its to_json() (`report`), the same
public JSON `debugger <command> --json` prints, so the agent never depends on a report's internals.

What the model sees of a result is its payload as JSON, secrets redacted (tools/redact.py), fitted to
`max_tokens` counted with tiktoken (`fit`: the heaviest lists lose their tails first, each cut said in `cut`, so the
answer-carrying fields written first survive; the text is cut only as the last resort). Every call ends within
caps.TOOL_SECONDS, and a call that runs the model's regex runs in a child killed at caps.REGEX_SECONDS (`regex`). The lines whose `file:line` survive in what was
sent are recorded as shown: the verifier accepts a citation only of a line the model was actually shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Annotated, Any, Callable, Sequence

from langchain_core.tools import InjectedToolArg, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.bounded import Timeout, in_child, in_thread
from trainlog_debugger.agent.graph.result import ToolResult, error
from trainlog_debugger.agent.llm.tokens import cap, count
from trainlog_debugger.tools.groups import per_rank_listing
from trainlog_debugger.tools.sources import resolve
from trainlog_debugger.tools.lines.ansi import strip_ansi

SHOWN_HEAD = 40  # characters of a line's text (as JSON) that must survive the cap for the line to count as shown


@dataclass(frozen=True)
class Declared:
    """One tool as declared by its function: the function, the model of the arguments the model may give (the
    Toolbox left out), and the tool as the Messages API declares one ({"name", "description", "input_schema"})."""

    fn: Callable[..., ToolResult]
    args: type[BaseModel]
    spec: dict

    @property
    def name(self) -> str:
        return self.spec["name"]


@lru_cache(maxsize=None)
def declare(fn: Callable[..., ToolResult]) -> Declared:
    """The tool `fn` declares: its name, the description and parameter docs from its docstring, the parameters
    from its signature. A parameter the docstring's `Args:` does not describe raises here, at the first use: the
    model would have only its name to go by. The docstring's line breaks are wrapping, not meaning: the
    description is one line, as a hand-written one would be."""
    t = StructuredTool.from_function(fn, parse_docstring=True)
    args = t.tool_call_schema
    if not (isinstance(args, type) and issubclass(args, BaseModel)):  # pragma: no cover - langchain_core's choice
        raise TypeError(f"tool {fn.__name__}: no pydantic model of its arguments")
    bare = [k for k, f in args.model_fields.items() if not f.description]
    if bare or not t.description:
        raise ValueError(f"tool {fn.__name__}: the docstring describes " + (
            f"no parameter {', '.join(bare)} (add it under `Args:`)" if bare else "nothing"))
    f = convert_to_openai_tool(t)["function"]
    return Declared(fn, args, {"name": f["name"], "description": " ".join(f["description"].split()),
                               "input_schema": f["parameters"]})


def schema(fn: Callable[..., ToolResult]) -> dict:
    return declare(fn).spec


class Toolbox:
    """The tools over one open bundle and its Investigation (tools.pipeline.run). `redact`: text → text applied to
    everything the model sees (tools.redact.Redactor.redact); `unmask`: the model's names back to the bundle's;
    `tools`: the registry (agent/graph/tools.py TOOLS unless a test gives its own)."""

    def __init__(self, bundle, investigation, *, redact=lambda s: s, unmask=lambda s: s,
                 max_tokens: int = caps.TOOL_RESULT_TOKENS, tools: Sequence[Callable[..., ToolResult]] | None = None):
        if tools is None:  # imported here: tools.py imports this module for the Toolbox type its functions take
            from trainlog_debugger.agent.graph.tools import TOOLS
            tools = TOOLS
        self.bundle = bundle
        self.inv = investigation
        self.redact = redact
        self.unmask = unmask
        self.max_tokens = max_tokens
        self.sources = {s.rel: s for s in bundle.sources}
        self.tools = {declare(fn).name: declare(fn) for fn in tools}  # name → Declared, in the registry's order
        self._json: dict[str, dict | None] = {}

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict]:
        return [d.spec for d in self.tools.values()]

    # -- the reports, through their public JSON ----------------------------------------------------------------------
    def report(self, name: str) -> dict | None:
        """The to_json() of the Investigation's report `name` (a field of tools.pipeline.Investigation: scan, nccl,
        fr, ais, steps, diff, stacks, hardware), made once per toolbox; None when the bundle has none. steps and diff are read
        from the bundle on first use when the pipeline did not need them (another pass over the bytes, paid only
        if the model asks). The one place the agent touches a report object, and only to take its JSON."""
        if name not in self._json:
            rep = getattr(self.inv, name)
            if rep is None and name in _ON_DEMAND:
                rep = _ON_DEMAND[name](self.bundle)
            if name in _LISTS:  # a list of records, whose JSON its own package writes
                self._json[name] = resolve(_LISTS[name])(rep) if rep else None
            else:
                # the per-rank listing beside the groups (schema_version 2's `--per-rank`): the tools page and
                # range it themselves, and a rank's own facts (its files, counts, node) are looked up in it
                with per_rank_listing():
                    self._json[name] = None if rep is None else rep.to_json()
        return self._json[name]

    def hosts(self) -> list[str]:
        """Every node name the scan attributed a rank or a file to: what --redact-hosts masks."""
        sj = self.report("scan") or {}
        found = {n for rs in sj.get("ranks", {}).values() for n in rs.get("nodes", ())}
        found |= {n for f in sj.get("files", ()) for n in f.get("nodes", ()) if n}
        return sorted(found)

    # -- a call ------------------------------------------------------------------------------------------------------
    def call(self, name: Any, args: Any) -> ToolResult:
        """Run a tool by name; bad arguments, failures and overruns come back as a status=error result naming what
        to fix, never as an exception: a malformed `tool_use` (a list or a string where the arguments' object
        belongs, a name that is no tool, a field of the wrong type) costs the model one round, not the run.
        String arguments are unmasked first: the model names files and hosts as it saw them. Every call ends
        within caps.TOOL_SECONDS (agent/graph/bounded.py)."""
        name = name if isinstance(name, str) else repr(name)
        t = self.tools.get(name)
        if not isinstance(args, dict):
            res, used = error(f"bad arguments: the input must be a JSON object of named arguments, not "
                              f"{type(args).__name__} {str(args)[:80]!r}"), {}
        elif t is None:
            res, used = error(f"no tool named {name[:80]!r}; tools: {', '.join(self.tools)}"), args
        else:
            args = {k: (self.unmask(v) if isinstance(v, str) else v) for k, v in args.items()}
            res, used = self._run(t, args)
        return replace(res, tool=name, params=used)

    def _run(self, d: Declared, args: dict) -> tuple[ToolResult, dict]:
        """(the result, the arguments as used: validated, defaults filled in, None left out)."""
        fields = d.args.model_fields
        unknown = sorted(str(k) for k in set(args) - set(fields))
        if unknown:
            return error(f"bad arguments: {', '.join(unknown)} not among {', '.join(fields) or 'none'}"), args
        try:
            parsed = {k: getattr(d.args.model_validate(args), k) for k in fields}
        except ValidationError as e:
            return error("bad arguments: " + "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
                                                       for x in e.errors()[:5])), args
        used = {k: v for k, v in parsed.items() if v is not None}
        try:
            return in_thread(lambda: d.fn(self, **parsed), caps.TOOL_SECONDS), used
        except Timeout as e:
            return error(f"{d.name}: {e}; ask a narrower question (a rank, a time range, a simpler pattern)"), used
        except Exception as e:  # a tool must never end the investigation
            return error(f"{type(e).__name__}: {e}"), used

    def regex(self, fn: Callable[..., ToolResult], *args: Any) -> ToolResult:
        """fn(*args) (a tool's body that runs the model's regex) in a child process killed after
        caps.REGEX_SECONDS: the stdlib `re` has no timeout and holds the GIL while it backtracks
        (agent/graph/bounded.py). An overrun is an error result that says why and what to try instead."""
        try:
            return in_child(fn, *args, seconds=caps.REGEX_SECONDS)
        except Timeout as e:
            return error(f"the pattern did not finish: {e}. A regex with nested or overlapping repetition "
                         "(`(a+)+`, `(\\w+\\s?)*`, `(a|aa)*`) backtracks without end on long lines: use a literal "
                         "phrase, or `.*?` between literals")
        except RuntimeError as e:
            return error(str(e))

    # -- what the model sees -----------------------------------------------------------------------------------------
    def scrub(self, value: Any) -> Any:
        """Every string the model will see, cleaned one value at a time BEFORE it is encoded or shortened: ANSI
        colours dropped (they hide a name from the patterns), secrets redacted on the raw text (JSON would turn a
        tab into `\\t` and defeat them), hosts masked when asked."""
        if isinstance(value, str):
            return self.redact(strip_ansi(value))
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value

    def render(self, res: ToolResult) -> tuple[str, dict[str, str]]:
        """(the text sent to the model, "file:line" → text of each line it shows). Scrubbed value by value, then
        fitted to `max_tokens` (`fit`: the longest lists shortened, each cut said); the text cut is the last
        resort. A line counts as shown only if its `file:line` AND the start of its text are still there."""
        try:
            text = fit(self.scrub(res.payload()), self.max_tokens, "offset" in res.params)
        except Exception as e:  # a result that does not encode is an error result, never an exception
            text = json.dumps({"tool": res.tool, "status": "error", "data": f"{type(e).__name__}: {e}"})
        kept, n, total = cap(text, self.max_tokens)
        if n < total:
            kept += f"\n[showing {n} of {total} tokens of this result: ask a narrower question to see the rest]"
        shown = {}
        for ln in res.lines:
            head = json.dumps(self.scrub(ln["text"].strip()), ensure_ascii=False)[1:SHOWN_HEAD + 1].rstrip("\\")
            if json.dumps(self.scrub(ln["at"]), ensure_ascii=False) in kept and head in kept:
                shown[ln["at"]] = self.scrub(ln["text"])  # what the model saw; the history keeps it (issue 30)
        return kept, shown


Box = Annotated[Toolbox, InjectedToolArg]  # a tool's first parameter: the toolbox, injected, never shown to the model


def fit(payload: dict, max_tokens: int, pages: bool = False) -> str:
    """The payload as JSON within `max_tokens` where shortening its lists can make it so: the list that weighs
    most in `data` loses items from its end (as many as the overflow needs, by its average item), again until the
    whole fits, and each shortened list is said in `cut` (which comes before `data`), with how to see the rest.
    Why lists and not the text's end: a result's answer-carrying fields are its scalars and rank ranges, written
    first; its bulk is lists of rows and lines. Cutting the text dropped whatever came last, which at 1,024 ranks
    was grep's ranks with no match."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    total = count(text)
    if total <= max_tokens:
        return text
    cut: dict[str, tuple[int, int]] = {}
    for _ in range(64):
        found = _heaviest(payload.get("data"), "data")
        if found is None:
            break
        where, items = found
        weight = len(json.dumps(items, ensure_ascii=False, default=str)) * total / max(1, len(text))
        drop = max(1, min(len(items) - 1, int((total - max_tokens) * 1.1 / (weight / len(items))) + 1))
        cut[where] = (len(items) - drop, cut.get(where, (0, len(items)))[1])
        del items[len(items) - drop:]
        payload["cut"] = [c for c in payload.get("cut", []) if not c.startswith("[token cap]")] + [
            f"[token cap] showing {k} of {n} items of {w}" + ("; page with offset/limit" if pages else
                                                              "; ask a narrower question") for w, (k, n) in cut.items()]
        text = json.dumps(payload, ensure_ascii=False, default=str)
        total = count(text)
        if total <= max_tokens:
            break
    return text


def _heaviest(value: Any, where: str) -> tuple[str, list] | None:
    """(path, list) of the list of 2+ items whose JSON is longest anywhere inside `value`."""
    best: tuple[int, str, list] | None = None
    stack = [(where, value)]
    while stack:
        w, v = stack.pop()
        if isinstance(v, dict):
            stack += [(f"{w}.{k}", x) for k, x in v.items()]
        elif isinstance(v, list):
            if len(v) > 1:
                size = len(json.dumps(v, ensure_ascii=False, default=str))
                if best is None or size > best[0]:
                    best = (size, w, v)
            stack += [(f"{w}[]", x) for x in v if isinstance(x, (dict, list))]
    return None if best is None else (best[1], best[2])


def _steps(bundle):
    from trainlog_debugger.tools.steps.analyze import scan_steps
    return scan_steps(bundle)


def _diff(bundle):
    from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
    return diff_bundle(bundle)


_ON_DEMAND: dict[str, Callable[[Any], Any]] = {"steps": _steps, "diff": _diff}
# the Investigation's fields that are lists of records, not one report object: the function that writes their JSON
_LISTS = {"stacks": "trainlog_debugger.tools.sources.pyspy.report:to_json",
          "hardware": "trainlog_debugger.tools.sources.hw.report:to_json"}
