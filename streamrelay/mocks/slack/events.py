"""What a Slack app receives: the Events API's requests, sent by the mock as Slack sends them, so a real Bolt app (HTTP
mode) runs against the mock.

When an app's Request URL is set (:meth:`mocks.slack.MockSlack.events_to`, ``POST /_mock/events``), a person's
message (``user_message``, ``POST /_mock/user_message``) is posted to it as an ``event_callback`` whose ``event`` is a
``message`` (https://docs.slack.dev/reference/events/message), signed the way Slack signs requests: the header
``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>" with the signing secret>`` beside
``X-Slack-Request-Timestamp`` (https://docs.slack.dev/authentication/verifying-requests-from-slack). One attempt, no
retries (Slack retries a failed delivery three times; the mock records each answer in :attr:`EventSender.answers`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

TEAM_ID = "T0MOCKTEAM"
APP_ID = "A0MOCKAPP1"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` and the hex HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def message_event(channel: str, user: str, text: str, ts: str, thread_ts: str | None = None) -> dict[str, Any]:
    """A ``message`` event as the Events API wraps it (``event_callback``; its ``event_id`` is added on sending)."""
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": "im" if channel.startswith("D") else "channel",
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return {"team_id": TEAM_ID, "api_app_id": APP_ID, "type": "event_callback", "event": event}


@dataclass
class EventSender:
    """Posts events to an app's Request URL, signed with its signing secret."""

    url: str
    signing_secret: str = field(repr=False)
    answers: list[int] = field(default_factory=list)
    """The HTTP status of each delivery, in order (0: the app could not be reached)."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def send(self, payload: dict[str, Any]) -> None:
        """Deliver ``payload`` in the background (from the mock's event loop), as Slack does: the person's message is
        stored first, the app hears of it a moment later."""
        number = next(self._ids)
        body = json.dumps({**payload, "event_id": f"Ev{number:08d}", "event_time": int(time.time())}).encode()
        task = asyncio.get_running_loop().create_task(self._post(body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, body: bytes) -> None:
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature(self.signing_secret, timestamp, body),
        }
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as session,
                session.post(self.url, data=body, headers=headers) as answer,
            ):
                self.answers.append(answer.status)
        except (aiohttp.ClientError, TimeoutError):
            self.answers.append(0)

    async def close(self) -> None:
        """Wait for deliveries under way."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
