"""Teams: an uncertain send settled by reading the conversation back through Microsoft Graph, TeamsAdapter (the Teams
SDK for the Connector, httpx for Graph) against the mock, which serves Graph's list calls over the activities it
stored (adapters/teams/graph.py, mocks/teams/graph.py).

A create the mock stored and then answered 5xx for, or held past the client's timeout, is found once (never sent
again); one it did not store is ``not_sent`` (the core sends it again); a personal chat is named in Graph through its
person's Entra id (the Connector's member list) and the app's installation for them; without the Graph permission
(403), or where the chat cannot be named, the answer is ``unknown`` (reported uncertain, as without Graph); Graph's
429 is a ``RateLimitedError`` with its Retry-After (the core asks again later).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from streamrelay.adapters.teams import TeamsAdapter
from streamrelay.app.service import make_adapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import ConfigError, RateLimitedError, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import PendingSend, SettleOutcome, TextFormat
from streamrelay.mocks.teams import MockTeams

SECRET = "Xy7Q~mockClientSecret.0123456789abcdef"
APP = "11111111-2222-4333-8444-555555555555"
TOKEN = f"{APP}:{SECRET}"
TENANT = "99999999-8888-4777-8666-555555555555"
TEAM = "22222222-3333-4444-8555-666666666666"
GROUP = Target(chat_id="19:graphsettle@thread.v2")
CHANNEL = "19:general0123@thread.tacv2"


@pytest.fixture
async def mock() -> AsyncIterator[MockTeams]:
    async with MockTeams(hang_s=2.0) as server:
        yield server


@pytest.fixture
async def teams(mock: MockTeams) -> AsyncIterator[TeamsAdapter]:
    mock.reset()
    adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.6)
    adapter.use_graph(TENANT, TEAM, window_s=0.0)
    yield adapter
    await adapter.close()


def shown(mock: MockTeams, chat: str = str(GROUP.chat_id)) -> list[str]:
    return [text for _, text in mock.visible(chat)]


def methods(mock: MockTeams) -> list[str]:
    return [c.method for c in mock.calls]


async def test_a_create_stored_then_answered_502_is_found_once(mock: MockTeams, teams: TeamsAdapter) -> None:
    await teams.send_text(GROUP, "before it", TextFormat.PLAIN, delivery_id="sr-0")
    mock.add_fault("sendToConversation", 2, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, "**maybe** it landed", TextFormat.MARKDOWN, delivery_id="sr-1")
    stored = mock.visible(str(GROUP.chat_id))[-1][0]
    first = mock.visible(str(GROUP.chat_id))[0][0]
    settled = await teams.settle_send(
        GROUP, PendingSend("sr-1", "**maybe** it landed", TextFormat.MARKDOWN, after_id=str(first))
    )
    assert settled.outcome is SettleOutcome.FOUND and settled.message_id == stored
    assert shown(mock) == ["before it", "**maybe** it landed"]  # once: nothing sent again
    assert methods(mock)[-2:] == ["token", "listChatMessages"]  # the Graph token, then one page


async def test_a_create_that_timed_out_after_teams_stored_it_is_found(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.add_fault("sendToConversation", 1, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, "slow answer", TextFormat.PLAIN, delivery_id="sr-2")
    settled = await teams.settle_send(GROUP, PendingSend("sr-2", "slow answer", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.FOUND
    assert shown(mock) == ["slow answer"]


async def test_a_create_teams_never_stored_is_not_sent_and_sent_again_once(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    mock.add_fault("sendToConversation", 1, {"status": 503})
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, "lost on the way", TextFormat.PLAIN, delivery_id="sr-3")
    settled = await teams.settle_send(GROUP, PendingSend("sr-3", "lost on the way", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.NOT_SENT
    await teams.send_text(GROUP, "lost on the way", TextFormat.PLAIN, delivery_id="sr-4")  # the core's resend
    assert shown(mock) == ["lost on the way"]


async def test_without_the_graph_permission_the_send_stays_uncertain(
    mock: MockTeams, teams: TeamsAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    mock.graph_permission = False
    mock.add_fault("sendToConversation", 1, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, "maybe", TextFormat.PLAIN, delivery_id="sr-5")
    settled = await teams.settle_send(GROUP, PendingSend("sr-5", "maybe", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.UNKNOWN
    assert [c.status for c in mock.calls if c.method == "listChatMessages"] == [403]
    warned = [r.getMessage() for r in caplog.records if r.name == "streamrelay.teams.graph"]
    assert len(warned) == 1 and "ChatMessage.Read.Chat" in warned[0] and SECRET not in warned[0]


async def test_graph_throttling_is_a_429_with_its_wait(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.add_fault("listChatMessages", 1, {"status": 429, "retry_after_s": 3})
    with pytest.raises(RateLimitedError) as info:
        await teams.settle_send(GROUP, PendingSend("sr-6", "x", TextFormat.PLAIN))
    assert info.value.retry_after_s == 3.0
    assert SECRET not in str(info.value)


async def test_the_message_is_found_on_a_later_page_and_only_past_the_bound(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    old = await teams.send_text(GROUP, "same words", TextFormat.PLAIN, delivery_id="sr-7")
    bound = await teams.send_text(GROUP, "the bound", TextFormat.PLAIN, delivery_id="sr-8")
    pending = PendingSend("sr-9", "same words", TextFormat.PLAIN, after_id=bound)
    assert (await teams.settle_send(GROUP, pending)).outcome is SettleOutcome.NOT_SENT  # the older copy is not it
    landed = await teams.send_text(GROUP, "same words", TextFormat.PLAIN, delivery_id="sr-9")
    for n in range(60):  # 60 newer messages: the create is on the second page of 50
        mock.user_message(str(GROUP.chat_id), f"person {n}")
    settled = await teams.settle_send(GROUP, pending)
    assert settled.outcome is SettleOutcome.FOUND and settled.message_id == landed != old
    assert methods(mock).count("listChatMessages") == 3
    taken = PendingSend("sr-9", "same words", TextFormat.PLAIN, after_id=bound, known_ids=frozenset({landed}))
    assert (await teams.settle_send(GROUP, taken)).outcome is SettleOutcome.NOT_SENT  # another part's message


async def test_a_reply_in_a_channel_thread_and_a_media_card_are_found(mock: MockTeams, teams: TeamsAdapter) -> None:
    root = await teams.send_text(Target(chat_id=CHANNEL), "status line", TextFormat.PLAIN, delivery_id="sr-10")
    thread = Target(chat_id=CHANNEL, thread_id=root)
    mock.add_fault("replyToActivity", 1, {"status": 500}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(thread, "in the thread", TextFormat.PLAIN, delivery_id="sr-11")
    settled = await teams.settle_send(thread, PendingSend("sr-11", "in the thread", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.FOUND
    assert "listMessageReplies" in methods(mock)
    media = MediaItem(kind=MediaKind.IMAGE, url="https://example.com/a.png", caption="a chart")
    mock.add_fault("sendToConversation", 2, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_media(Target(chat_id=CHANNEL), media, TextFormat.PLAIN, delivery_id="sr-12")
    pending = PendingSend("sr-12", media.text(), TextFormat.PLAIN, media=media, known_ids=frozenset({root}))
    assert (await teams.settle_send(Target(chat_id=CHANNEL), pending)).outcome is SettleOutcome.FOUND


PERSONAL = Target(chat_id="a:1PersonalChatWithTheBot")


async def test_a_personal_chat_is_named_through_its_member_and_the_apps_installation(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    await teams.send_text(PERSONAL, "hello", TextFormat.PLAIN, delivery_id="sr-13")
    mock.add_fault("sendToConversation", 2, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(PERSONAL, "a personal answer", TextFormat.MARKDOWN, delivery_id="sr-14")
    first, stored = (mid for mid, _ in mock.visible(str(PERSONAL.chat_id)))
    calls = len(mock.calls)
    pending = PendingSend("sr-14", "a personal answer", TextFormat.MARKDOWN, after_id=str(first))
    settled = await teams.settle_send(PERSONAL, pending)
    assert settled.outcome is SettleOutcome.FOUND and settled.message_id == stored
    assert shown(mock, str(PERSONAL.chat_id)) == ["hello", "a personal answer"]  # once
    # the person's Entra id from the Connector, the app's installation for them (OneNote passed over), its chat, read
    assert methods(mock)[calls:] == [
        "getConversationMembers",
        "token",
        "listInstalledApps",
        "getInstalledAppChat",
        "listChatMessages",
    ]
    listed = [c for c in mock.calls if c.method == "listChatMessages"][-1]
    assert str(listed.chat_id).endswith("@unq.gbl.spaces")
    # the chat's Graph id is kept: a second settle reads the messages only
    calls = len(mock.calls)
    assert (await teams.settle_send(PERSONAL, pending)).outcome is SettleOutcome.FOUND
    assert methods(mock)[calls:] == ["listChatMessages"]


async def test_a_personal_send_teams_never_stored_is_not_sent(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.add_fault("sendToConversation", 1, {"status": 502})
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(PERSONAL, "never stored", TextFormat.PLAIN, delivery_id="sr-15")
    mock.user_message(PERSONAL.chat_id, "the person wrote first")  # the chat exists: the person is known to Graph
    settled = await teams.settle_send(PERSONAL, PendingSend("sr-15", "never stored", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.NOT_SENT and shown(mock, str(PERSONAL.chat_id)) == []


async def test_a_personal_chat_without_the_installation_permission_stays_uncertain(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    mock.add_fault("sendToConversation", 1, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(PERSONAL, "maybe", TextFormat.PLAIN, delivery_id="sr-16")
    mock.graph_permission = False
    settled = await teams.settle_send(PERSONAL, PendingSend("sr-16", "maybe", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.UNKNOWN
    assert methods(mock)[-2:] == ["token", "listInstalledApps"]  # refused there (403): reported, never resent
    assert [c.status for c in mock.calls if c.method == "listInstalledApps"] == [403]


async def test_a_personal_chat_the_bot_is_not_in_stays_uncertain(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.missing.add(str(PERSONAL.chat_id))
    settled = await teams.settle_send(PERSONAL, PendingSend("sr-17", "x", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.UNKNOWN and methods(mock)[-1] == "getConversationMembers"


async def test_nothing_found_is_read_again_until_the_window_has_passed(mock: MockTeams) -> None:
    mock.reset()
    adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.6)
    adapter.use_graph(TENANT, window_s=0.5)
    try:
        mock.add_fault("sendToConversation", 1, {"status": 503})
        with pytest.raises(UncertainDeliveryError):
            await adapter.send_text(GROUP, "late", TextFormat.PLAIN, delivery_id="sr-14")
        settled = await adapter.settle_send(GROUP, PendingSend("sr-14", "late", TextFormat.PLAIN))
    finally:
        await adapter.close()
    assert settled.outcome is SettleOutcome.NOT_SENT
    assert methods(mock).count("listChatMessages") >= 2


async def test_graph_settings_are_checked_and_the_secret_never_shows(mock: MockTeams) -> None:
    adapter = TeamsAdapter(TOKEN, base_url=mock.base_url)
    try:
        with pytest.raises(ConfigError, match="graph_tenant"):
            adapter.use_graph("botframework.com")
        with pytest.raises(ConfigError, match="graph_team"):
            adapter.use_graph(TENANT, "general")
        adapter.use_graph(TENANT, TEAM)
        assert adapter.settles_with_graph
        assert SECRET not in repr(adapter) and SECRET not in repr(adapter._graph)
    finally:
        await adapter.close()


async def test_a_channel_with_settle_with_graph_gets_an_adapter_that_settles_through_graph(mock: MockTeams) -> None:
    on = ChannelSettings(platform="teams", api_base=mock.base_url, settle_with_graph=True, graph_tenant=TENANT)
    off = ChannelSettings(platform="teams", api_base=mock.base_url)
    built = [make_adapter(name, channel, SecretStr(TOKEN)) for name, channel in (("on", on), ("off", off))]
    try:
        assert [getattr(a, "settles_with_graph", None) for a in built] == [True, False]
    finally:
        for adapter in built:
            await adapter.close()


async def test_markdown_with_links_and_angle_brackets_is_found(mock: MockTeams, teams: TeamsAdapter) -> None:
    text = "See [the docs](https://example.com/a_b) for `List<int>` and a < b.\n1. first\n2. second"
    mock.add_fault("sendToConversation", 1, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, text, TextFormat.MARKDOWN, delivery_id="sr-15")
    settled = await teams.settle_send(GROUP, PendingSend("sr-15", text, TextFormat.MARKDOWN))
    assert settled.outcome is SettleOutcome.FOUND
    assert len(shown(mock)) == 1
