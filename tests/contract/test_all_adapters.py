"""One contract, every platform with a mock: each adapter through its real SDK against its mock server.

Send, edit, "not modified" as success, too long, 429 with retry_after, a timeout after the platform stored
the message (uncertain), a 5xx or a reset after it stored a create (uncertain, then settled: found, once), a
formatting rejection (``bad_format``: the core then re-sends without markup), and a token that never leaks.
Per-platform details live in test_<platform>_contract.py and test_settle.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_adapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import (
    PayloadRejectedError,
    PermanentDeliveryError,
    RateLimitedError,
    RejectReason,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import ChannelAdapter, PendingSend, SettleOutcome, TextFormat
from streamrelay.mocks.common import MockPlatform


@dataclass(frozen=True)
class Names:
    send: str
    edit: str
    too_long: int  # code points the platform refuses in one message
    bad_format: dict[str, Any] | None  # the platform's answer to a formatting error, as a scripted fault
    edits: bool = True  # WhatsApp cannot edit or delete a sent message
    settles: bool = True  # WhatsApp cannot tell whether an uncertain send arrived (no idempotency key, no history)


NAMES = {
    "telegram": Names(
        "sendMessage", "editMessageText", 4097, {"status": 400, "description": "Bad Request: can't parse entities"}
    ),
    "slack": Names("chat.postMessage", "chat.update", 40_001, {"status": 400, "description": "invalid_blocks"}),
    "discord": Names("createMessage", "editMessage", 2001, None),  # Discord has no parse errors
    # An event is at most 65,536 bytes of JSON; a homeserver does not parse formatted_body: no formatting errors.
    "matrix": Names("send", "send", 65_537, None),
    # text.body at most 4,096 characters; WhatsApp's formatting marks are plain characters: no formatting errors.
    "whatsapp": Names("messages", "messages", 4097, None, edits=False, settles=False),
    # A message is at most ~100 KB of UTF-16 JSON (102,400 bytes: 51,200 characters and the envelope are past it);
    # Teams parses no Markdown it could refuse; no idempotency key and no history: an uncertain send stays unknown.
    "teams": Names("sendToConversation", "updateActivity", 51_200, None, settles=False),
}


@dataclass
class Rig:
    platform: str
    mock: MockPlatform
    adapter: ChannelAdapter
    target: Target
    names: Names

    def shown(self) -> list[str]:
        return [text for _, text in self.mock.visible(self.target.chat_id)]


@pytest.fixture(params=sorted(DRY_RUN))
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    platform: str = request.param
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": platform, "api_base": api, "send_timeout_ms": 600})
    adapter = make_adapter("c", settings, SecretStr(dry.token))
    try:
        yield Rig(platform, mock, adapter, dry.target(), NAMES[platform])
    finally:
        await adapter.close()
        await mock.stop()


async def test_send_then_edit_shows_the_latest_text(rig: Rig) -> None:
    mid = await rig.adapter.send_text(rig.target, "Hello", TextFormat.PLAIN)
    assert rig.shown() == ["Hello"]
    if not rig.names.edits:  # refused without a call: the message keeps its text
        calls = len(rig.mock.calls)
        with pytest.raises(PermanentDeliveryError):
            await rig.adapter.edit_text(rig.target, mid, "Hello, world", TextFormat.PLAIN)
        assert rig.shown() == ["Hello"] and len(rig.mock.calls) == calls
        return
    await rig.adapter.edit_text(rig.target, mid, "Hello, world", TextFormat.PLAIN)
    assert rig.shown() == ["Hello, world"]


async def test_an_unchanged_edit_is_success(rig: Rig) -> None:
    if not rig.names.edits:
        pytest.skip(f"{rig.platform} has no edits (test_send_then_edit_shows_the_latest_text checks the refusal)")
    mid = await rig.adapter.send_text(rig.target, "Same", TextFormat.PLAIN)
    changed = await rig.adapter.edit_text(rig.target, mid, "Same", TextFormat.PLAIN)
    assert changed in (True, False)  # Telegram says "not modified" (False); Slack and Discord answer ok
    assert rig.shown() == ["Same"]


async def test_a_message_over_the_platform_limit_is_rejected_as_too_long(rig: Rig) -> None:
    with pytest.raises(PayloadRejectedError) as info:
        await rig.adapter.send_text(rig.target, "x" * rig.names.too_long, TextFormat.PLAIN)
    assert info.value.reason is RejectReason.TOO_LONG
    assert rig.shown() == []


async def test_a_429_carries_retry_after_and_nothing_is_shown(rig: Rig) -> None:
    rig.mock.add_fault(rig.names.send, 1, {"status": 429, "retry_after_s": 2})
    with pytest.raises(RateLimitedError) as info:
        await rig.adapter.send_text(rig.target, "Hi", TextFormat.PLAIN)
    assert info.value.retry_after_s >= 2
    assert rig.shown() == []
    await rig.adapter.send_text(rig.target, "Hi", TextFormat.PLAIN)  # the adapter itself never waits or retries
    assert rig.shown() == ["Hi"]


async def test_a_timeout_after_the_platform_stored_the_message_is_uncertain(rig: Rig) -> None:
    rig.mock.add_fault(rig.names.send, 1, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await rig.adapter.send_text(rig.target, "Maybe", TextFormat.PLAIN)
    assert rig.shown() == ["Maybe"]  # it landed: the core must never send it again


@pytest.mark.parametrize("reply", [{"status": 502}, "reset"], ids=["502", "reset"])
async def test_a_create_stored_then_answered_badly_is_uncertain_and_settled_once(
    rig: Rig, reply: dict[str, Any] | str
) -> None:
    before = await rig.adapter.send_text(rig.target, "Before", TextFormat.PLAIN, delivery_id="sr-before")
    rig.mock.add_fault(rig.names.send, 2, reply, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await rig.adapter.send_text(rig.target, "Maybe", TextFormat.PLAIN, delivery_id="sr-maybe")
    assert rig.shown() == ["Before", "Maybe"]  # it landed

    pending = PendingSend("sr-maybe", "Maybe", TextFormat.PLAIN, after_id=before, exclusive=True)
    settled = await rig.adapter.settle_send(rig.target, pending)
    if not rig.names.settles:  # unknown: reported uncertain, never sent again; the chat shows it once
        assert settled.outcome is SettleOutcome.UNKNOWN
        assert rig.shown() == ["Before", "Maybe"]
        return

    [(stored_id, _)] = [(mid, text) for mid, text in rig.mock.visible(rig.target.chat_id) if text == "Maybe"]
    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, str(stored_id))
    assert rig.shown() == ["Before", "Maybe"]  # shown once


async def test_a_formatting_rejection_is_bad_format(rig: Rig) -> None:
    if rig.names.bad_format is None:
        pytest.skip(f"{rig.platform} has no formatting errors: its Markdown is sent as is")
    rig.mock.add_fault(rig.names.send, 1, rig.names.bad_format)
    with pytest.raises(PayloadRejectedError) as info:
        await rig.adapter.send_text(rig.target, "**bold**", TextFormat.MARKDOWN)
    assert info.value.reason is RejectReason.BAD_FORMAT


async def test_the_token_never_shows_in_the_adapter_or_its_errors(rig: Rig) -> None:
    token = DRY_RUN[rig.platform].token
    secret = token.split(":")[-1].split(".")[-1][-12:]
    assert secret not in repr(rig.adapter) and secret not in str(rig.adapter)
    rig.mock.add_fault(rig.names.edit, 1, {"status": 500})
    with pytest.raises(Exception) as info:
        if rig.names.edits:
            await rig.adapter.edit_text(rig.target, "1", "x", TextFormat.PLAIN)
        else:
            await rig.adapter.send_text(rig.target, "x", TextFormat.PLAIN)
    assert secret not in str(info.value) and secret not in repr(info.value)
