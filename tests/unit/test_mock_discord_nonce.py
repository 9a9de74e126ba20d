"""MockDiscord's idempotent create (``nonce`` + ``enforce_nonce``) and after_commit faults, driven by discord.py
itself (``Messageable.send(nonce=...)`` and the raw ``HTTPClient.send_message``) and by raw HTTP."""

from __future__ import annotations

import base64
import warnings
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

with warnings.catch_warnings():  # discord.py imports the standard library's audioop (voice), deprecated in 3.11+
    warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
    import discord
    from discord.http import handle_message_parameters

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.discord import MockDiscord

pytestmark = pytest.mark.timeout(10)

BOT_ID = "123456789012345678"
TOKEN = base64.urlsafe_b64encode(BOT_ID.encode()).decode().rstrip("=") + ".GmOcKz.mock_Secret-Hmac_0123456789abcdef"
OTHER_TOKEN = base64.urlsafe_b64encode(b"223456789012345678").decode().rstrip("=") + ".GmOcKz.other_Hmac-0123456789"
CHANNEL = 1100000000000000001
OTHER_CHANNEL = 1100000000000000002


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
async def mock(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MockDiscord]:
    async with MockDiscord(clock=clock.now) as server:
        monkeypatch.setattr(discord.http.Route, "BASE", server.base_url)  # process-wide in discord.py
        yield server


@pytest.fixture
async def client(mock: MockDiscord) -> AsyncIterator[discord.Client]:
    bot = discord.Client(intents=discord.Intents.none())
    await bot.login(TOKEN)
    try:
        yield bot
    finally:
        await bot.close()


@pytest.fixture
async def http(mock: MockDiscord) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=mock.base_url, headers={"Authorization": f"Bot {TOKEN}"}) as session:
        yield session


def texts(mock: MockDiscord, channel: int = CHANNEL) -> list[str]:
    return [text for _, text in mock.visible(channel)]


async def test_send_with_a_nonce_twice_creates_one_message(client: discord.Client, mock: MockDiscord) -> None:
    channel = client.get_partial_messageable(CHANNEL)

    first = await channel.send("Your refund was approved.", nonce="run-1/part-1")
    again = await channel.send("Your refund was approved.", nonce="run-1/part-1")

    assert first.id == again.id
    assert (first.nonce, again.nonce) == ("run-1/part-1", "run-1/part-1")
    assert texts(mock) == ["Your refund was approved."]
    assert [(c.method, c.status, c.message_id) for c in mock.calls[-2:]] == [
        ("createMessage", 200, str(first.id)),
        ("createMessage", 200, str(first.id)),
    ]


async def test_the_raw_send_message_carries_the_nonce_too(client: discord.Client, mock: MockDiscord) -> None:
    answers = []
    for _ in range(2):
        with handle_message_parameters(content="once", nonce=4242) as params:  # discord.py sends str(nonce)
            answers.append(await client.http.send_message(CHANNEL, params=params))

    assert answers[0]["id"] == answers[1]["id"]
    assert answers[0]["nonce"] == "4242"
    assert texts(mock) == ["once"]


async def test_send_without_a_nonce_gets_a_random_one_each_time(client: discord.Client, mock: MockDiscord) -> None:
    channel = client.get_partial_messageable(CHANNEL)

    await channel.send("same words")
    await channel.send("same words")

    assert texts(mock) == ["same words", "same words"]
    first, second = mock.messages(CHANNEL)
    assert first.nonce != second.nonce


async def test_the_nonce_is_remembered_for_ten_minutes(
    client: discord.Client, mock: MockDiscord, clock: FakeClock
) -> None:
    channel = client.get_partial_messageable(CHANNEL)
    first = await channel.send("a", nonce="n1")
    clock.advance(599.0)
    within = await channel.send("a", nonce="n1")
    clock.advance(2.0)
    after = await channel.send("a", nonce="n1")

    assert within.id == first.id != after.id
    assert texts(mock) == ["a", "a"]


