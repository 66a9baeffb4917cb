"""Output formats as data: for every report type, the renderer of each format it has. The CLI chooses the format
once (`--format`, or its aliases `--json`, `--markdown -`, `--html -`) and looks the renderer up here; no command
branches on a format.

    RENDERERS["nccl"]["text"] → render_nccl(report, console)        printed on a rich Console
    RENDERERS["nccl"]["json"] → report_json(report, indent=…)       a JSON document
    RENDERERS["diagnosis"]["markdown"] → to_markdown(diagnosis)     a document

How a format's renderer is called is the format's KIND (FORMATS): `console` renderers print to a rich Console
(`fn(report, console, **options)`), `json` renderers return the JSON text (`fn(report, indent=None|2)`), `document`
renderers return the whole document (`fn(report, **options) -> str`), which the CLI writes to stdout or to a file.
So a new format of an existing kind (a CSV table, say) is its renderer module and one entry per report type here;
a new report type is one entry here.

Each renderer is named "package.module:function", imported only when it runs (tools.sources.resolve, the registry's
one resolver): this module imports nothing, so the fast path of `debugger scan --json` pays nothing for the text or
HTML renderers, and nothing here loads rich. `view` names a method of the report taken BEFORE redaction: what the
format reads of the report, so redaction (agent.render.shown) walks only that. `scan`'s text reads the result
without its kept hits and its JSON reads `to_json()` (plain data, dumped without a second walk): walking every
kept hit of a 4,096-file scan took longer than the scan.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMATS: dict[str, str] = {"text": "console", "json": "json", "markdown": "document", "html": "document"}


@dataclass(frozen=True)
class Renderer:
    ref: str                 # "package.module:function"
    view: str | None = None  # a method of the report: the part this format reads, taken before redaction


_R = "trainlog_debugger.agent.render"
JSON = Renderer(f"{_R}.data:report_json")

RENDERERS: dict[str, dict[str, Renderer]] = {
    "diagnosis": {"text": Renderer(f"{_R}.report:render_report"), "json": JSON,
                  "markdown": Renderer(f"{_R}.markdown:to_markdown"), "html": Renderer(f"{_R}.html:to_html")},
    "scan": {"text": Renderer(f"{_R}.text:render_scan", view="without_hits"),
             "json": Renderer(f"{_R}.data:plain_json", view="to_json")},
    "grep": {"text": Renderer(f"{_R}.text:render_grep"), "json": JSON},
    "nccl": {"text": Renderer(f"{_R}.text:render_nccl"), "json": JSON},
    "diff": {"text": Renderer(f"{_R}.diff:render_diff"), "json": JSON},
    "fr": {"text": Renderer(f"{_R}.fr:render_fr"), "json": JSON},
    "ais": {"text": Renderer(f"{_R}.ais:render_ais"), "json": JSON},
    "steps": {"text": Renderer(f"{_R}.steps:render_steps"), "json": JSON},
    "catalog": {"text": Renderer(f"{_R}.text:render_catalog"), "json": JSON},
}


class NoRenderer(ValueError):
    """The report type has no renderer for this format; the message lists the ones it has."""


def formats(report: str) -> list[str]:
    """The formats `report` can be written in, in FORMATS order (text first: the default)."""
    return [f for f in FORMATS if f in RENDERERS[report]]


def renderer(report: str, fmt: str) -> Renderer:
    try:
        return RENDERERS[report][fmt]
    except KeyError:
        raise NoRenderer(f"{report} has no {fmt} output; choose one of: {', '.join(formats(report))}") from None


def resolve(r: Renderer):
    """The renderer's function (imported now)."""
    from trainlog_debugger.tools.sources import resolve as _resolve
    return _resolve(r.ref)
