"""A small client of the sidecar's HTTP ingest: replays a recorded provider stream as one paced NDJSON
request, then reads the delivery report. Used by ``streamrelay replay`` and ``streamrelay demo``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from core.events import ProviderFormat


def detect_format(path: Path) -> ProviderFormat:
    """The provider format of a recording from its folder name (``streams/anthropic/x.jsonl``)."""
    for part in reversed(path.resolve().parts[:-1]):
        if part in {f.value for f in ProviderFormat}:
            return ProviderFormat(part)
    raise ValueError(
        f"cannot tell the provider format of {path}: pass --format (anthropic, openai-responses, openai-chat)"
    )


def recording_lines(path: Path) -> list[dict[str, Any]]:
    """The recorded provider events, one decoded JSON object per non-empty line.

    Raises:
        ValueError: a line is not JSON (the message names the line).
    """
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
    return out


async def replay(
    url: str,
    token: str,
    *,
    run: str,
    channel: str,
    chat_id: int | str,
    fmt: ProviderFormat,
    thread_id: int | str | None = None,
    events: list[dict[str, Any]],
    pace_ms: float = 0.0,
    on_line: Callable[[int], None] | None = None,
    wait_s: float = 120.0,
) -> dict[str, Any]:
    """Post ``run.start`` (declaring ``fmt``), the raw events ``pace_ms`` apart, and ``end``; return the report.

    Raises:
        RuntimeError: the sidecar refused the request (the message carries its answer).
    """
    start = {
        "kind": "run.start",
        "run": run,
        "channel": channel,
        "target": {"chat_id": chat_id, **({"thread_id": thread_id} if thread_id is not None else {})},
        "format": fmt,
    }

    async def body() -> AsyncIterator[bytes]:
        yield (json.dumps(start) + "\n").encode()
        t0 = time.monotonic()
        for i, event in enumerate(events):
            delay = t0 + i * pace_ms / 1000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield (json.dumps(event) + "\n").encode()
            if on_line is not None:
                on_line(i + 1)
        yield (json.dumps({"kind": "end", "run": run, "status": "ok"}) + "\n").encode()

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=wait_s + 30) as client:
        answer = await client.post(f"/v1/runs/{run}/events", content=body())
        if answer.status_code != 200:
            raise RuntimeError(f"the sidecar answered {answer.status_code}: {answer.text}")
        report = await client.get(f"/v1/runs/{run}", params={"wait_s": wait_s})
        if report.status_code != 200:
            raise RuntimeError(f"the sidecar answered {report.status_code}: {report.text}")
        result: dict[str, Any] = report.json()
        return result
