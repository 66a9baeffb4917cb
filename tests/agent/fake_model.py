"""A scripted LangChain chat model: replies in order, records every request. Tests the graph's topology and node
logic with no HTTP at all (the HTTP side is tested with cassettes and the stand-in server)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult


def tool_call(name: str, args: dict, i: int) -> dict:
    return {"name": name, "args": args, "id": f"toolu_{i:03d}", "type": "tool_call"}


def reply(*calls: dict, text: str = "", tokens: tuple[int, int] = (1000, 100)) -> AIMessage:
    return AIMessage(content=text, tool_calls=list(calls),
                     usage_metadata={"input_tokens": tokens[0], "output_tokens": tokens[1],
                                     "total_tokens": sum(tokens)})


def looked(i: int) -> AIMessage:
    """The reply a careful model opens with: where every rank stops and the collective state, the two results the
    protocol asks for before an answer on a bundle with collective state (agent/graph/protocol.py)."""
    return reply(tool_call("where_ranks_stop", {}, i), tool_call("nccl_state", {}, i + 500))


class ScriptedModel(BaseChatModel):
    script: list = []
    requests: list = []
    bound_tools: list = []
    model: str = "scripted-fake"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kw):
        self.bound_tools = list(tools)
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kw: Any) -> ChatResult:
        self.requests.append(list(messages))
        if not self.script:
            raise AssertionError("the scripted model ran out of replies")
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])
