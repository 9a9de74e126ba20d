"""WhatsApp approvals end to end: the real sidecar (WhatsAppAdapter through pywa) against the mock Cloud API. The
approval's message is followed by a reply-buttons message (Approve, Deny); a tap is the ``messages`` webhook the mock
posts, signed, to the sidecar's ``POST /v1/platforms/whatsapp/webhook``, which decides it through the approvals path:
a tap by someone who may not decide changes nothing, the approver's decides once, a second tap gets the first
decision. WhatsApp cannot take buttons off or edit the question: the report says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteStore
from streamrelay.adapters.sqlite.receipts import SqliteReceipts
from streamrelay.adapters.whatsapp.buttons import BODY
from streamrelay.adapters.whatsapp.webhook import WEBHOOK_PATH, WhatsAppWebhook
from streamrelay.app.client import RelayClient
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.approvals import button_ids
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(90)

TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"
SECRET = "app-secret-for-the-test"
PERSON = "15551234567"


@dataclass
class Rig:
    mock: MockWhatsApp
    client: RelayClient


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not reached: {what}")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    mock = MockWhatsApp()
    api = await mock.start()
    store = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    receipts = await SqliteReceipts.on(store)
    settings = ChannelSettings.model_validate(
        {"platform": "whatsapp", "api_base": api, "delivery": "block", "format": "plain", "typing": False}
    )
    runtime = make_runtime("wa", settings, SecretStr(TOKEN), receipts=receipts)
    relay = Relay({"wa": runtime}, MemoryLedger(), MonotonicClock())
    webhook = WhatsAppWebhook(receipts, SecretStr(SECRET), decide=relay.decide_approval)
    sidecar = Sidecar(relay, token=INGEST_TOKEN, routes=webhook.routes())
    await sidecar.start()
    mock.webhook_to(sidecar.url + WEBHOOK_PATH, SECRET)
    client = RelayClient(sidecar.url, INGEST_TOKEN)
    try:
        yield Rig(mock, client)
    finally:
        await client.close()
        await sidecar.stop()
        await relay.close()
        await mock.stop()
        await store.close()


def buttons_message(mock: MockWhatsApp) -> tuple[str, list[tuple[str, str]]]:
    found = [(str(m), mock.buttons_of(PERSON, str(m))) for m, t in mock.visible(PERSON) if t == BODY]
    assert len(found) == 1, mock.visible(PERSON)
    return found[0]


async def ask(rig: Rig, approvers: list[str]) -> tuple[str, str]:
    await rig.client.start("a-run", channel="wa", chat_id=PERSON)
    request = {
        "kind": "approval.request",
        "id": "refund",
        "question": "Refund 49.99 EUR?",
        "approvers": approvers,
        "ttl_s": 120,
    }
    await rig.client.send("a-run", [request])
    await until(lambda: any(t == BODY for _, t in rig.mock.visible(PERSON)), "the buttons message")
    message_id, buttons = buttons_message(rig.mock)
    approve, deny = button_ids("a-run", "refund")
    assert buttons == [(approve, "✅ Approve"), (deny, "❌ Deny")]
    [question] = [m for m in rig.mock.messages(PERSON) if m.text.startswith("🔐")]
    [tap_message] = [m for m in rig.mock.messages(PERSON) if m.message_id == message_id]
    assert tap_message.payload["context"]["message_id"] == question.message_id  # a reply to the question
    return message_id, approve


async def posted(mock: MockWhatsApp, n: int) -> list[Any]:
    """Wait until ``n`` taps' webhooks were answered 200 by the sidecar (the decision is made before it answers)."""
    sender = mock.statuses
    assert sender is not None
    await until(lambda: [st for _, st in sender.posted].count("press") >= n, "the tap's webhook")
    return list(sender.posted)


async def test_the_approvers_tap_decides_once_through_the_webhook(rig: Rig) -> None:
    message_id, approve = await ask(rig, [f"whatsapp:user:{PERSON}"])
    waiter = asyncio.create_task(rig.client.wait_approval("a-run", "refund"))
    rig.mock.press(PERSON, message_id, approve)
    unit = await asyncio.wait_for(waiter, 30)
    assert (unit.decision, unit.approved, unit.by) == ("approved", True, f"whatsapp:user:{PERSON}")
    rig.mock.press(PERSON, message_id, button_ids("a-run", "refund")[1])  # Deny after: the first decision holds
    await posted(rig.mock, 2)
    await rig.client.send("a-run", [{"kind": "text", "text": "Refunded."}, {"kind": "end"}])
    report = await rig.client.report("a-run", wait_s=15)
    assert [u.kind for u in await rig.client.units("a-run")] == ["approval", "commit", "run.end"]
    problems = " ".join(str(e) for e in report.errors)
    assert "could not be taken off" in problems  # said, not hidden: WhatsApp cannot take buttons off


async def test_a_tap_by_someone_who_may_not_decide_changes_nothing(rig: Rig) -> None:
    message_id, approve = await ask(rig, ["whatsapp:user:15559999999"])  # the manager, not this person
    rig.mock.press(PERSON, message_id, approve)
    await posted(rig.mock, 1)
    assert await rig.client.units("a-run") == []
    await rig.client.send("a-run", [{"kind": "end"}])
    await rig.client.report("a-run", wait_s=15)
