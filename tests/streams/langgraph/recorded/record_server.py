# mypy: ignore-errors
"""Record the graph's stream through the LangGraph server's HTTP API with the official SDK to ``server-sse.jsonl``:
each Server-Sent Event as one JSON object, ``{"event": <the SSE event name>, "data": <its data, parsed>}``, as
``langgraph_sdk``'s ``client.runs.stream`` yields it (``StreamPart``). ``stream_mode=["messages", "updates",
"custom"]``: the server sends ``metadata``, ``messages/metadata``, ``messages/partial`` (the message so far),
``messages/complete``, ``updates`` (with ``__interrupt__`` when the graph stops at ``interrupt()``) and ``custom``.
The second run resumes the interrupt with ``command={"resume": {"approved": True}}``.

Serve the graph (a folder holding graph.py and ``langgraph.json``: ``{"dependencies": ["."], "graphs": {"refund":
"./graph.py:graph"}}``) with the in-memory dev server (langgraph-api 0.16.7 under it):

    uv run --no-project --with "langgraph-cli[inmem]==0.4.40" --with langgraph==1.2.22 langgraph dev --no-browser

then, from the repository root (PORT: the one it prints):

    uv run --no-project --with langgraph-sdk==0.4.14 python tests/streams/langgraph/recorded/record_server.py \
        http://127.0.0.1:PORT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langgraph_sdk import get_sync_client

OUT = Path(__file__).with_name("server-sse.jsonl")


def main(url: str) -> None:
    client = get_sync_client(url=url)
    thread = client.threads.create()
    modes = ["messages", "updates", "custom"]
    lines = []
    runs = [
        {"input": {"messages": [{"role": "user", "content": "Order A-1029 was charged twice."}]}},
        {"command": {"resume": {"approved": True}}},
    ]
    for kwargs in runs:
        for part in client.runs.stream(thread["thread_id"], "refund", stream_mode=modes, **kwargs):  # type: ignore[arg-type]
            lines.append(
                json.dumps({"event": part.event, "data": part.data}, ensure_ascii=False, separators=(",", ":"))
            )
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} events -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
