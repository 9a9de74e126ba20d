"""What a WhatsApp business app receives about the messages it sent: the mock's ``statuses`` webhooks, posted as the
Cloud API posts them, so the sidecar's webhook (:mod:`adapters.whatsapp.webhook`) settles against the mock.

When a webhook URL is set (:meth:`mocks.whatsapp.MockWhatsApp.webhook_to`, ``POST /_mock/webhook``), every message the
mock stores for the bot is followed by a ``sent`` status, then ``delivered``, each with the message's ``id``
(``wamid.…``), ``recipient_id`` and the ``biz_opaque_callback_data`` its create carried
(https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components), in the envelope
``{"object": "whatsapp_business_account", "entry": [{"id", "changes": [{"field": "messages", "value":
{"messaging_product", "metadata", "statuses": [...]}}]}]}``, signed ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of
the body with the app secret>`` (https://developers.facebook.com/docs/graph-api/webhooks/getting-started).

A delivery answered with anything but 200 (or not answered: the app is down, killed) is tried again with
decreasing frequency (0.25 s doubling to :data:`MAX_RETRY_GAP_S`) for up to ``retry_for_s``, as Meta keeps trying
for up to 7 days (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks). A status scripted as dropped
(``drop``) is never posted; ``delay_ms`` holds every status that long first (Meta's lag).

With more than one URL (``also``: replicas behind the load balancer that Meta's one URL reaches), each attempt goes to
the next URL in turn, as a round-robin load balancer spreads them: a replica that does not answer is passed over at
the next attempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

WABA_ID = "102290129340398"
"""The mock's WhatsApp Business Account id (``entry[].id``)."""
MAX_RETRY_GAP_S = 2.0


def signature(app_secret: str, body: bytes) -> str:
    """``X-Hub-Signature-256``: ``sha256=`` and the hex HMAC-SHA256 of ``body`` with the app secret."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def status_payload(
    phone_id: str, message_id: str, to: str, status: str, callback: str | None, error_code: int | None = None
) -> dict[str, Any]:
    """One ``statuses`` webhook: ``status`` of ``message_id`` sent from ``phone_id`` to ``to``, echoing ``callback``
    (``biz_opaque_callback_data``) when the create carried one; a ``failed`` one with ``errors[0].code``."""
    entry: dict[str, Any] = {
        "id": message_id,
        "status": status,
        "timestamp": str(int(time.time())),
        "recipient_id": to,
    }
    if callback is not None:
        entry["biz_opaque_callback_data"] = callback
    if error_code is not None:
        entry["errors"] = [{"code": error_code, "title": f"error {error_code}"}]
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_id},
        "statuses": [entry],
    }
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
    }


def message_payload(phone_id: str, wa_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """One ``messages`` webhook: ``message`` (``from``, ``id``, ``type``…) the person ``wa_id`` sent to ``phone_id``
    (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components)."""
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_id},
        "contacts": [{"profile": {"name": "Person"}, "wa_id": wa_id}],
        "messages": [message],
    }
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
    }


@dataclass
class StatusSender:
    """Posts status webhooks to an app's URL, signed with its app secret, trying again until ``retry_for_s``.

    Attributes:
        url: the app's webhook URL.
        also: more URLs the same webhook reaches (replicas behind a load balancer), tried in turn with ``url``.
        app_secret: the Meta app's secret (never in a repr).
        delay_ms: how long each status waits before its first delivery.
        drop: how many of the next statuses are never posted (a script's way to make one go missing).
        retry_for_s: how long a failed delivery is tried again.
        answers: the HTTP status of each delivery attempt, in order (0: the app could not be reached).
        posted: the statuses delivered (200), as ``(message id, status)``.
    """

    url: str
    app_secret: str = field(repr=False)
    also: tuple[str, ...] = ()
    delay_ms: float = 0.0
    drop: int = 0
    retry_for_s: float = 120.0
    answers: list[int] = field(default_factory=list)
    posted: list[tuple[str, str]] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, repr=False)
    _turn: int = field(default=0, repr=False)

    def _next_url(self) -> str:
        """The URL of the next attempt: ``url`` alone, or each of ``url`` and ``also`` in turn."""
        urls = (self.url, *self.also)
        self._turn += 1
        return urls[(self._turn - 1) % len(urls)]

    def send(self, statuses: list[tuple[dict[str, Any], str, str]]) -> None:
        """Deliver one message's ``(payload, message id, status)`` webhooks in order, in the background (from the
        mock's event loop), unless a drop is scripted (it drops them all: the message's statuses never come)."""
        if self.drop > 0:
            self.drop -= 1
            return
        task = asyncio.get_running_loop().create_task(self._deliver_all(statuses))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver_all(self, statuses: list[tuple[dict[str, Any], str, str]]) -> None:
        await asyncio.sleep(self.delay_ms / 1000)
        for payload, message_id, status in statuses:
            await self._deliver(json.dumps(payload).encode(), message_id, status)

    async def _deliver(self, body: bytes, message_id: str, status: str) -> None:
        headers = {"Content-Type": "application/json", "X-Hub-Signature-256": signature(self.app_secret, body)}
        deadline, gap = time.monotonic() + self.retry_for_s, 0.25
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while True:
                try:
                    async with session.post(self._next_url(), data=body, headers=headers) as answer:
                        self.answers.append(answer.status)
                        if answer.status == 200:
                            self.posted.append((message_id, status))
                            return
                except (aiohttp.ClientError, TimeoutError, OSError):
                    self.answers.append(0)
                if time.monotonic() + gap > deadline:
                    return
                await asyncio.sleep(gap)
                gap = min(MAX_RETRY_GAP_S, gap * 2)

    async def close(self) -> None:
        """Stop deliveries under way (the mock is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
