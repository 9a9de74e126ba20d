"""WhatsApp's uncertain sends settled by their status webhooks, end to end: the real sidecar (ingest, delivery,
WhatsAppAdapter through pywa) against the mock Cloud API, which posts signed ``statuses`` webhooks to the sidecar's
``POST /v1/platforms/whatsapp/webhook``; receipts in the ledger's SQLite file. What a person sees is the mock's chat.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteStore
from streamrelay.adapters.sqlite.receipts import SqliteReceipts
from streamrelay.adapters.whatsapp.webhook import WEBHOOK_PATH, WhatsAppWebhook, signature
from streamrelay.app.client import RelayClient, RelayError
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.integration.conftest import INGEST_TOKEN

TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"
SECRET = "app-secret-for-the-test"
PERSON = "15551234567"
FIRST, SECOND = "First block of the answer.", "Second block, the last one."


@dataclass
class Rig:
    mock: MockWhatsApp
    sidecar: Sidecar
    receipts: SqliteReceipts

    def shown(self) -> list[str]:
        return [text for _, text in self.mock.visible(PERSON)]

    def sends(self) -> int:
        return sum(1 for c in self.mock.calls if c.method == "messages")

    async def run(self, run: str = "r1") -> dict[str, Any]:
        """Stream two assistant messages (two block replies) and end; the run's report once it is done."""
        lines = [
            {"kind": "run.start", "channel": "wa", "target": {"chat_id": PERSON}},
            {"kind": "text", "mode": "delta", "text": FIRST, "message": 0},
            {"kind": "message_end", "message": 0},
            {"kind": "text", "mode": "delta", "text": SECOND, "message": 1},
            {"kind": "message_end", "message": 1},
            {"kind": "end", "status": "ok"},
        ]
        body = "".join(json.dumps(line) + "\n" for line in lines)
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=self.sidecar.url, headers=headers, timeout=60) as client:
            answer = await client.post(f"/v1/runs/{run}/events", content=body)
            assert answer.status_code == 200, answer.text
            report: dict[str, Any] = (await client.get(f"/v1/runs/{run}", params={"wait_s": 40})).json()
        return report


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    mock = MockWhatsApp(hang_s=15.0)  # a scripted timeout outlasts the send timeout
    api = await mock.start()
    store = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    receipts = await SqliteReceipts.on(store)
    settings = ChannelSettings.model_validate(
        {
            "platform": "whatsapp",
            "api_base": api,
            "delivery": "block",
            "format": "plain",
            "send_timeout_ms": 3000,  # generous: a loaded machine must not time out a send the test did not script
            "settle_window_ms": 2500,
            "typing": False,
        }
    )
    runtime = make_runtime("wa", settings, SecretStr(TOKEN), receipts=receipts)
    relay = Relay({"wa": runtime}, MemoryLedger(), MonotonicClock())
    webhook = WhatsAppWebhook(receipts, SecretStr(SECRET))
    sidecar = Sidecar(relay, token=INGEST_TOKEN, routes=webhook.routes())
    await sidecar.start()
    mock.webhook_to(sidecar.url + WEBHOOK_PATH, SECRET)
    try:
        yield Rig(mock, sidecar, receipts)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
        await store.close()


async def test_store_then_timeout_is_settled_landed_and_shown_once(rig: Rig) -> None:
    rig.mock.add_fault("messages", 1, "timeout_after_commit")
    report = await rig.run()
    assert rig.shown() == [FIRST, SECOND]
    assert rig.sends() == 2  # the first was never sent again
    assert report["status"] == "delivered" and report["uncertain"] == 0, report
    [first_id, _] = [mid for mid, _ in rig.mock.visible(PERSON)]
    assert first_id in report["message_ids"]  # the wamid of its status webhook is the part's message id


async def test_reset_after_store_is_settled_landed_and_shown_once(rig: Rig) -> None:
    rig.mock.add_fault("messages", 2, "reset", after_commit=True)
    report = await rig.run()
    assert rig.shown() == [FIRST, SECOND] and rig.sends() == 2
    assert report["status"] == "delivered" and report["uncertain"] == 0, report


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"reply": "timeout_before_commit"}, id="timeout-before-store"),
        pytest.param({"reply": {"status": 500}}, id="5xx-before-store"),
        pytest.param({"reply": "reset"}, id="reset-before-store"),
    ],
)
async def test_fail_before_store_is_settled_not_landed_and_sent_once(rig: Rig, fault: dict[str, Any]) -> None:
    rig.mock.add_fault("messages", 2, fault["reply"])  # the first block's statuses prove the webhooks flow
    report = await rig.run()
    assert rig.shown() == [FIRST, SECOND]  # the second is shown once: sent again after the settle window
    assert rig.sends() == 3
    assert report["status"] == "delivered" and report["uncertain"] == 0, report


