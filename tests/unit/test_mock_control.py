"""The mock control API (mocks/control.py) over real HTTP with httpx, on each of the three mocks: state, scripts
(relative nth, after_commit, latency, rate limits, outages, resets), a person's messages, reset."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.common import MockServer, serve_mock
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram

pytestmark = pytest.mark.timeout(10)

DISCORD_TOKEN = base64.urlsafe_b64encode(b"123456789012345678").decode().rstrip("=") + ".GmOcKz.mock_Secret-Hmac_01"


@dataclass(frozen=True)
class Platform:
    """One mock and how to make its send call over raw HTTP."""

    name: str
    make: Callable[[FakeClock], MockServer]
    send_method: str
    chat: int | str
    send: Callable[[httpx.AsyncClient, str, str], Awaitable[httpx.Response]]


async def _telegram_send(http: httpx.AsyncClient, base: str, text: str) -> httpx.Response:
    return await http.post(f"{base}/bot123456:ABC-def/sendMessage", json={"chat_id": 42, "text": text})


async def _slack_send(http: httpx.AsyncClient, base: str, text: str) -> httpx.Response:
    headers = {"Authorization": "Bearer xoxb-1-2-mock"}
    return await http.post(f"{base}chat.postMessage", json={"channel": "C0123456789", "text": text}, headers=headers)


async def _discord_send(http: httpx.AsyncClient, base: str, text: str) -> httpx.Response:
    headers = {"Authorization": f"Bot {DISCORD_TOKEN}"}
    return await http.post(f"{base}/channels/1100000000000000001/messages", json={"content": text}, headers=headers)


PLATFORMS = [
    Platform("telegram", lambda c: MockTelegram(clock=c.now), "sendMessage", 42, _telegram_send),
    Platform("slack", lambda c: MockSlack(clock=c.now), "chat.postMessage", "C0123456789", _slack_send),
    Platform("discord", lambda c: MockDiscord(clock=c.now), "createMessage", "1100000000000000001", _discord_send),
]


@dataclass
class Rig:
    platform: Platform
    mock: MockServer
    http: httpx.AsyncClient
    clock: FakeClock

    async def send(self, text: str) -> httpx.Response:
        return await self.platform.send(self.http, self.mock.base_url, text)

    async def state(self) -> dict[str, Any]:
        answer = await self.http.get(f"{self.mock.control_url}/state")
        assert answer.status_code == 200
        return dict(answer.json())

    async def script(self, body: Any) -> httpx.Response:
        return await self.http.post(f"{self.mock.control_url}/script", json=body)


@pytest.fixture(params=PLATFORMS, ids=[p.name for p in PLATFORMS])
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    platform: Platform = request.param
    clock = FakeClock(start=50.0)
    mock = platform.make(clock)
    await mock.start()
    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            yield Rig(platform, mock, http, clock)
    finally:
        await mock.stop()


async def test_state_shows_chats_and_calls_like_a_transcript(rig: Rig) -> None:
    rig.clock.advance(0.25)
    sent = await rig.send("Hello")
    person = rig.mock.user_message(rig.platform.chat, "a person's words")

    state = await rig.state()

    assert rig.mock.control_url.endswith("/_mock")
    assert state["platform"] == rig.platform.name
    [(chat, messages)] = state["chats"].items()
    assert chat == str(rig.platform.chat)
    assert messages == [{"message_id": rig.mock.calls[0].message_id, "text": "Hello"}]  # the person's is left out
    assert person != rig.mock.calls[0].message_id
    [call] = state["calls"]  # the control calls are never recorded
    assert call == {
        "method": rig.platform.send_method,
        "chat_id": rig.mock.calls[0].chat_id,
        "message_id": rig.mock.calls[0].message_id,
        "text": "Hello",
        "t_ms": 250.0,
        "status": 200,
        "ok": True,
    }
    assert sent.status_code == 200


async def test_faults_count_from_the_moment_of_scripting(rig: Rig) -> None:
    await rig.send("one")
    await rig.send("two")

    answer = await rig.script(
        {"faults": [{"method": rig.platform.send_method.upper(), "nth": 1, "reply": {"status": 503}}]}
    )
    third, fourth = await rig.send("three"), await rig.send("four")

    applied = answer.json()["applied"]["faults"]
    assert applied == [
        {"method": rig.platform.send_method, "nth": 1, "call": 3, "reply": {"status": 503}, "after_commit": False}
    ]
    assert (third.status_code, fourth.status_code) == (503, 200)
    assert [m["text"] for m in (await rig.state())["chats"][str(rig.platform.chat)]] == ["one", "two", "four"]


async def test_an_after_commit_fault_stores_then_fails(rig: Rig) -> None:
    fault = {"method": rig.platform.send_method, "nth": 1, "reply": {"status": 502}, "after_commit": True}
    assert (await rig.script({"faults": [fault]})).status_code == 200

    failed = await rig.send("stored anyway")
    state = await rig.state()

    assert failed.status_code == 502
    assert [m["text"] for m in state["chats"][str(rig.platform.chat)]] == ["stored anyway"]
    assert (state["calls"][0]["status"], state["calls"][0]["ok"]) == (502, False)
    assert state["calls"][0]["message_id"] == state["chats"][str(rig.platform.chat)][0]["message_id"]


@pytest.mark.parametrize(
    ("reply", "body", "content_type"),
    [
        ({"status": 200, "body": {"ok": True}}, b'{"ok": true}', "application/json"),
        ({"status": 200, "body": ""}, b"", "application/json"),
        ({"status": 200, "body": {"id": None}}, b'{"id": null}', "application/json"),
        (
            {"status": 200, "body": "<html>Bad gateway</html>", "content_type": "text/html"},
            b"<html>Bad gateway</html>",
            "text/html",
        ),
        ({"status": 502, "body": "upstream", "content_type": "text/plain"}, b"upstream", "text/plain"),
    ],
    ids=["ok-without-result", "empty", "id-null", "html", "text-502"],
)
@pytest.mark.parametrize("after_commit", [False, True], ids=["before-commit", "after-commit"])
async def test_a_raw_reply_is_sent_byte_for_byte(
    rig: Rig, reply: dict[str, Any], body: bytes, content_type: str, after_commit: bool
) -> None:
    fault = {"method": rig.platform.send_method, "nth": 1, "reply": reply, "after_commit": after_commit}
    scripted = await rig.script({"faults": [fault]})

    answer = await rig.send("maybe stored")
    state = await rig.state()

    assert scripted.json()["applied"]["faults"][0]["reply"] == reply
    assert (answer.status_code, answer.content, answer.headers.get("Content-Type")) == (
        reply["status"],
        body,
        content_type,
    )
    shown = [m["text"] for m in state["chats"].get(str(rig.platform.chat), [])]
    assert shown == (["maybe stored"] if after_commit else [])
    assert (state["calls"][0]["status"], state["calls"][0]["ok"]) == (reply["status"], False)
    assert (await rig.send("next")).status_code == 200  # only the scripted call


async def test_latency_counts_from_the_moment_of_scripting(rig: Rig) -> None:
    await rig.send("before")
    answer = await rig.script({"latency_ms": {rig.platform.send_method: [300]}})

    loop = asyncio.get_running_loop()
    started = loop.time()
    await rig.send("slow")
    slow_s = loop.time() - started

    assert answer.json()["applied"]["latency_ms"] == {rig.platform.send_method: {"from_call": 2, "delays_ms": [300]}}
    assert slow_s >= 0.3


async def test_rate_limits_switch(rig: Rig) -> None:
    on = await rig.script({"rate_limits": True})
    assert (on.json(), rig.mock.rate_limits) == ({"applied": {"rate_limits": True}}, True)
    off = await rig.script({"rate_limits": "off"})
    assert (off.json(), rig.mock.rate_limits) == ({"applied": {"rate_limits": False}}, False)


async def test_an_outage_fails_every_call_for_its_seconds(rig: Rig) -> None:
    answer = await rig.script({"outage": {"seconds": 8, "reply": {"status": 502}}})
    during = [await rig.send("a"), await rig.send("b")]
    rig.clock.advance(8.0)
    after = await rig.send("c")

    assert answer.json()["applied"]["outage"] == {
        "seconds": 8,
        "reply": {"status": 502},
        "methods": None,
        "until_t_ms": 8000.0,
    }
    assert [r.status_code for r in during] == [502, 502]
    assert after.status_code == 200
    assert [m["text"] for m in (await rig.state())["chats"][str(rig.platform.chat)]] == ["c"]


async def test_an_outage_of_listed_methods_leaves_the_others_alone(rig: Rig) -> None:
    other = {"telegram": "getMe", "slack": "auth.test", "discord": "getCurrentUser"}[rig.platform.name]

    answer = await rig.script({"outage": {"seconds": 5, "reply": {"status": 500}, "methods": [other]}})
    sent = await rig.send("through")

    assert answer.json()["applied"]["outage"]["methods"] == [other]
    assert sent.status_code == 200


async def test_a_reset_outage_closes_the_connection_without_an_answer(rig: Rig) -> None:
    await rig.script({"outage": {"seconds": 5, "reply": "reset"}})

    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await rig.send("never answered")
    state = await rig.state()

    assert state["chats"] == {}
    assert (state["calls"][0]["status"], state["calls"][0]["ok"]) == (None, False)
    assert rig.mock.calls[0].description == "reset"


async def test_a_reset_after_commit_stores_then_closes(rig: Rig) -> None:
    fault = {"method": rig.platform.send_method, "nth": 1, "reply": "reset", "after_commit": True}
    await rig.script({"faults": [fault]})

    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await rig.send("stored, no answer")

    assert [m["text"] for m in (await rig.state())["chats"][str(rig.platform.chat)]] == ["stored, no answer"]


async def test_a_timeout_outage_holds_the_answer(rig: Rig) -> None:
    rig.mock.hang_s = 1.0
    await rig.script({"outage": {"seconds": 5, "reply": "timeout_before_commit"}})

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(rig.send("held"), 0.3)
    state = await rig.state()

    assert state["chats"] == {}
    assert state["calls"][0]["status"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({"fautls": []}, "fautls"),
        ({"faults": {}}, "faults"),
        ({"faults": [{"method": "sendPigeon", "nth": 1, "reply": {"status": 500}}]}, "faults[0].method"),
        ({"faults": [{"method": "SEND", "nth": 0, "reply": {"status": 500}}]}, "faults[0].nth"),
        ({"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 200}}]}, "faults[0].reply"),
        ({"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 500, "after_commit": True}}]}, "faults[0].reply"),
        ({"faults": [{"method": "SEND", "nth": 1, "reply": "explode"}]}, "faults[0].reply"),
        (
            {"faults": [{"method": "SEND", "nth": 1, "reply": "timeout_before_commit", "after_commit": True}]},
            "faults[0].reply",
        ),
        (
            {"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 500}, "after_commit": "yes"}]},
            "faults[0].after_commit",
        ),
        ({"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 500}, "when": 1}]}, "faults[0].when"),
        ({"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 99, "body": ""}}]}, "faults[0].reply"),
        (
            {"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 200, "body": "", "content_type": None}}]},
            "faults[0].reply",
        ),
        (
            {"faults": [{"method": "SEND", "nth": 1, "reply": {"status": 200, "body": "", "headers": {}}}]},
            "faults[0].reply",
        ),
        ({"latency_ms": {"SEND": [-1]}}, "latency_ms.SEND"),
        ({"rate_limits": "sometimes"}, "rate_limits"),
        ({"outage": {"seconds": 0, "reply": {"status": 502}}}, "outage.seconds"),
        ({"outage": {"seconds": 3, "reply": "later"}}, "outage.reply"),
        ({"outage": {"seconds": 3, "reply": "reset", "methods": ["nope"]}}, "outage.methods[0]"),
    ],
)
async def test_a_bad_script_names_its_field_and_applies_nothing(rig: Rig, body: Any, field: str) -> None:
    body, field = _with_method(body, rig.platform.send_method), field.replace("SEND", rig.platform.send_method)
    if isinstance(body, dict) and isinstance(body.get("faults"), list):  # a good fault first: not applied either
        good = {"method": rig.platform.send_method, "nth": 1, "reply": {"status": 500}}
        body, field = {"faults": [good, *body["faults"]]}, field.replace("faults[0]", "faults[1]")

    answer = await rig.script(body)
    sent = await rig.send("unscripted")

    assert answer.status_code == 400
    assert answer.json()["field"] == field
    assert answer.json()["error"].startswith(answer.json()["field"] + ": ")
    assert sent.status_code == 200  # the good fault beside the bad one was not applied


def _with_method(value: Any, method: str) -> Any:
    """``value`` with every ``"SEND"`` (a key or a string) replaced by the platform's send method."""
    if isinstance(value, dict):
        return {_with_method(k, method): _with_method(v, method) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_method(v, method) for v in value]
    return method if value == "SEND" else value


