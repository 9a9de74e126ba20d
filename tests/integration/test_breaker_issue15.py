"""Breaker findings on issue 15 over real HTTP (the sidecar and the mock Bot API on 127.0.0.1): the new ingest
formats and Stop, attacked as an agent, a bot developer and a person reading the chat would. Each test says what
the sidecar did before its fix (or is a strict xfail naming what is still wrong)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.integration.conftest import Stack


def lines(*objs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


def start(fmt: str) -> dict[str, Any]:
    return {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}, "format": fmt}


async def shown(stack: Stack, chat: int, count: int) -> list[str]:
    """The chat's messages once there are ``count`` of them (polled: the sidecar delivers in the background)."""
    for _ in range(250):
        texts = [t for _, t in stack.mock.visible(chat)]
        if len(texts) >= count:
            return texts
        await asyncio.sleep(0.02)
    return [t for _, t in stack.mock.visible(chat)]


ARTIFACT = {
    "kind": "artifact-update",
    "taskId": "task-1",
    "contextId": "ctx-1",
    "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "The bare artifact's answer."}]},
    "lastChunk": True,
}


async def test_a2a_bare_result_objects_are_taken_as_the_module_says(stack: Stack) -> None:
    # core/normalize/a2a.py accepts "the bare result object (told apart by kind)"; over HTTP a line with 'kind' was
    # parsed as a normalized event and refused: "unknown event kind 'artifact-update'"
    task = {"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": {"state": "submitted"}}
    done = {
        "kind": "status-update",
        "taskId": "task-1",
        "contextId": "ctx-1",
        "status": {"state": "completed"},
        "final": True,
    }
    answer = await stack.client.post("/v1/runs/a2a-bare/events", content=lines(start("a2a"), task, ARTIFACT, done))
    assert answer.status_code == 200, answer.text
    end = await stack.client.post("/v1/runs/a2a-bare/events", content=lines({"kind": "end", "status": "ok"}))
    assert end.status_code == 200, end.text
    report = (await stack.client.get("/v1/runs/a2a-bare", params={"wait_s": 10})).json()
    assert report["status"] == "delivered", report
    assert await shown(stack, 5, 1) == ["The bare artifact's answer."]


async def test_an_a2a_kind_in_a_run_of_another_format_is_still_refused(stack: Stack) -> None:
    answer = await stack.client.post("/v1/runs/not-a2a/events", content=lines(start("ag-ui"), ARTIFACT))
    assert answer.status_code == 400
    assert "unknown event kind 'artifact-update'" in answer.json()["rejected"][0]["error"]