async def test_a_failed_status_is_not_landed_and_is_sent_again(rig: Rig) -> None:
    rig.mock.failing = 1  # the first send is answered… but its answer is lost, and a failed status follows
    rig.mock.add_fault("messages", 1, "timeout_after_commit")
    report = await rig.run()
    assert rig.shown() == [FIRST, SECOND] and rig.sends() == 3
    assert report["status"] == "delivered" and report["uncertain"] == 0, report


async def test_silence_without_any_status_heard_stays_uncertain_never_resent(rig: Rig) -> None:
    assert rig.mock.statuses is not None
    rig.mock.statuses.drop = 10  # no status reaches the sidecar: silence proves nothing
    rig.mock.add_fault("messages", 1, "timeout_before_commit")
    report = await rig.run()
    assert rig.shown() == [SECOND]  # the first was never stored, and never sent blind
    assert rig.sends() == 2
    assert report["status"] == "partial" and report["uncertain"] == 1, report


async def test_a_bad_signature_is_401_and_nothing_is_recorded(rig: Rig) -> None:
    body = json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "1",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "statuses": [
                                    {"id": "wamid.X", "status": "sent", "biz_opaque_callback_data": "forged-1"}
                                ]
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()
    url = rig.sidecar.url + WEBHOOK_PATH
    async with httpx.AsyncClient(timeout=10) as client:
        wrong = await client.post(url, content=body, headers={"X-Hub-Signature-256": signature("not-it", body)})
        missing = await client.post(url, content=body)
        tampered = await client.post(url, content=body + b" ", headers={"X-Hub-Signature-256": signature(SECRET, body)})
        assert await rig.receipts.find("whatsapp", "forged-1") is None
        right = await client.post(url, content=body, headers={"X-Hub-Signature-256": signature(SECRET, body)})
    assert [wrong.status_code, missing.status_code, tampered.status_code] == [401, 401, 401]
    assert "does not match the body" in wrong.json()["error"] and SECRET not in wrong.text
    assert "no X-Hub-Signature-256 header" in missing.json()["error"]
    assert right.status_code == 200 and right.json() == {"recorded": 1}
    found = await rig.receipts.find("whatsapp", "forged-1")
    assert found is not None and found.message_id == "wamid.X"


async def test_the_verification_handshake(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "l.sqlite3")
    hook = WhatsAppWebhook(await SqliteReceipts.on(store), SecretStr(SECRET), SecretStr("verify-me"))
    sidecar = Sidecar(Relay({}, MemoryLedger(), MonotonicClock()), token=INGEST_TOKEN, routes=hook.routes())
    await sidecar.start()
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as client:
            ok = await client.get(
                WEBHOOK_PATH, params={"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158"}
            )
            bad = await client.get(
                WEBHOOK_PATH, params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1158"}
            )
        assert (ok.status_code, ok.text) == (200, "1158")
        assert bad.status_code == 403 and "verify token" in bad.json()["error"]
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as client:
            odd = await client.get(
                WEBHOOK_PATH, params={"hub.mode": "subscribe", "hub.verify_token": "vérify-me", "hub.challenge": "1"}
            )
        assert odd.status_code == 403 and "verify token" in odd.json()["error"]  # not a 500 (compare_digest on str)
        assert "verify-me" not in repr(hook) and SECRET not in repr(hook)
    finally:
        await sidecar.stop()
        await store.close()


async def test_a_bot_that_owns_the_webhook_forwards_it_with_relay_client(rig: Rig) -> None:
    """The bot receives Meta's webhook itself and forwards the raw body and its signature: the sidecar records the
    status it set, and a forward whose body changed on the way is refused."""
    payload = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "1",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "statuses": [{"id": "wamid.F", "status": "delivered", "biz_opaque_callback_data": "fw-1"}]
                        },
                    }
                ],
            }
        ],
    }
    body = json.dumps(payload).encode()
    async with RelayClient(rig.sidecar.url, INGEST_TOKEN) as client:
        with pytest.raises(RelayError) as refused:
            await client.forward_whatsapp_webhook(body.replace(b"delivered", b"read"), signature(SECRET, body))
        assert refused.value.status == 401
        assert await client.forward_whatsapp_webhook(body, signature(SECRET, body)) == 1
    found = await rig.receipts.find("whatsapp", "fw-1")
    assert found is not None and found.message_id == "wamid.F" and found.landed
