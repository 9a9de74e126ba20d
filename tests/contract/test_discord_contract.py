"""Contract: DiscordAdapter (discord.py, REST only) against MockDiscord over loopback HTTP.

Assertions read what a person would see (the mock's stored messages) and what the platform received.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import traceback

import pytest
from aiohttp import web

from streamrelay.adapters.discord import DiscordAdapter
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    ForbiddenError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from streamrelay.core.units import LengthUnit
from streamrelay.mocks.discord import Bucket, DiscordLimits, MockDiscord
from tests.contract.conftest import DISCORD_TOKEN, MakeDiscord
from tests.ports import free_port

pytestmark = pytest.mark.timeout(5)

BOT_ID = "123456789012345678"
HMAC = "mock_Secret-Hmac_0123456789abcdefgh"
TOKEN = DISCORD_TOKEN
"""Shaped like a real bot token (base64 user id, timestamp, HMAC), so scrubbing is tested for real."""
assert f"{base64.urlsafe_b64encode(BOT_ID.encode()).decode().rstrip('=')}.GmOcKz.{HMAC}" == TOKEN
CHANNEL = 1100000000000000001
OTHER_CHANNEL = 1100000000000000002
THREAD = 1200000000000000001
CHAT = Target(chat_id=CHANNEL)
PLAIN = TextFormat.PLAIN


@pytest.fixture
def adapter(discord_adapter: DiscordAdapter) -> DiscordAdapter:
    """The adapter with a 2 s timeout, on the mock (the conftest's)."""
    return discord_adapter


def methods(mock: MockDiscord) -> list[str]:
    return [call.method for call in mock.calls]


def sends(mock: MockDiscord) -> list[int | None]:
    return [call.status for call in mock.calls if call.method == "createMessage"]


# ------------------------------------------------------------------ happy paths


async def test_send_stores_the_content_as_sent(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    first = await adapter.send_text(CHAT, "Hello", PLAIN)
    second = await adapter.send_text(CHAT, "  **world** \n", TextFormat.MARKDOWN)

    assert first.isdigit() and int(second) > int(first)
    assert discord_mock.visible(CHANNEL) == [(first, "Hello"), (second, "  **world** \n")]
    assert methods(discord_mock) == [
        "getCurrentUser",  # the lazy login, once
        "getCurrentBotApplicationInformation",
        "createMessage",
        "createMessage",
    ]


async def test_edit_replaces_the_content(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    message_id = await adapter.send_text(CHAT, "Hel", PLAIN)
    changed = await adapter.edit_text(CHAT, message_id, "Hello", PLAIN)
    unchanged = await adapter.edit_text(CHAT, message_id, "Hello", PLAIN)

    assert (changed, unchanged) == (True, True)  # Discord answers 200 for an unchanged edit
    assert discord_mock.visible(CHANNEL) == [(message_id, "Hello")]
    assert [c.status for c in discord_mock.calls if c.method == "editMessage"] == [200, 200]


async def test_delete_removes_the_message(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    one = await adapter.send_text(CHAT, "one", PLAIN)
    two = await adapter.send_text(CHAT, "two", PLAIN)
    await adapter.delete_message(CHAT, one)

    assert discord_mock.visible(CHANNEL) == [(two, "two")]
    with pytest.raises(TargetNotFoundError, match="Unknown Message"):
        await adapter.delete_message(CHAT, one)


async def test_typing_is_triggered(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    await adapter.send_typing(Target(chat_id=CHANNEL, thread_id=THREAD))

    assert [(c.method, c.chat_id, c.status) for c in discord_mock.calls[2:]] == [
        ("triggerTypingIndicator", str(THREAD), 204)
    ]
    assert discord_mock.chats() == []


async def test_threads_and_replies(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    question = discord_mock.post_user_message(THREAD, "question")
    in_thread = Target(chat_id=CHANNEL, thread_id=THREAD, reply_to=question)
    answer = await adapter.send_text(in_thread, "answer", PLAIN)
    await adapter.edit_text(in_thread, answer, "answer, edited", PLAIN)
    gone = await adapter.send_text(Target(chat_id=CHANNEL, reply_to=42), "reply target gone", PLAIN)

    assert [(m.content, m.reference) for m in discord_mock.messages(THREAD)] == [
        ("question", None),
        ("answer, edited", question),
    ]
    assert discord_mock.visible(THREAD) == [(answer, "answer, edited")]  # a thread is a channel
    assert discord_mock.visible(CHANNEL) == [(gone, "reply target gone")]
    assert discord_mock.messages(CHANNEL)[0].reference is None  # fail_if_not_exists=False


async def test_model_output_never_pings(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    message_id = await adapter.send_text(CHAT, "@everyone look <@42>", PLAIN)
    [sent] = discord_mock.messages(CHANNEL)
    state_after_send = (sent.mention_everyone, sent.mentions, sent.allowed_mentions)
    await adapter.edit_text(CHAT, message_id, "@here and <@42>", PLAIN)

    [edited] = discord_mock.messages(CHANNEL)
    assert state_after_send == (False, [], {"parse": []})
    assert (edited.mention_everyone, edited.mentions, edited.allowed_mentions) == (False, [], {"parse": []})
    assert edited.content == "@here and <@42>"


# ------------------------------------------------------------------ formatting and measuring


async def test_stripped_drops_the_markup_but_keeps_links(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    await adapter.send_text(CHAT, "# Plan\n\nRun **make** and read [docs](https://x.org/a)", TextFormat.STRIPPED)

    assert [text for _, text in discord_mock.visible(CHANNEL)] == ["Plan\n\nRun make and read docs (https://x.org/a)"]


def test_measure_counts_utf16_units_of_what_is_sent(adapter: DiscordAdapter) -> None:
    assert (adapter.platform, adapter.unit, adapter.max_units) == ("discord", LengthUnit.UTF16, 2000)
    assert adapter.measure("🎩 **x**", TextFormat.MARKDOWN) == 8
    assert adapter.measure("🎩 **x**", PLAIN) == 8
    assert adapter.measure("🎩 **x**", TextFormat.STRIPPED) == 4


def test_targets_are_snowflakes(adapter: DiscordAdapter) -> None:
    assert adapter.check_target(Target(chat_id=CHANNEL, thread_id=str(THREAD), reply_to="42")) is None
    problem = adapter.check_target(Target(chat_id="general"))
    assert problem == "chat_id 'general' must be a Discord snowflake id (digits)"
    assert adapter.check_target(Target(chat_id=-100123)) is not None
    assert adapter.check_target(Target(chat_id=CHANNEL, reply_to="x1")) is not None
    assert adapter.is_group(CHAT) is True


# ------------------------------------------------------------------ refusals


async def test_too_long_is_rejected(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    await adapter.send_text(CHAT, "x" * 2000, PLAIN)
    await adapter.send_text(CHAT, "🎩" * 1000, PLAIN)  # 2000 UTF-16 units: the adapter's own limit

    with pytest.raises(PayloadRejectedError, match="2000 or fewer") as raised:
        await adapter.send_text(CHAT, "x" * 2001, PLAIN)

    assert raised.value.reason is RejectReason.TOO_LONG
    assert (raised.value.platform, raised.value.target) == ("discord", str(CHANNEL))
    assert [len(text) for _, text in discord_mock.visible(CHANNEL)] == [2000, 1000]


@pytest.mark.parametrize("text", ["", " \n\t "])
async def test_empty_is_rejected(adapter: DiscordAdapter, discord_mock: MockDiscord, text: str) -> None:
    with pytest.raises(PayloadRejectedError) as raised:
        await adapter.send_text(CHAT, text, PLAIN)

    assert raised.value.reason is RejectReason.EMPTY
    assert discord_mock.visible(CHANNEL) == []


async def test_unknown_targets_are_not_found(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    await adapter.send_text(CHAT, "Hello", PLAIN)
    discord_mock.missing_channels.add(str(OTHER_CHANNEL))

    with pytest.raises(TargetNotFoundError, match="10008"):
        await adapter.edit_text(CHAT, "99", "Hi", PLAIN)
    with pytest.raises(TargetNotFoundError, match="Unknown Channel"):
        await adapter.send_text(Target(chat_id=OTHER_CHANNEL), "Hi", PLAIN)
    with pytest.raises(TargetNotFoundError, match="not a snowflake"):
        await adapter.edit_text(CHAT, "abc", "Hi", PLAIN)


async def test_someone_elses_message_is_forbidden(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    theirs = discord_mock.post_user_message(CHANNEL, "a person's question")

    with pytest.raises(ForbiddenError, match="50005"):
        await adapter.edit_text(CHAT, theirs, "hijacked", PLAIN)
    with pytest.raises(ForbiddenError, match="Missing Permissions"):
        await adapter.delete_message(CHAT, theirs)


async def test_a_refused_token_is_forbidden_then_retried(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    discord_mock.add_fault("getCurrentUser", 1, {"status": 401})

    with pytest.raises(ForbiddenError, match="Improper token"):
        await adapter.send_text(CHAT, "Hello", PLAIN)
    await adapter.send_text(CHAT, "Hello", PLAIN)  # a failed login is not remembered

    assert methods(discord_mock) == [
        "getCurrentUser",
        "getCurrentUser",
        "getCurrentBotApplicationInformation",
        "createMessage",
    ]


# ------------------------------------------------------------------ rate limits: one retry layer, ours


async def test_a_429_is_rate_limited_and_not_retried(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    discord_mock.add_fault("editMessage", 1, {"status": 429, "retry_after_s": 2.5})
    message_id = await adapter.send_text(CHAT, "A", PLAIN)
    started = time.monotonic()

    with pytest.raises(RateLimitedError, match=r"editMessage: RateLimitAnswer: 429 .*\(scope user\)") as raised:
        await adapter.edit_text(CHAT, message_id, "AB", PLAIN)

    assert time.monotonic() - started < 0.5  # discord.py did not sleep 2.5 s ...
    assert methods(discord_mock)[-2:] == ["createMessage", "editMessage"]  # ... nor retry
    assert (raised.value.retry_after_s, raised.value.scope) == (2.5, RateScope.CONVERSATION)
    assert discord_mock.calls[-1].retry_after_s == 2.5
    assert discord_mock.visible(CHANNEL) == [(message_id, "A")]


async def test_discord_py_alone_would_sleep_and_retry(
    discord_mock: MockDiscord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the adapter switches off: plain discord.py waits out a 429 inside the call and sends again."""
    import discord  # after adapters.discord: its import silenced discord.py's audioop warning

    monkeypatch.setattr(discord.http.Route, "BASE", discord_mock.base_url)
    discord_mock.add_fault("createMessage", 1, {"status": 429, "retry_after_s": 0.2})
    client = discord.Client(intents=discord.Intents.none())
    try:
        await client.login(TOKEN)
        started = time.monotonic()
        await client.get_partial_messageable(CHANNEL).send("hi")
        elapsed_s = time.monotonic() - started
    finally:
        await client.close()

    assert sends(discord_mock) == [429, 200]
    assert elapsed_s >= 0.2


async def test_documented_limits_are_paced_by_discord_py(make_discord: MakeDiscord) -> None:
    """discord.py reads the bucket headers and waits before the platform has to refuse: no 429."""
    async with MockDiscord(rate_limits=True, limits=DiscordLimits(create_message=Bucket(2, 0.4))) as mock:
        adapter = make_discord(base_url=mock.base_url)
        for text in ("one", "two", "three"):
            await adapter.send_text(CHAT, text, PLAIN)

    creates = [call for call in mock.calls if call.method == "createMessage"]
    assert sends(mock) == [200, 200, 200]
    assert creates[2].t - creates[0].t >= 0.35
    assert [text for _, text in mock.visible(CHANNEL)] == ["one", "two", "three"]


async def test_a_call_held_in_the_bucket_past_the_timeout_is_rate_limited(make_discord: MakeDiscord) -> None:
    async with MockDiscord(rate_limits=True, limits=DiscordLimits(create_message=Bucket(1, 0.6))) as mock:
        adapter = make_discord(base_url=mock.base_url, send_timeout_s=0.2)
        await adapter.send_typing(CHAT)  # log in first
        first, second = await asyncio.gather(
            adapter.send_text(CHAT, "a", PLAIN), adapter.send_text(CHAT, "b", PLAIN), return_exceptions=True
        )

    assert isinstance(first, str)  # delivered, though discord.py then slept 0.6 s in the emptied bucket
    assert isinstance(second, RateLimitedError)
    assert 0.2 < second.retry_after_s <= 0.6
    assert sends(mock) == [200]  # the second never left discord.py's bucket


async def test_a_global_429_pauses_the_whole_bot(make_discord: MakeDiscord) -> None:
    async with MockDiscord(rate_limits=True, limits=DiscordLimits(global_per_s=3)) as mock:
        adapter = make_discord(base_url=mock.base_url)
        await adapter.send_text(CHAT, "one", PLAIN)  # the two login calls and this one: 3 in a second
        with pytest.raises(RateLimitedError) as raised:
            await adapter.send_text(Target(chat_id=OTHER_CHANNEL), "two", PLAIN)

    assert raised.value.scope is RateScope.BOT
    assert 0 < raised.value.retry_after_s <= 1.0
    assert sends(mock) == [200, 429]


async def test_a_429_without_via_is_a_cloudflare_ban(make_discord: MakeDiscord) -> None:
    async def banned(request: web.Request) -> web.Response:
        headers = {"Retry-After": "7"}  # no Via, no JSON: Cloudflare, not Discord
        return web.Response(status=429, text="<h1>Error 1015</h1>", content_type="text/html", headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", banned)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        adapter = make_discord(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}/api/v10")
        with pytest.raises(RateLimitedError, match="Cloudflare ban") as raised:
            await adapter.send_text(CHAT, "Hello", PLAIN)
    finally:
        await runner.cleanup()

    assert (raised.value.retry_after_s, raised.value.scope) == (7.0, RateScope.BOT)


# ------------------------------------------------------------------ transient failures


async def test_5xx_to_a_create_is_uncertain_and_not_retried(adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    discord_mock.add_fault("createMessage", 1, {"status": 502})
    started = time.monotonic()

    with pytest.raises(UncertainDeliveryError, match="Bad Gateway"):  # Discord may have stored it
        await adapter.send_text(CHAT, "Hello", PLAIN)

    assert time.monotonic() - started < 0.5  # discord.py would have slept 1 s and retried
    assert sends(discord_mock) == [502]
    assert discord_mock.visible(CHANNEL) == []


async def test_5xx_to_an_edit_or_delete_is_platform_unavailable(
    adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    mid = await adapter.send_text(CHAT, "Hello", PLAIN)
    discord_mock.add_fault("editMessage", 1, {"status": 503})
    discord_mock.add_fault("deleteMessage", 1, {"status": 500})

    with pytest.raises(PlatformUnavailableError, match="Service Unavailable"):  # an edit is safe to repeat
        await adapter.edit_text(CHAT, mid, "Hello, world", PLAIN)
    with pytest.raises(PlatformUnavailableError, match="Internal Server Error"):
        await adapter.delete_message(CHAT, mid)

    assert discord_mock.visible(CHANNEL) == [(mid, "Hello")]


async def test_connection_refused_is_platform_unavailable(make_discord: MakeDiscord) -> None:
    adapter = make_discord(base_url=f"http://127.0.0.1:{free_port()}/api/v10")
    started = time.monotonic()

    with pytest.raises(PlatformUnavailableError, match="login"):
        await adapter.send_text(CHAT, "Hello", PLAIN)

    assert 0.7 <= time.monotonic() - started < 2.0  # three login attempts, 0.25 s and 0.5 s apart


async def test_login_retries_connection_errors(make_discord: MakeDiscord) -> None:
    port = free_port()
    adapter = make_discord(base_url=f"http://127.0.0.1:{port}/api/v10")
    mock = MockDiscord()

    async def start_soon() -> None:
        await asyncio.sleep(0.1)
        await mock.start(port=port)

    starter = asyncio.create_task(start_soon())
    try:
        message_id = await adapter.send_text(CHAT, "Hello", PLAIN)  # attempt 1 refused, attempt 2 at 0.25 s
        assert mock.visible(CHANNEL) == [(message_id, "Hello")]
    finally:
        await starter
        await mock.stop()


async def test_timeout_after_commit_is_uncertain_and_landed(
    make_discord: MakeDiscord, discord_mock: MockDiscord
) -> None:
    adapter = make_discord(send_timeout_s=0.3)
    await adapter.send_typing(CHAT)  # log in first
    discord_mock.add_fault("createMessage", 1, "timeout_after_commit")
    started = time.monotonic()

    with pytest.raises(UncertainDeliveryError, match="sent"):
        await adapter.send_text(CHAT, "Hello", PLAIN)

    assert 0.25 < time.monotonic() - started < 1.0
    assert [text for _, text in discord_mock.visible(CHANNEL)] == ["Hello"]
    assert sends(discord_mock) == [None]


async def test_timeout_before_commit_is_uncertain_and_lost(
    make_discord: MakeDiscord, discord_mock: MockDiscord
) -> None:
    adapter = make_discord(send_timeout_s=0.3)
    discord_mock.add_fault("createMessage", 1, "timeout_before_commit")

    with pytest.raises(UncertainDeliveryError):
        await adapter.send_text(CHAT, "Hello", PLAIN)
    next_id = await adapter.send_text(CHAT, "next", PLAIN)

    assert discord_mock.visible(CHANNEL) == [(next_id, "next")]


async def test_latency_past_the_timeout_lands_later(make_discord: MakeDiscord, discord_mock: MockDiscord) -> None:
    adapter = make_discord(send_timeout_s=0.1)
    await adapter.send_typing(CHAT)
    discord_mock.set_latency("createMessage", [250])

    with pytest.raises(UncertainDeliveryError):
        await adapter.send_text(CHAT, "late", PLAIN)
    assert discord_mock.visible(CHANNEL) == []
    for _ in range(50):  # the mock still processes the call the client gave up on
        await asyncio.sleep(0.02)
        if discord_mock.visible(CHANNEL):
            break

    assert [text for _, text in discord_mock.visible(CHANNEL)] == ["late"]


async def test_a_closed_adapter_refuses_calls(adapter: DiscordAdapter) -> None:
    await adapter.close()
    await adapter.close()  # idempotent

    with pytest.raises(PlatformUnavailableError, match="closed"):
        await adapter.send_text(CHAT, "Hello", PLAIN)


# ------------------------------------------------------------------ configuration and secrets


async def test_one_base_url_per_process(make_discord: MakeDiscord, discord_mock: MockDiscord) -> None:
    import discord

    elsewhere = "http://127.0.0.1:1/api/v10"
    first = make_discord()
    with pytest.raises(ConfigError, match="process-wide"):
        make_discord(base_url=elsewhere)
    same = make_discord()
    shared_base = discord.http.Route.BASE

    await first.close()
    await same.close()
    make_discord(base_url=elsewhere)  # no open adapter uses another base any more

    assert (shared_base, discord.http.Route.BASE) == (discord_mock.base_url, elsewhere)


def test_a_malformed_token_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        DiscordAdapter("Bot not-a-token-s3cr3t")

    assert "s3cr3t" not in str(raised.value)


async def test_the_token_is_never_shown(
    make_discord: MakeDiscord, discord_mock: MockDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    adapter = make_discord(send_timeout_s=0.3)
    refused = make_discord()
    discord_mock.add_fault("createMessage", 1, {"status": 502})
    discord_mock.add_fault("createMessage", 2, "timeout_before_commit")
    discord_mock.add_fault("createMessage", 3, {"status": 429, "retry_after_s": 1})
    discord_mock.add_fault("getCurrentUser", 2, {"status": 401})
    errors: list[DeliveryError] = []
    for text in ("a", "b", "c", "x" * 2001):
        with pytest.raises(DeliveryError) as raised:
            await adapter.send_text(CHAT, text, PLAIN)
        errors.append(raised.value)
    with pytest.raises(DeliveryError) as login:
        await refused.send_text(CHAT, "d", PLAIN)
    errors.append(login.value)

    shown = [repr(adapter), str(adapter), caplog.text]
    shown += ["".join(traceback.format_exception(error)) + repr(error) for error in errors]
    assert all(secret not in text for text in shown for secret in (TOKEN, HMAC))
    assert all(error.__context__ is None and error.__cause__ is None for error in errors)
    assert [type(error) for error in errors] == [
        UncertainDeliveryError,  # a 502 to a create
        AnswerTimeoutError,  # no answer in time
        RateLimitedError,
        PayloadRejectedError,
        ForbiddenError,
    ]
    assert repr(adapter) == f"DiscordAdapter(bot_id='{BOT_ID}', base_url='{discord_mock.base_url}')"
