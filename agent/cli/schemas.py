"""The JSON schema of every command's `--json` document (`debugger schema [COMMAND]`), a public contract.

`ask`'s schema is the Diagnosis model's own (pydantic). The other reports are plain data built by their `to_json()`,
so their schemas are data files (`agent/cli/schemas/<command>.json`, JSON Schema draft 2020-12): written once from
the documents the commands print on the bundled cases (`python -m trainlog_debugger.agent.cli.schemas --write`:
each key's types, the keys every document has as `required`), then kept by hand; a test validates every command's
document on the bundled cases against its schema, so a renamed key or a changed type fails there. Keys may be
added (`additionalProperties` is left open: add, never rename).

The validator is the subset of JSON Schema these files use (type, properties, required, items, anyOf, const,
enum): no dependency for what a test and a user's script need.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "schemas"
COMMANDS = ("scan", "nccl", "grep", "diff", "steps", "fr", "ais", "catalog")
HEAD = {"schema_version": {"const": 2, "type": "integer", "description": "The version of this JSON contract."},
        "tool_version": {"type": "string", "description": "The trainlog-debugger version that wrote it."},
        "generated_at": {"type": "string", "format": "date-time", "description": "When it was written (RFC 3339)."},
        "bundle": {"type": "array", "items": {"type": "string"}, "description": "The paths given, absolute."}}


def schema_of(command: str) -> dict:
    """The schema of `debugger <command> --json` (`ask` included), with `schema_version` on top."""
    from trainlog_debugger.tools.groups import SCHEMA_VERSION
    if command == "ask":
        from trainlog_debugger.tools.model import Diagnosis
        body = Diagnosis.model_json_schema()
    else:
        body = json.loads((HERE / f"{command}.json").read_text(encoding="utf-8"))
    if body.get("type") == "object":  # a report; `catalog` prints a list (a table, not a report): no head
        props = body.setdefault("properties", {})
        for k, v in HEAD.items():
            props.setdefault(k, v)
        body["required"] = sorted(set(body.get("required", [])) | set(HEAD))
    return {"schema_version": SCHEMA_VERSION, **body}


def errors(doc: Any, schema: dict, path: str = "$", defs: dict | None = None) -> list[str]:
    """Where `doc` breaks `schema` (the subset above), as `path: what`; [] when it conforms."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if "anyOf" in schema:
        tries = [errors(doc, s, path, defs) for s in schema["anyOf"]]
        return [] if any(not t for t in tries) else [f"{path}: matches none of anyOf ({tries[0][:1]})"]
    if "const" in schema and doc != schema["const"]:
        return [f"{path}: {doc!r} is not {schema['const']!r}"]
    if "enum" in schema and doc not in schema["enum"]:
        return [f"{path}: {doc!r} is not one of {schema['enum']}"]
    want = schema.get("type")
    if want is not None and not any(_is(doc, t) for t in (want if isinstance(want, list) else [want])):
        return [f"{path}: {type(doc).__name__} where {want} is expected"]
    out: list[str] = []
    if isinstance(doc, dict):
        out += [f"{path}: {k} is missing" for k in schema.get("required", []) if k not in doc]
        for k, sub in schema.get("properties", {}).items():
            if k in doc:
                out += errors(doc[k], sub, f"{path}.{k}", defs)
    if isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(doc[:200]):
            out += errors(v, schema["items"], f"{path}[{i}]", defs)
    return out


def _is(v: Any, t: str) -> bool:
    return {"object": isinstance(v, dict), "array": isinstance(v, list), "string": isinstance(v, str),
            "boolean": isinstance(v, bool), "null": v is None,
            "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool)}.get(t, True)


def infer(docs: list[Any], depth: int = 0) -> dict:
    """A schema every one of `docs` conforms to: the types seen, object keys present in all as required, lists by
    the union of their items. Nested deeper than 6 levels, or an object with more than 40 keys (a map keyed by
    rank or pattern id), is an open object."""
    types = sorted({_type(d) for d in docs})
    # only nulls seen: the type is not known, so not constrained; a whole number may be a float elsewhere
    out: dict = {} if types == ["null"] else {"type": types[0] if len(types) == 1 else types}
    objs = [d for d in docs if isinstance(d, dict)]
    if objs and depth < 6:
        keys = sorted({k for d in objs for k in d})
        if len(keys) <= 40:
            out["properties"] = {k: infer([d[k] for d in objs if k in d], depth + 1) for k in keys}
            out["required"] = [k for k in keys if all(k in d for d in objs)]
    items = [v for d in docs if isinstance(d, list) for v in d[:50]]
    if items and depth < 6:
        out["items"] = infer(items, depth + 1)
    return out


def _type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "number"
    return {dict: "object", list: "array", str: "string", float: "number", type(None): "null"}.get(type(v), "string")


def _document(command: str, case: Path) -> Any:
    """The command's document on `case`, run in this process (the CLI as a user runs it, without a process per
    case: the corpus is ~100 cases × 8 commands)."""
    from typer.testing import CliRunner

    from trainlog_debugger.agent.cli.app import app
    args = {"grep": ["grep", "NCCL|error|Error"], "ask": ["ask", "--offline"]}.get(command, [command])
    r = CliRunner().invoke(app, [*args, *([] if command == "catalog" else [str(case)]), "--json"])
    try:
        return json.loads(r.stdout) if r.exit_code in (0, 1) and r.stdout.strip() else None
    except ValueError:
        return None


def corpus(root: Path) -> list[Path]:
    """The cases a schema is written from: every fifth generated case, every generated case with AIStore daemon logs
    (the only ones `ais` reads) and every real incident of the dev split (test incidents are scored, never read for
    anything: README, the real corpus)."""
    every = sorted(p for p in root.iterdir() if (p / "truth.yaml").is_file())
    gen = sorted(set(every[::5]) | {p for p in every if p.name.startswith("gen-ais")})
    real = sorted(p.parent for p in (root / "real").glob("*/truth.yaml")
                  if "split: dev" in p.read_text(encoding="utf-8", errors="replace"))
    return gen + real


def main(argv: list[str] | None = None) -> int:
    """`--write [CASE...]`: (re)write the schema files from the documents printed on the cases (default: `corpus`).
    Review the diff: a key that became optional or changed type is a contract change."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "--write":
        print(main.__doc__)
        return 2
    root = Path(__file__).resolve().parents[2] / "cases"
    cases = [Path(c) for c in argv[1:]] or corpus(root)
    HERE.mkdir(exist_ok=True)
    for command in COMMANDS:
        docs = [d for c in (cases[:1] if command == "catalog" else cases) if (d := _document(command, c)) is not None]
        if not docs and command == "fr":  # no bundled case holds dumps: the report's own fields, empty
            from trainlog_debugger.tools.sources.flight_recorder.report import FRReport
            docs = [FRReport(dumps={}, skipped=[], groups=[], expected_ranks=[], no_dump_ranks=[], culprits=[]).to_json()]
        if not docs:
            print(f"{command}: no document on these cases (kept as it is)")
            continue
        body = infer([{k: v for k, v in d.items() if k not in HEAD} if isinstance(d, dict) else d for d in docs])
        body = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": f"debugger {command} --json", **body}
        (HERE / f"{command}.json").write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
        print(f"{command}: {len(docs)} document(s) → {HERE / f'{command}.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