async def test_the_same_call_cannot_get_two_faults(rig: Rig) -> None:
    fault = {"method": rig.platform.send_method, "nth": 1, "reply": {"status": 500}}
    first = await rig.script({"faults": [fault]})
    second = await rig.script({"faults": [fault]})

    assert first.status_code == 200
    assert (second.status_code, second.json()["field"]) == (400, "faults[0].nth")
    assert "already has a fault" in second.json()["error"]


async def test_a_persons_message_through_the_control_api(rig: Rig) -> None:
    url = f"{rig.mock.control_url}/user_message"
    stored = await rig.http.post(url, json={"chat_id": rig.platform.chat, "text": "Where is my refund?"})
    await rig.send("Tomorrow.")
    bad_chat = await rig.http.post(url, json={"chat_id": "" if rig.platform.name == "telegram" else "#x", "text": "x"})
    no_text = await rig.http.post(url, json={"chat_id": rig.platform.chat})
    state = await rig.state()

    assert stored.status_code == 200
    assert stored.json()["chat_id"] == rig.platform.chat
    assert [str(stored.json()["message_id"])] == [str(m) for m, _ in _all_messages(rig)[:1]]
    assert [t for _, t in _all_messages(rig)] == ["Where is my refund?", "Tomorrow."]
    assert (bad_chat.status_code, bad_chat.json()["field"]) == (400, "chat_id")
    assert (no_text.status_code, no_text.json()["field"]) == (400, "text")
    assert [m["text"] for m in state["chats"][str(rig.platform.chat)]] == ["Tomorrow."]  # the bot's only
    assert [c["text"] for c in state["calls"]] == ["Tomorrow."]  # the person's message is no call


