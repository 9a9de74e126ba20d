"""Scenario cases on the web channel (``"platform": "web"``): the sidecar is the platform.

The run is posted through HTTP ingest like any scenario; an SSE client reads the run's live stream
(``/v1/runs/{run}/live`` with its read token) as a browser would, and with ``"client": {"drop_after_events": N,
"drops": M}`` it disconnects after N events, M times, each time resuming with ``Last-Event-ID``. What "the chat
shows" is what that client saw of the web channel's message parts (``delivery`` events with their text, or a
``reset``'s state). The client checks that it got every event once, in order: an id seen twice, or a gap without a
``reset``, is a failure.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from streamrelay.adapters.web import WebAdapter
from streamrelay.app.cases.expect import check_expectations
from streamrelay.app.cases.inputs import case_channel_settings, case_events, paced
from streamrelay.app.cases.result import CaseResult, call_record
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay

PAGE = Target(chat_id="page")


class SseWatcher:
    """Reads a run's live stream like a browser's EventSource, dropping and resuming as the case says."""

    def __init__(self, client: httpx.AsyncClient, path: str, *, drop_after: int | None, drops: int) -> None:
        self._client = client
        self._path = path
        self._drop_after = drop_after
        self._drops = drops
        self.events: list[dict[str, Any]] = []
        self._seen: set[int] = set()
        self.failures: list[str] = []
        self.connections = 0

    async def run(self) -> None:
        """Read until the ``end`` event (reconnecting after each planned drop)."""
        last: int | None = None
        last_sse_id: str | None = None
        while True:
            self.connections += 1
            headers = {"Last-Event-ID": last_sse_id} if last_sse_id is not None else {}
            read = 0
            async with self._client.stream("GET", self._path, headers=headers) as answer:
                if answer.status_code != 200:
                    self.failures.append(f"the live stream answered {answer.status_code}")
                    return
                async for sse_id, event in _sse_events(answer):
                    if event["type"] == "reset" and read:
                        self.failures.append(f"a reset came in the middle of a connection (after event {last})")
                    self._take(event, last)
                    last, last_sse_id, read = int(event["id"]), sse_id, read + 1
                    if event["type"] == "end" or (event["type"] == "reset" and event["state"].get("ended")):
                        return
                    if self._drops and self._drop_after is not None and read >= self._drop_after:
                        self._drops -= 1
                        break  # the client disconnects here, then resumes with Last-Event-ID
            if last is None and self.connections > 3:
                self.failures.append("the live stream ended without an end event")
                return

    def _take(self, event: dict[str, Any], last: int | None) -> None:
        if event["type"] != "reset":
            if event["id"] in self._seen:
                self.failures.append(f"event {event['id']} ({event['type']}) came twice")
            elif last is not None and event["id"] != last + 1:
                self.failures.append(f"event {event['id']} came after {last}: a gap without a reset")
            self._seen.add(event["id"])
        self.events.append(event)

    def chat(self, channel: str) -> list[dict[str, Any]]:
        """The web channel's message parts as this client last saw them, in part order."""
        parts: dict[int, dict[str, Any]] = {}
        for event in self.events:
            if event["type"] == "reset":
                parts = {
                    int(key.split("/")[-1]): dict(part)
                    for key, part in event["state"]["parts"].items()
                    if key.startswith(f"{channel}/")
                }
            elif event["type"] == "delivery" and event.get("channel") == channel:
                part = parts[int(event["part"])] = {**parts.get(int(event["part"]), {}), **event}
                if "append" in event:
                    part["text"] = part.get("text", "") + part.pop("append")
        shown = [parts[i] for i in sorted(parts) if parts[i].get("state") != "deleted" and parts[i].get("text")]
        return [
            {"message_id": p.get("message_id"), "text": _shown_text(p)} for p in shown if p.get("role") in _CHAT_ROLES
        ]


_CHAT_ROLES = ("answer", "media")
"""The parts a web case's chat lists: the answer's, and its media (with their captions as their text)."""


def _shown_text(part: dict[str, Any]) -> str:
    """A part's text as a person reads it: a media part's caption (``""`` without one), else its text."""
    if part.get("role") == "media":
        return MediaItem.from_text(part["text"]).caption or ""
    return str(part["text"])


async def _sse_events(answer: httpx.Response) -> Any:
    """``(SSE id, event)`` for each event of an SSE response (``data`` parsed as JSON; the SSE id ``<epoch>.<id>``
    checked against the event's id), comments skipped."""
    data: list[str] = []
    event_id = None
    async for line in answer.aiter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if data:
                event = json.loads("\n".join(data))
                if event_id is None or event_id.rpartition(".")[2] != str(event.get("id")):
                    raise ValueError(f"SSE id {event_id} and event id {event.get('id')} differ")
                yield event_id, event
            data, event_id = [], None
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("id:"):
            event_id = line[3:].strip()


async def run_web_scenario(case: dict[str, Any], base_dir: Path) -> CaseResult:
    """Run one web scenario case."""
    cid, channel = case["id"], case["channel"]
    settings = case_channel_settings(channel, None)
    runtime = make_runtime("case", settings, SecretStr(""))
    adapter = runtime.adapter
    assert isinstance(adapter, WebAdapter)
    adapter.record = True
    relay = Relay({"case": runtime}, MemoryLedger(), MonotonicClock())
    token = secrets.token_urlsafe(16)
    sidecar = Sidecar(relay, token=token)
    url = await sidecar.start()
    run = f"case-{cid}"
    client_spec = case.get("client", {})
    lines = case_events(case, run, PAGE, base_dir)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600) as client:
            t0 = time.monotonic()
            started = await client.post(f"/v1/runs/{run}/events", content=json.dumps(lines[0][1]) + "\n")
            failures = [] if started.status_code == 200 else [f"run.start answered {started.status_code}"]
            watcher = SseWatcher(
                client,
                sidecar.watch_path(run).replace(f"/runs/{run}?", f"/v1/runs/{run}/live?"),
                drop_after=client_spec.get("drop_after_events"),
                drops=int(client_spec.get("drops", 1 if "drop_after_events" in client_spec else 0)),
            )
            watching = asyncio.create_task(watcher.run())
            posted = await client.post(f"/v1/runs/{run}/events", content=paced(lines[1:], t0))
            if posted.status_code != 200:
                failures.append(f"ingest answered {posted.status_code}: {posted.text}")
            report = (await client.get(f"/v1/runs/{run}", params={"wait_s": 600})).json()
            await asyncio.wait_for(watching, 60)
    finally:
        await sidecar.stop()
        await relay.close()
    transcript = {
        "calls": [call_record(c, t0) for c in adapter.calls],
        "chat": watcher.chat("case"),
        "pipeline": [unit.model_dump(mode="json") for unit in relay.pipeline(run) or []],
        "report": report,
        "sse": {"connections": watcher.connections, "events": len(watcher.events)},
    }
    failures.extend(watcher.failures)
    if not report.get("done"):
        failures.append(f"the run did not finish: report {report}")
    policy = settings.policy("case")
    ctx = {"limit": policy.max_units, "unit": str(policy.unit)}
    failures.extend(check_expectations(case.get("expect", {}), transcript, ctx))
    return CaseResult(cid, "scenario", not failures, failures, transcript)
