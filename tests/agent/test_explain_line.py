"""The agent's `explain_line` tool: the upstream tables' and the lexicon's reading of a line, so that the model
looks a message up instead of guessing; a line of the bundle read this way counts as shown."""

from __future__ import annotations

import json

import pytest

from trainlog_debugger.agent.graph.toolbox import Toolbox, schema
from trainlog_debugger.agent.graph.tools import TOOLS, explain_line
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import run
from trainlog_debugger.tools.sources.messages import catalog as messages

LINE = "node3:1234:1300 [2] misc/cudawrap.cc:99 NCCL WARN Failed to create comm 0x7f: fabric partition p3 is not ready"


@pytest.fixture
def box(tmp_path, monkeypatch):
    m = messages.Message("demo", "v1", "Failed to create comm %s: fabric partition %s is not ready", "src/a.cc:12",
                         "infrastructure", "trigger", "the fabric partition the job needs is not up",
                         "ask the admins to bring the partition up", LINE, syntax="printf")
    monkeypatch.setattr(messages, "tables", lambda: {"demo": (m,)})
    messages._index.cache_clear()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "combined.log").write_text("[rank0]: iteration 1 | lm loss 2.5\n" + LINE + "\n")
    with open_bundle(tmp_path / "b") as b:
        yield Toolbox(b, run(b))
    messages._index.cache_clear()


def test_it_is_declared_once_for_the_model_and_the_toolbox(box):
    """The function in TOOLS is the declaration: the toolbox runs it by its name, the model is offered its schema."""
    assert explain_line in TOOLS and "explain_line" in box.names
    spec = next(s for s in box.schemas() if s["name"] == "explain_line")
    assert spec == schema(explain_line) and set(spec["input_schema"]["properties"]) == {"text", "file", "line"}
    assert "upstream" in spec["description"] and spec["input_schema"]["properties"]["line"]["description"]


def test_a_bundle_line_gets_its_upstream_reading_and_counts_as_shown(box):
    res = box.call("explain_line", {"file": "combined.log", "line": 2})
    assert res.status == "ok"
    up = res.data["upstream"][0]
    assert up["category"] == "infrastructure" and up["source"] == "demo v1 src/a.cc:12" and up["role"] == "trigger"
    text, shown = box.render(res)
    assert list(shown) == ["combined.log:2"] and "fabric partition" in json.loads(text)["data"]["line"]


def test_a_typed_line_is_looked_up_but_shows_nothing(box):
    res = box.call("explain_line", {"text": "E io.cc:7] write aborted: Disk quota exceeded on /scratch"})
    assert res.status == "ok" and res.data["upstream"] == [] and res.data["lexicon"]["category"] == "storage_io"
    assert box.render(res)[1] == {}


def test_bad_arguments_are_an_error_result(box):
    assert box.call("explain_line", {}).status == "error"
    assert box.call("explain_line", {"file": "combined.log"}).status == "error"
    assert box.call("explain_line", {"file": "nope.log", "line": 1}).status == "error"
    assert box.call("explain_line", {"text": "iteration 5 | lm loss 2.1"}).status == "no_data"
