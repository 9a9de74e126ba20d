# mypy: ignore-errors
"""Record the graph's stream in-process (``graph.stream(..., stream_mode=["messages", "updates", "custom"],
version="v2")``) to ``local-v2.jsonl``: each stream part as one JSON object (``type``, ``ns``, ``data``; messages and
interrupts as the LangGraph server serializes them: pydantic models by ``model_dump()``, dataclasses by their
fields). The first run stops at the review node's ``interrupt()``; the second resumes it with
``Command(resume={"approved": True})``. Run from the repository root:

    uv run --no-project --with langgraph==1.2.22 python tests/streams/langgraph/recorded/record_local.py
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

sys.path.insert(0, str(Path(__file__).parent))
from graph import make_graph

OUT = Path(__file__).with_name("local-v2.jsonl")


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def main() -> None:
    graph = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "thread-1"}}
    modes = ["messages", "updates", "custom"]
    lines = []
    for payload in (
        {"messages": [{"role": "user", "content": "Order A-1029 was charged twice."}]},
        Command(resume={"approved": True}),
    ):
        for part in graph.stream(payload, config, stream_mode=modes, version="v2"):
            lines.append(json.dumps(part, default=_plain, ensure_ascii=False, separators=(",", ":")))
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} parts -> {OUT}")


if __name__ == "__main__":
    main()
