# mypy: ignore-errors
"""The graph the LangGraph recordings of this folder were made with (README.md says how): a refund agent whose
review node asks a person with ``interrupt()`` before the refund, resumed with ``Command(resume=...)``.

The chat model is a fake (langchain-core's ``GenericFakeChatModel``, made to stream a tool call's arguments in
fragments as providers do): no network, no key, the same stream every time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

QUESTION = "Refund 49.99 EUR for order A-1029?"
ACTION = "refund(order='A-1029', amount=49.99)"


class StreamingToolsModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that also streams the message's tool calls as ``tool_call_chunks`` (its own stream
    drops them), the arguments in two fragments."""

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        message = next(self.messages)
        assert isinstance(message, AIMessage)
        tokens = re.split(r"(\s)", str(message.content)) if message.content else []
        for token in tokens:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token, id=message.id))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        for index, call in enumerate(message.tool_calls):
            args = json.dumps(call["args"])
            half = len(args) // 2
            for n, part in enumerate((args[:half], args[half:])):
                first = n == 0
                chunk = ChatGenerationChunk(
                    message=AIMessageChunk(
                        content="",
                        id=message.id,
                        tool_call_chunks=[
                            {
                                "name": call["name"] if first else None,
                                "args": part,
                                "id": call["id"] if first else None,
                                "index": index,
                                "type": "tool_call_chunk",
                            }
                        ],
                    )
                )
                if run_manager:
                    run_manager.on_llm_new_token("", chunk=chunk)
                yield chunk
        last = ChatGenerationChunk(message=AIMessageChunk(content="", id=message.id, chunk_position="last"))
        yield last


def make_graph(checkpointer: Any = None) -> Any:
    model = StreamingToolsModel(
        messages=iter(
            [
                AIMessage(
                    id="msg-plan",
                    content="Order A-1029 was charged twice. I will refund the second charge.",
                    tool_calls=[
                        {"name": "refund", "args": {"order": "A-1029", "amount": 49.99}, "id": "call_refund_1"}
                    ],
                ),
                AIMessage(id="msg-done", content="Refunded 49.99 EUR for order A-1029: it reaches the card in 5 days."),
            ]
        )
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def review(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        decision = interrupt({"question": QUESTION, "action": ACTION, "tool_call_id": call["id"]})
        write = get_stream_writer()
        if decision.get("approved"):
            write({"status": "refunding order A-1029"})
            result = "refunded 49.99 EUR"
        else:
            result = "the person denied the refund"
        return {"messages": [ToolMessage(content=result, tool_call_id=call["id"], name="refund", id="tool-refund")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("review", review)
    builder.add_node("answer", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "review")
    builder.add_edge("review", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


graph = make_graph()
"""For ``langgraph dev`` (langgraph.json): the server brings its own checkpointer."""