async def test_a_nonce_is_per_author_and_channel(client: discord.Client, mock: MockDiscord) -> None:
    other = discord.Client(intents=discord.Intents.none())
    await other.login(OTHER_TOKEN)
    try:
        mine = await client.get_partial_messageable(CHANNEL).send("x", nonce="n")
        theirs = await other.get_partial_messageable(CHANNEL).send("x", nonce="n")
        elsewhere = await client.get_partial_messageable(OTHER_CHANNEL).send("x", nonce="n")
    finally:
        await other.close()

    assert len({mine.id, theirs.id, elsewhere.id}) == 3


async def test_the_nonce_of_a_deleted_message_is_not_found(client: discord.Client, mock: MockDiscord) -> None:
    channel = client.get_partial_messageable(CHANNEL)
    sent = await channel.send("gone", nonce="n-del")
    await sent.delete()

    with pytest.raises(discord.NotFound) as caught:
        await channel.send("gone", nonce="n-del")

    assert caught.value.code == 10008
    assert texts(mock) == []


async def test_enforce_nonce_off_creates_again(http: httpx.AsyncClient, mock: MockDiscord) -> None:
    first = await http.post(f"/channels/{CHANNEL}/messages", json={"content": "a", "nonce": 7, "enforce_nonce": True})
    loose = await http.post(f"/channels/{CHANNEL}/messages", json={"content": "a", "nonce": 7})

    assert first.json()["nonce"] == 7  # echoed as sent: an integer stays one
    assert first.json()["id"] != loose.json()["id"]
    assert texts(mock) == ["a", "a"]


@pytest.mark.parametrize(
    ("nonce", "code"),
    [
        ("x" * 26, "NONCE_TYPE_TOO_LONG"),
        (10**25, "NONCE_TYPE_TOO_LONG"),
        (True, "NONCE_TYPE_INVALID_TYPE"),
        ([1], "NONCE_TYPE_INVALID_TYPE"),
    ],
)
async def test_a_bad_nonce_is_an_invalid_form_body(
    http: httpx.AsyncClient, mock: MockDiscord, nonce: Any, code: str
) -> None:
    answer = await http.post(
        f"/channels/{CHANNEL}/messages", json={"content": "a", "nonce": nonce, "enforce_nonce": True}
    )

    body = answer.json()
    assert (answer.status_code, body["code"], body["message"]) == (400, 50035, "Invalid Form Body")
    assert body["errors"]["nonce"]["_errors"][0]["code"] == code
    assert texts(mock) == []


async def test_a_nonce_of_25_characters_is_fine(client: discord.Client, mock: MockDiscord) -> None:
    await client.get_partial_messageable(CHANNEL).send("ok", nonce="x" * 25)

    assert texts(mock) == ["ok"]


async def test_after_commit_create_then_the_same_nonce_settles_it(http: httpx.AsyncClient, mock: MockDiscord) -> None:
    mock.configure_from_case(
        {
            "faults": [
                {
                    "method": "createMessage",
                    "nth": 1,
                    "reply": {"status": 502, "description": "Bad Gateway"},
                    "after_commit": True,
                }
            ]
        }
    )
    body = {"content": "Your refund was approved.", "nonce": "run-1/p1", "enforce_nonce": True}

    failed = await http.post(f"/channels/{CHANNEL}/messages", json=body)
    settled = await http.post(f"/channels/{CHANNEL}/messages", json=body)

    assert (failed.status_code, failed.json()) == (502, {"code": 0, "message": "Bad Gateway"})
    assert failed.headers["Via"] == "1.1 google"
    assert settled.status_code == 200
    assert texts(mock) == ["Your refund was approved."]
    stored, again = mock.calls
    assert (stored.status, stored.ok, stored.message_id) == (502, False, settled.json()["id"])
    assert (again.status, again.message_id) == (200, settled.json()["id"])


async def test_after_commit_edit_is_applied(http: httpx.AsyncClient, mock: MockDiscord) -> None:
    sent = (await http.post(f"/channels/{CHANNEL}/messages", json={"content": "draft"})).json()
    mock.add_fault("editMessage", 1, {"status": 500}, after_commit=True)

    edited = await http.patch(f"/channels/{CHANNEL}/messages/{sent['id']}", json={"content": "final"})

    assert edited.status_code == 500
    assert texts(mock) == ["final"]