def _all_messages(rig: Rig) -> list[tuple[Any, str]]:
    """Every stored message of the rig's chat (the person's too): ``(id, text)``."""
    mock = rig.mock
    if isinstance(mock, MockTelegram):
        return [(m.message_id, m.text) for m in mock.messages(rig.platform.chat)]
    if isinstance(mock, MockSlack):
        return [(m.ts, m.text) for m in mock.messages(rig.platform.chat)]
    assert isinstance(mock, MockDiscord)
    return [(m.id, m.content) for m in mock.messages(rig.platform.chat)]


async def test_reset_forgets_everything_and_restarts_t_ms(rig: Rig) -> None:
    await rig.send("old")
    await rig.script({"faults": [{"method": rig.platform.send_method, "nth": 2, "reply": {"status": 500}}]})
    rig.clock.advance(5.0)

    answer = await rig.http.post(f"{rig.mock.control_url}/reset")
    rig.clock.advance(0.5)
    await rig.send("new")
    again = await rig.send("newer")  # call 2 after the reset: the old fault is gone
    state = await rig.state()

    assert answer.json() == {"reset": True}
    assert again.status_code == 200
    assert [m["text"] for m in state["chats"][str(rig.platform.chat)]] == ["new", "newer"]
    assert [c["t_ms"] for c in state["calls"]] == [500.0, 500.0]


async def test_the_control_api_needs_no_token_and_is_beside_the_platform_api(rig: Rig) -> None:
    root = rig.mock.base_url.split("/", 3)
    assert rig.mock.control_url == f"{root[0]}//{root[2]}/_mock"
    answer = await rig.http.get(f"{rig.mock.control_url}/state", headers={"Authorization": "nothing"})

    assert answer.status_code == 200


def _started(mock: MockServer) -> bool:
    try:
        return bool(mock.control_url)
    except RuntimeError:
        return False


async def test_serve_mock_prints_where_the_control_api_is(capsys: pytest.CaptureFixture[str]) -> None:
    mock = MockTelegram()
    task = asyncio.create_task(serve_mock(mock, "127.0.0.1", 0))
    while not _started(mock):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    out = capsys.readouterr().out
    assert f"mock Telegram Bot API on {mock.base_url} (rate limits off)" in out
    assert f"GET {mock.control_url}/state" in out
    assert f"POST {mock.control_url}/script" in out
    assert f"POST {mock.control_url}/reset" in out
