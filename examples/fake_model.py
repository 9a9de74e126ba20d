"""A local fake of the Anthropic Messages API for dry runs: ``POST /v1/messages`` with ``"stream": true`` answers
with a recorded stream (tests/streams/anthropic/*.jsonl, one event a line) in the API's own SSE wire format
(``event: <type>`` and ``data: <json>`` per event, https://docs.anthropic.com/en/api/messages-streaming), whatever
was asked. Point the ``anthropic`` SDK at it with ``ANTHROPIC_BASE_URL=http://127.0.0.1:8090``.

    python examples/fake_model.py tests/streams/anthropic/thinking-then-text.jsonl --port 8090
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def fake_model(recording: Path, pace_ms: float = 5.0) -> Starlette:
    """The app: every streamed ``/v1/messages`` request gets ``recording``'s events, ``pace_ms`` apart."""
    events = [json.loads(line) for line in recording.read_text().splitlines() if line.strip()]

    async def sse() -> AsyncIterator[bytes]:
        for event in events:
            yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            await asyncio.sleep(pace_ms / 1000)

    async def messages(request: Request) -> Response:
        if not (await request.json()).get("stream"):
            error = {"type": "invalid_request_error", "message": "this fake answers streamed requests only"}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        return StreamingResponse(sse(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", type=Path)
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    uvicorn.run(fake_model(args.recording), host="127.0.0.1", port=args.port, log_level="warning")
