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

What the model sees of a result is its payload as JSON, secrets redacted (tools/redact.py), capped to
`max_tokens` counted with tiktoken, with "showing X of Y" when cut. The lines whose `file:line` survive in what was
sent are recorded as shown: the verifier accepts a citation only of a line the model was actually shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Callable, Sequence

from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

from trainlog_debugger.agent.graph import caps
from trainlog_debugger.agent.graph.result import ToolResult, error
from trainlog_debugger.agent.llm.tokens import cap

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
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
        fr, ais, steps, diff, ...), made once per toolbox; None when the bundle has none. steps and diff are read
        from the bundle on first use when the pipeline did not need them (another pass over the bytes, paid only
        if the model asks). The one place the agent touches a report object, and only to take its JSON."""
        if name not in self._json:
            rep = getattr(self.inv, name)
            if rep is None and name in _ON_DEMAND:
                rep = _ON_DEMAND[name](self.bundle)
            self._json[name] = None if rep is None else rep.to_json()
        return self._json[name]

    def hosts(self) -> list[str]:
        """Every node name the scan attributed a rank or a file to: what --redact-hosts masks."""
        sj = self.report("scan") or {}
        found = {n for rs in sj.get("ranks", {}).values() for n in rs.get("nodes", ())}
        found |= {n for f in sj.get("files", ()) for n in f.get("nodes", ()) if n}
        return sorted(found)

    # -- a call ------------------------------------------------------------------------------------------------------
    def call(self, name: str, args: dict) -> ToolResult:
        """Run a tool by name; bad arguments and failures come back as a status=error result, never an exception.
        String arguments are unmasked first: the model names files and hosts as it saw them."""
        args = {k: (self.unmask(v) if isinstance(v, str) else v) for k, v in args.items()}
        t = self.tools.get(name)
        if t is None:
            res, used = error(f"no tool named {name!r}; tools: {', '.join(self.tools)}"), args
        else:
            res, used = self._run(t, args)
        return replace(res, tool=name, params=used)

    def _run(self, d: Declared, args: dict) -> tuple[ToolResult, dict]:
        """(the result, the arguments as used: validated, defaults filled in, None left out)."""
        fields = d.args.model_fields
        unknown = sorted(set(args) - set(fields))
        if unknown:
            return error(f"bad arguments: {', '.join(unknown)} not among {', '.join(fields) or 'none'}"), args
        try:
            parsed = {k: getattr(d.args.model_validate(args), k) for k in fields}
        except ValidationError as e:
            return error("bad arguments: " + "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
                                                       for x in e.errors()[:5])), args
        used = {k: v for k, v in parsed.items() if v is not None}
        try:
            return d.fn(self, **parsed), used
        except Exception as e:  # a tool must never end the investigation
            return error(f"{type(e).__name__}: {e}"), used

    # -- what the model sees -----------------------------------------------------------------------------------------
    def scrub(self, value: Any) -> Any:
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

    def render(self, res: ToolResult) -> tuple[str, dict[str, str]]:
        """(the text sent to the model, "file:line" → text of each line it shows). Scrubbed value by value, then
        capped by tokens; a line counts as shown only if its `file:line` AND the start of its text are still there
        after the cap."""
        try:
            text = json.dumps(self.scrub(res.payload()), ensure_ascii=False, default=str)
        except Exception as e:  # a result that does not encode is an error result, never an exception
            text = json.dumps({"tool": res.tool, "status": "error", "data": f"{type(e).__name__}: {e}"})
        kept, n, total = cap(text, self.max_tokens)
        if n < total:
            kept += f"\n[showing {n} of {total} tokens of this result: ask a narrower question to see the rest]"
        shown = {}
        for ln in res.lines:
            head = json.dumps(self.scrub(ln["text"].strip()), ensure_ascii=False)[1:SHOWN_HEAD + 1].rstrip("\\")
            if json.dumps(self.scrub(ln["at"]), ensure_ascii=False) in kept and head in kept:
                shown[ln["at"]] = ln["text"]
        return kept, shown


def _steps(bundle):
    from trainlog_debugger.tools.steps.analyze import scan_steps
    return scan_steps(bundle)


def _diff(bundle):
    from trainlog_debugger.tools.rankdiff.analyze import diff_bundle
    return diff_bundle(bundle)


_ON_DEMAND: dict[str, Callable[[Any], Any]] = {"steps": _steps, "diff": _diff}
