"""WhatsApp: WhatsAppAdapter through pywa against the mock Cloud API (mocks.whatsapp), what a person would see.

The shared contract is in test_all_adapters.py; here what is WhatsApp's own: the text body in WhatsApp's formatting,
media by link, typing on the person's message, no edits, the error codes (131047, 131056, 130429, 131026, 100, 190)
and the documented throughput and pair limits.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json

import httpx
import pytest
from aiohttp import web

from streamrelay.adapters.whatsapp import WhatsAppAdapter
from streamrelay.core.errors import (
    ConfigError,
    ForbiddenError,
    PayloadRejectedError,
    PermanentDeliveryError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.whatsapp import MockWhatsApp, WhatsAppLimits
from tests.contract.conftest import platform_fixtures
from tests.hooks import serve_hook

TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"
PERSON = "15551234567"
TARGET = Target(chat_id=PERSON)


mock, wa = platform_fixtures(
    MockWhatsApp, lambda url: WhatsAppAdapter(TOKEN, base_url=url, send_timeout_s=5.0), adapter="wa"
)


def shown(mock: MockWhatsApp) -> list[str]:
    return [text for _, text in mock.visible(PERSON)]


async def test_markdown_is_sent_in_whatsapps_own_formatting(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    text = "# Plan\n\n**bold** *it* ~~old~~ `x` [docs](https://e.x/d)\n\n- a\n- b\n\n> q\n\n"
    text += "| k | v |\n|---|---|\n| 1 | 2 |"
    await wa.send_text(TARGET, text, TextFormat.MARKDOWN)
    [body] = shown(mock)
    assert body.startswith("*Plan*\n\n*bold* _it_ ~old~ `x` docs (https://e.x/d)\n\n- a\n- b\n\n> q")
    assert body.endswith("```\nk | v\n--+--\n1 | 2\n```")  # a table is a monospace block
    [message] = mock.messages(PERSON)
    assert message.payload["type"] == "text" and message.payload["messaging_product"] == "whatsapp"


async def test_plain_text_goes_as_written(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    await wa.send_text(TARGET, "**as is**", TextFormat.PLAIN)
    assert shown(mock) == ["**as is**"]


async def test_there_are_no_edits_or_deletes(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mid = await wa.send_text(TARGET, "Hello", TextFormat.PLAIN)
    with pytest.raises(PermanentDeliveryError, match="cannot edit"):
        await wa.edit_text(TARGET, mid, "Hello!", TextFormat.PLAIN)
    with pytest.raises(PermanentDeliveryError, match="cannot edit or delete"):
        await wa.delete_message(TARGET, mid)
    assert shown(mock) == ["Hello"] and len(mock.calls) == 1


@pytest.mark.parametrize(
    ("kind", "typ"),
    [(MediaKind.IMAGE, "image"), (MediaKind.VIDEO, "video"), (MediaKind.FILE, "document"), (MediaKind.AUDIO, "audio")],
)
async def test_media_goes_by_link(mock: MockWhatsApp, wa: WhatsAppAdapter, kind: MediaKind, typ: str) -> None:
    caption = None if kind is MediaKind.AUDIO else "The **chart**"
    await wa.send_media(TARGET, MediaItem("https://e.x/files/chart.bin", kind, caption), TextFormat.MARKDOWN)
    [message] = mock.messages(PERSON)
    assert message.type == typ and message.payload[typ]["link"] == "https://e.x/files/chart.bin"
    assert message.text == ("" if caption is None else "The *chart*")


async def test_audio_with_a_caption_goes_as_a_document_that_keeps_it(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    await wa.send_media(TARGET, MediaItem("https://e.x/a.ogg", MediaKind.AUDIO, "Voice note"), TextFormat.PLAIN)
    [message] = mock.messages(PERSON)
    assert message.type == "document" and message.text == "Voice note"  # audio messages take no caption


async def test_typing_marks_the_persons_message_read_with_the_indicator(
    mock: MockWhatsApp, wa: WhatsAppAdapter
) -> None:
    incoming = mock.user_message(PERSON, "How do I get a refund?")
    await wa.send_typing(Target(chat_id=PERSON, reply_to=incoming))
    assert mock.typing_for(PERSON) == incoming
    await wa.send_typing(TARGET)  # no incoming message id: no call (typing needs one)
    assert [c.description for c in mock.calls] == ["read, typing"]


async def test_a_reply_carries_the_context_message_id(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    incoming = mock.user_message(PERSON, "Question")
    await wa.send_text(Target(chat_id=PERSON, reply_to=incoming), "Answer", TextFormat.PLAIN)
    assert mock.messages(PERSON)[-1].payload["context"] == {"message_id": incoming}


async def test_a_closed_customer_service_window_is_a_clear_failure(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mock.closed_windows.add(PERSON)
    with pytest.raises(ForbiddenError, match="24-hour customer service window is closed") as info:
        await wa.send_text(TARGET, "Hi", TextFormat.PLAIN)
    assert "131047" in str(info.value)
    assert shown(mock) == []
    mock.user_message(PERSON, "hello again")  # the person writes: the window opens
    await wa.send_text(TARGET, "Hi", TextFormat.PLAIN)
    assert shown(mock) == ["Hi"]


async def test_the_pair_rate_limit_is_rate_limited_for_this_person(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mock.add_fault("messages", 1, {"status": 400, "description": "131056: pair rate limit hit"})
    with pytest.raises(RateLimitedError) as info:
        await wa.send_text(TARGET, "Hi", TextFormat.PLAIN)
    assert info.value.retry_after_s == 6.0 and info.value.scope is RateScope.CONVERSATION


async def test_throughput_is_rate_limited_bot_wide(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mock.add_fault("messages", 1, {"status": 400, "description": "130429: Rate limit hit"})
    with pytest.raises(RateLimitedError) as info:
        await wa.send_text(TARGET, "Hi", TextFormat.PLAIN)
    assert info.value.scope is RateScope.BOT


async def test_undeliverable_is_target_not_found(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    mock.add_fault("messages", 1, {"status": 400, "description": "131026: Message Undeliverable"})
    with pytest.raises(TargetNotFoundError):
        await wa.send_text(TARGET, "Hi", TextFormat.PLAIN)


async def test_too_long_is_code_100_naming_the_limit(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    with pytest.raises(PayloadRejectedError) as info:
        await wa.send_text(TARGET, "x" * 4097, TextFormat.PLAIN)
    assert info.value.reason is RejectReason.TOO_LONG
    await wa.send_text(TARGET, "x" * 4096, TextFormat.PLAIN)
    assert shown(mock) == ["x" * 4096]


async def test_an_invalid_parameter_is_rejected(mock: MockWhatsApp, wa: WhatsAppAdapter) -> None:
    with pytest.raises(PayloadRejectedError) as info:
        await wa.send_media(TARGET, MediaItem("https://e.x/a.png", MediaKind.IMAGE, "c" * 1025), TextFormat.PLAIN)
    assert info.value.reason is RejectReason.OTHER


async def test_a_bad_token_is_forbidden_and_never_shown(mock: MockWhatsApp) -> None:
    adapter = WhatsAppAdapter("106540352242922:not-a-token-secret42", base_url=mock.base_url)
    try:
        with pytest.raises(ForbiddenError) as info:
            await adapter.send_text(TARGET, "Hi", TextFormat.PLAIN)
        assert "190" in str(info.value) and "secret42" not in str(info.value)
    finally:
        await adapter.close()


def test_a_malformed_token_is_a_config_error_naming_the_shape() -> None:
    with pytest.raises(ConfigError, match="PHONE_NUMBER_ID:ACCESS_TOKEN") as info:
        WhatsAppAdapter("EAAjustatokensecret")
    assert "justatokensecret" not in str(info.value)


async def test_the_documented_pair_limit_refuses_the_46th_message_in_a_burst() -> None:
    async with MockWhatsApp(rate_limits=True, limits=WhatsAppLimits(per_second=1000, burst=1000)) as mock:
        adapter = WhatsAppAdapter(TOKEN, base_url=mock.base_url)
        try:
            for n in range(45):
                await adapter.send_text(TARGET, f"m{n}", TextFormat.PLAIN)
            with pytest.raises(RateLimitedError) as info:
                await adapter.send_text(TARGET, "one too many", TextFormat.PLAIN)
            assert "131056" in str(info.value) and info.value.scope is RateScope.CONVERSATION
            await adapter.send_text(Target(chat_id="15559999999"), "another person", TextFormat.PLAIN)
        finally:
            await adapter.close()
    assert len(mock.visible(PERSON)) == 45


def test_check_target_names_what_is_wrong() -> None:
    adapter = WhatsAppAdapter(TOKEN, base_url="http://127.0.0.1:9")
    assert adapter.check_target(TARGET) is None
    assert "WhatsApp user id" in (adapter.check_target(Target(chat_id="+1 555")) or "")
    assert "no threads" in (adapter.check_target(Target(chat_id=PERSON, thread_id="t")) or "")
    assert "wamid" in (adapter.check_target(Target(chat_id=PERSON, reply_to="42")) or "")


async def test_the_mocks_status_webhooks_are_signed_echo_the_callback_data_and_are_delivered_again(
    mock: MockWhatsApp, wa: WhatsAppAdapter
) -> None:
    """The mock posts ``sent`` then ``delivered`` for a stored message, echoing ``biz_opaque_callback_data`` (the
    delivery id pywa sent as ``tracker``), signed ``X-Hub-Signature-256``; a delivery answered 503 comes again."""
    got: list[tuple[str | None, bytes]] = []
    answers = [503]

    async def take(request: web.Request) -> web.Response:
        got.append((request.headers.get("X-Hub-Signature-256"), await request.read()))
        return web.Response(status=answers.pop(0) if answers else 200)

    async with serve_hook(take) as url:
        async with httpx.AsyncClient(timeout=10) as client:
            refused = await client.post(f"{mock.control_url}/webhook", json={"url": url})
            assert refused.status_code == 400 and refused.json()["field"] == "app_secret"
            ok = await client.post(f"{mock.control_url}/webhook", json={"url": url, "app_secret": "s3"})
            assert ok.status_code == 200
        mid = await wa.send_text(TARGET, "Hello", TextFormat.PLAIN, delivery_id="sr0123456789abcdef012345")
        for _ in range(200):
            if len(got) >= 3:
                break
            await asyncio.sleep(0.05)
    assert [m.payload.get("biz_opaque_callback_data") for m in mock.messages(PERSON)] == ["sr0123456789abcdef012345"]
    assert len(got) == 3  # sent (503, then again), delivered
    for header, body in got:
        assert header == "sha256=" + hmac.new(b"s3", body, hashlib.sha256).hexdigest()
    statuses = [json.loads(body)["entry"][0]["changes"][0]["value"]["statuses"][0] for _, body in got]
    assert [s["status"] for s in statuses] == ["sent", "sent", "delivered"]
    assert {(s["id"], s["biz_opaque_callback_data"], s["recipient_id"]) for s in statuses} == {
        (mid, "sr0123456789abcdef012345", PERSON)
    }
    assert mock.statuses is not None and mock.statuses.answers == [503, 200, 200]
