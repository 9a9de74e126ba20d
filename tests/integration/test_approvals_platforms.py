"""Approvals on Telegram, Slack, Discord and Teams through the real SDKs (aiogram, slack-sdk, discord.py, the Teams
SDK) against the stateful mocks (docs/approvals.md): an agent's ``approval.request`` becomes a message with Approve
and Deny buttons (the mocks check the keyboard / blocks / components / card actions as the platforms do); a press
makes what the platform delivers to the bot (``POST /_mock/press`` with the pressing user), which the test forwards
as the docs' bot snippets do (Telegram through examples/approval_bot.py's aiogram router). A press by someone not
allowed changes nothing and is answered 403 with what to tell them (on Telegram the answerCallbackQuery text); the
allowed person's press decides, once: the pipeline lane's ``approval`` unit (``RelayClient.wait_approval``), the
message edited to say who decided, the buttons gone, a second press answered 409 with the first decision. An
approval nobody decides takes its ``on_expiry`` decision at its expiry."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from pydantic import SecretStr
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from examples.approval_bot import APPROVAL_DATA, approval_router
from streamrelay.adapters.discord._sdk import discord
from streamrelay.app.client import RelayClient, RelayError
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.paths import CHECKOUT
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.approvals import NOT_ALLOWED, button_ids
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockServer
from streamrelay.mocks.discord.server import MockDiscord
from streamrelay.mocks.slack.server import MockSlack
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_stop_platforms import (
    discord_buttons,
    matrix_bot_reads,
    matrix_buttons,
    slack_buttons,
    teams_buttons,
)

pytestmark = pytest.mark.timeout(90)

USERS: dict[str, tuple[int | str, int | str]] = {
    "telegram": (111, 222),
    "slack": ("U0ALLOWED", "U0STRANGER"),
    "discord": ("600000000000000001", "600000000000000002"),
    "teams": ("29:1AllowedPersonAadId", "29:1StrangerAadId"),
    "matrix": ("@alice:mock.local", "@mallory:mock.local"),
}
"""Each platform's (allowed, stranger) user ids."""


def telegram_buttons(mock: Any, chat: int | str, message_id: int | str) -> list[str]:
    keyboard = mock.inline_keyboard(chat, int(message_id)) or []
    return [b["callback_data"] for row in keyboard for b in row]


BUTTONS: dict[str, Callable[[Any, int | str, int | str], list[str]]] = {
    "telegram": telegram_buttons,
    "slack": slack_buttons,
    "discord": discord_buttons,
    "teams": teams_buttons,
    "matrix": matrix_buttons,
}


def pressed_data(platform: str, delivered: dict[str, Any]) -> tuple[str, str]:
    """What each bot snippet reads of a press (docs/approvals.md): the button's id and who pressed."""
    if platform == "telegram":
        query = delivered["callback_query"]
        return query["data"], f"telegram:user:{query['from']['id']}"
    if platform == "slack":
        assert delivered["type"] == "block_actions"
        return delivered["actions"][0]["value"], f"slack:user:{delivered['user']['id']}"
    if platform == "matrix":
        raise AssertionError("Matrix presses are read through nio: matrix_bot_reads")
    if platform == "teams":  # an Action.Submit press: a message activity whose value is the action's data
        assert delivered["type"] == "message"
        return delivered["value"]["streamrelay"], f"teams:user:{delivered['from']['id']}"
    assert delivered["t"] == "INTERACTION_CREATE" and delivered["d"]["type"] == 3
    return delivered["d"]["data"]["custom_id"], f"discord:user:{delivered['d']['member']['user']['id']}"


async def until(check: Callable[[], bool], what: str = "") -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not reached: {what}")


class Stack:
    """A mock platform, a relay with one channel on it, the sidecar and (Telegram) the example bot's router."""

    def __init__(self, platform: str) -> None:
        self.platform = platform
        self.dry = DRY_RUN[platform]
        self.chat = self.dry.private

    async def __aenter__(self) -> Stack:
        mock = self.dry.make_mock(False)
        assert isinstance(mock, MockServer)
        self.mock: MockServer = mock
        settings = ChannelSettings.model_validate(
            {"platform": self.platform, "api_base": await self.mock.start(), "throttle_ms": 0}
        )
        self.relay = Relay(
            {"c": make_runtime("c", settings, SecretStr(self.dry.token))}, MemoryLedger(), MonotonicClock()
        )
        self.sidecar = Sidecar(self.relay, token=INGEST_TOKEN)
        await self.sidecar.start()
        self.client = RelayClient(self.sidecar.url, INGEST_TOKEN)
        if self.platform == "telegram":
            base = TelegramAPIServer.from_base(self.mock.base_url)
            self.bot = Bot(self.dry.token, session=AiohttpSession(api=base))
            self.dispatcher = Dispatcher()
            self.dispatcher.include_router(approval_router(self.sidecar.url, INGEST_TOKEN))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.platform == "telegram":
            await self.bot.session.close()
        await self.client.close()
        await self.sidecar.stop()
        await self.relay.close()
        await self.mock.stop()

    def buttons(self, message_id: int | str) -> list[str]:
        return BUTTONS[self.platform](self.mock, self.chat, message_id)

    def approval_message(self) -> tuple[int | str, str]:
        found = [(m, t) for m, t in self.mock.visible(self.chat) if t.startswith("🔐")]
        assert len(found) == 1, self.mock.visible(self.chat)
        return found[0]

    async def press(self, message_id: int | str, data: str, user: int | str) -> dict[str, Any]:
        """The person ``user`` presses button ``data``; the bot forwards it (module docstring). Returns the
        sidecar's answer (its status under ``status``)."""
        async with httpx.AsyncClient() as control:
            answer = await control.post(
                f"{self.mock.control_url}/press",
                json={"chat_id": self.chat, "message_id": message_id, "data": data, "user": user},
            )
        assert answer.status_code == 200, answer.text
        delivered = answer.json()
        if self.platform == "matrix":
            button, by = await matrix_bot_reads(self.mock, delivered)
        else:
            button, by = pressed_data(self.platform, delivered)
        assert button == data
        if self.platform == "telegram":  # the example router forwards it and answers the callback with the outcome
            before = len(self.answered())
            await self.dispatcher.feed_raw_update(self.bot, delivered)
            assert len(self.answered()) == before + 1
            told = self.answered()[-1]
            state = await self.state()
            return {"status": 403, "tell": told} if told == NOT_ALLOWED else {"status": 200, "told": told, **state}
        match = re.fullmatch(APPROVAL_DATA, button)
        assert match is not None
        decision, run16, id16 = match.groups()
        try:
            return {"status": 200, **await self.client.decide_approval(run16, id16, decision, by=by)}
        except RelayError as refused:
            return {"status": refused.status, "tell": refused.message}

    async def press_stale(self, data: str, user: int | str) -> dict[str, Any]:
        """A press of ``data`` the bot still forwards after the buttons went (a stale client), as the snippets do."""
        match = re.fullmatch(APPROVAL_DATA, data)
        assert match is not None
        decision, run16, id16 = match.groups()
        try:
            return {
                "status": 200,
                **await self.client.decide_approval(run16, id16, decision, by=f"{self.platform}:user:{user}"),
            }
        except RelayError as refused:
            return {"status": refused.status, "tell": refused.message}

    async def state(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.sidecar.url) as http:
            answer = await http.get(
                "/v1/runs/a-run/approvals/rm-logs", headers={"Authorization": f"Bearer {INGEST_TOKEN}"}
            )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def answered(self) -> list[str | None]:
        return [c.text for c in self.mock.calls if c.method == "answerCallbackQuery"]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "teams", "matrix"])
async def test_approve_after_a_refused_press(platform: str) -> None:
    allowed, stranger = USERS[platform]
    async with Stack(platform) as stack:
        client = stack.client
        await client.start("a-run", channel="c", chat_id=stack.chat)
        await client.send("a-run", [{"kind": "text", "text": "I will clean the logs."}])
        request = {
            "kind": "approval.request",
            "id": "rm-logs",
            "question": "Delete /var/log/app?",
            "action": "rm -r /var/log/app",
            "approvers": [f"{platform}:user:{allowed}"],
            "ttl_s": 120,
        }
        await client.send("a-run", [request])
        await until(lambda: any(t.startswith("🔐") for _, t in stack.mock.visible(stack.chat)), "the approval")
        message_id, text = stack.approval_message()
        assert "Delete /var/log/app?" in text and "If approved: rm -r /var/log/app" in text
        assert f"Who may decide: {platform}:user:{allowed}" in text
        approve, deny = button_ids("a-run", "rm-logs")
        await until(lambda: stack.buttons(message_id) == [approve, deny], "the buttons")

        refused = await stack.press(message_id, approve, stranger)
        assert refused == {"status": 403, "tell": NOT_ALLOWED}
        if platform == "telegram":  # the person is told, on the platform (answerCallbackQuery text)
            assert stack.answered()[-1] == NOT_ALLOWED and (await stack.state())["state"] == "pending"
        assert stack.approval_message() == (message_id, text)  # nothing changed
        assert stack.buttons(message_id) == [approve, deny]
        assert (await client.units("a-run")) == []

        decided = await stack.press(message_id, approve, allowed)
        assert decided["status"] == 200 and decided["decision"] == "approved" and decided["approved"] is True
        assert decided["by"] == f"{platform}:user:{allowed}"
        if platform == "telegram":
            assert decided["told"] == "Approved."  # the router's answerCallbackQuery text
        unit = await asyncio.wait_for(client.wait_approval("a-run", "rm-logs"), 30)
        assert (unit.decision, unit.approved, unit.by) == ("approved", True, f"{platform}:user:{allowed}")
        await until(lambda: "✅ Approved by" in stack.approval_message()[1], "the decision shown")
        assert f"✅ Approved by {platform}:user:{allowed}" in stack.approval_message()[1]
        await until(lambda: stack.buttons(message_id) == [], "the buttons gone")

        # No button is left to press: a late press the bot still forwards (a stale client) gets the first decision.
        async with httpx.AsyncClient(base_url=stack.sidecar.url) as http:
            second = await http.post(
                "/v1/runs/a-run/approvals/rm-logs",
                json={"decision": "deny", "by": f"{platform}:user:{allowed}"},
                headers={"Authorization": f"Bearer {INGEST_TOKEN}"},
            )
        assert second.status_code == 409
        assert second.json()["approval"]["decision"] == "approved"  # the first decision

        await client.send("a-run", [{"kind": "text", "text": " Done."}, {"kind": "end"}])
        report = await client.report("a-run", wait_s=15)
        assert report.end_status == "ok" and report.status == "delivered", report
        kinds = [u.kind for u in await client.units("a-run")]
        assert kinds == ["approval", "commit", "run.end"]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "matrix"])
async def test_deny_by_the_approver(platform: str) -> None:
    """The approver presses Deny (as the docs' bot snippet forwards it): decided once, denied; the agent's
    ``wait_approval`` says not to go on; the message says who denied, its buttons gone; an Approve pressed after
    gets the first decision."""
    allowed, _ = USERS[platform]
    async with Stack(platform) as stack:
        client = stack.client
        await client.start("a-run", channel="c", chat_id=stack.chat)
        request = {
            "kind": "approval.request",
            "id": "rm-logs",
            "question": "Delete /var/log/app?",
            "action": "rm -r /var/log/app",
            "approvers": [f"{platform}:user:{allowed}"],
            "ttl_s": 120,
        }
        await client.send("a-run", [request])
        await until(lambda: any(t.startswith("🔐") for _, t in stack.mock.visible(stack.chat)), "the approval")
        message_id, _ = stack.approval_message()
        approve, deny = button_ids("a-run", "rm-logs")
        await until(lambda: stack.buttons(message_id) == [approve, deny], "the buttons")
        waiter = asyncio.create_task(client.wait_approval("a-run", "rm-logs"))
        decided = await stack.press(message_id, deny, allowed)
        assert decided["status"] == 200 and decided["decision"] == "denied" and decided["approved"] is False
        if platform == "telegram":
            assert decided["told"] == "Denied."  # the router's answerCallbackQuery text
        unit = await asyncio.wait_for(waiter, 30)
        assert (unit.decision, unit.approved, unit.by) == ("denied", False, f"{platform}:user:{allowed}")
        await until(lambda: "❌ Denied by" in stack.approval_message()[1], "the decision shown")
        assert f"❌ Denied by {platform}:user:{allowed}" in stack.approval_message()[1]
        await until(lambda: stack.buttons(message_id) == [], "the buttons gone")
        late = await stack.press_stale(approve, allowed)
        assert late["status"] == 409 and "Already denied" in str(late["tell"])
        await client.send("a-run", [{"kind": "text", "text": "Kept the logs."}, {"kind": "end"}])
        assert (await client.report("a-run", wait_s=15)).status == "delivered"
        assert [u.kind for u in await client.units("a-run")] == ["approval", "commit", "run.end"]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "teams"])
async def test_expiry_takes_on_expiry(platform: str) -> None:
    allowed, _ = USERS[platform]
    async with Stack(platform) as stack:
        client = stack.client
        await client.start("e-run", channel="c", chat_id=stack.chat)
        request = {
            "kind": "approval.request",
            "id": "deploy",
            "question": "Deploy now?",
            "approvers": [f"{platform}:user:{allowed}"],
            "ttl_s": 1.0,
            "on_expiry": "denied",
        }
        await client.send("e-run", [request])
        unit = await asyncio.wait_for(client.wait_approval("e-run", "deploy"), 30)
        assert (unit.decision, unit.approved, unit.by) == ("expired", False, None)
        await until(lambda: "⌛ Expired" in stack.approval_message()[1], "the expiry shown")
        message_id = stack.approval_message()[0]
        await until(lambda: stack.buttons(message_id) == [], "the buttons gone")
        async with httpx.AsyncClient(base_url=stack.sidecar.url) as http:
            late = await http.post(
                "/v1/runs/e-run/approvals/deploy",
                json={"decision": "approve", "by": f"{platform}:user:{allowed}"},
                headers={"Authorization": f"Bearer {INGEST_TOKEN}"},
            )
        assert late.status_code == 409 and late.json()["approval"]["decision"] == "expired"
        await client.send("e-run", [{"kind": "end"}])
        assert (await client.report("e-run", wait_s=15)).end_status == "ok"


async def test_refused_requests_and_an_approval_the_run_ended_before() -> None:
    async with Stack("telegram") as stack:
        client = stack.client
        await client.start("u-run", channel="c", chat_id=stack.chat)
        nobody = {"kind": "approval.request", "id": "x", "question": "Ok?", "ttl_s": 60}
        with pytest.raises(RelayError) as refused:
            await client.send("u-run", [nobody])
        assert refused.value.status == 400 and "names nobody who may decide" in refused.value.message
        forged = {"kind": "approval.decision", "id": "x", "decision": "approved", "approved": True, "at": 1.0}
        with pytest.raises(RelayError) as agent_decides:
            await client.send("u-run", [forged])
        assert "comes from the sidecar, not the agent" in agent_decides.value.message
        ask = {**nobody, "approvers": ["telegram:user:1"]}
        await client.send("u-run", [ask])
        with pytest.raises(RelayError) as twice:
            await client.send("u-run", [ask])
        assert "already asked" in twice.value.message
        await until(lambda: any(t.startswith("🔐") for _, t in stack.mock.visible(stack.chat)), "the approval")
        message_id = stack.approval_message()[0]
        await until(lambda: len(stack.buttons(message_id)) == 2, "the buttons")
        await client.send("u-run", [{"kind": "end"}])
        assert (await client.report("u-run", wait_s=15)).end_status == "ok"
        assert stack.approval_message()[1].endswith("Not decided: the run ended.")
        assert stack.buttons(message_id) == []
        with pytest.raises(RelayError) as late:
            await client.wait_approval("u-run", "x")
        assert late.value.status == 409


def docs_snippet(heading: str) -> str:
    """The ```python block after the paragraph starting ``heading`` in docs/approvals.md (the bot snippets)."""
    text = (CHECKOUT / "docs" / "approvals.md").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(heading)}.*?```python\n(.*?)```", text, re.S | re.M)
    assert found is not None, f"docs/approvals.md lost its {heading!r} snippet"
    return found.group(1)


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_the_slack_snippet_through_bolt(decision: str) -> None:
    """docs/approvals.md's Slack snippet, run as written in a real Bolt ``AsyncApp`` (its client on the mock): the
    mock's ``block_actions`` payload dispatched to it (Socket Mode's path: no signature). A stranger's press is told
    with an ephemeral message (chat.postEphemeral) and changes nothing; the approver's decides."""
    allowed, stranger = USERS["slack"]
    async with Stack("slack") as stack:
        client = stack.client
        bolt = AsyncApp(
            client=AsyncWebClient(token=stack.dry.token, base_url=stack.mock.base_url),
            request_verification_enabled=False,
            process_before_response=True,
        )
        slack_mock = stack.mock
        assert isinstance(slack_mock, MockSlack)
        namespace: dict[str, Any] = {"app": bolt, "re": re, "relay": client, "RelayError": RelayError}
        exec(compile(docs_snippet("Slack (Bolt for Python)"), "docs/approvals.md#slack", "exec"), namespace)
        await client.start("a-run", channel="c", chat_id=stack.chat)
        request = {
            "kind": "approval.request",
            "id": "rm-logs",
            "question": "Delete /var/log/app?",
            "approvers": [f"slack:user:{allowed}"],
            "ttl_s": 120,
        }
        await client.send("a-run", [{"kind": "text", "text": "Checking."}, request])
        await until(lambda: any(t.startswith("🔐") for _, t in stack.mock.visible(stack.chat)), "the approval")
        message_id, _ = stack.approval_message()
        approve, deny = button_ids("a-run", "rm-logs")
        await until(lambda: stack.buttons(message_id) == [approve, deny], "the buttons")

        payloads: list[dict[str, Any]] = []

        async def press(data: str, user: str) -> int:
            async with httpx.AsyncClient() as control:
                answer = await control.post(
                    f"{stack.mock.control_url}/press",
                    json={"chat_id": stack.chat, "message_id": message_id, "data": data, "user": user},
                )
            assert answer.status_code == 200, answer.text
            payloads.append(answer.json())
            return await dispatch(payloads[-1])

        async def dispatch(payload: dict[str, Any]) -> int:
            response = await bolt.async_dispatch(AsyncBoltRequest(body=payload, mode="socket_mode"))
            return response.status  # 200: acknowledged within 3 s

        assert await press(approve, str(stranger)) == 200
        assert slack_mock.ephemerals == [(stack.chat, stranger, NOT_ALLOWED)]  # told, only them
        assert (await stack.state())["state"] == "pending"  # nothing changed
        assert await press(approve if decision == "approve" else deny, str(allowed)) == 200
        unit = await asyncio.wait_for(client.wait_approval("a-run", "rm-logs"), 30)
        assert (unit.approved, unit.by) == (decision == "approve", f"slack:user:{allowed}")
        mark = "✅ Approved" if decision == "approve" else "❌ Denied"
        await until(lambda: mark in stack.approval_message()[1], "the decision shown")
        assert len(slack_mock.ephemerals) == 1
        assert await dispatch(payloads[-1]) == 200  # the same press delivered again: told the first decision
        assert slack_mock.ephemerals[-1][2].startswith("Already ")
        await client.send("a-run", [{"kind": "end"}])


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_the_discord_snippet_through_discord_py(decision: str) -> None:
    """docs/approvals.md's Discord snippet, run as written as a discord.py ``Client``'s ``on_interaction``: the
    mock's ``INTERACTION_CREATE`` becomes a real ``discord.Interaction`` (the client's state, its HTTP on the mock),
    whose responses reach the mock's createInteractionResponse. A stranger's press is answered with an ephemeral
    message and changes nothing; the approver's is deferred and decides."""
    allowed, stranger = USERS["discord"]
    async with Stack("discord") as stack:
        client = stack.client
        discord_mock = stack.mock
        assert isinstance(discord_mock, MockDiscord)
        bot = discord.Client(intents=discord.Intents.none())
        await bot.login(stack.dry.token)  # discord.py's HTTP on the mock (the adapter set its base): its user known
        try:
            namespace: dict[str, Any] = {
                "bot": bot,
                "discord": discord,
                "re": re,
                "relay": client,
                "RelayError": RelayError,
            }
            exec(compile(docs_snippet("Discord (discord.py)"), "docs/approvals.md#discord", "exec"), namespace)
            on_interaction = namespace["on_interaction"]
            await client.start("a-run", channel="c", chat_id=stack.chat)
            request = {
                "kind": "approval.request",
                "id": "rm-logs",
                "question": "Delete /var/log/app?",
                "approvers": [f"discord:user:{allowed}"],
                "ttl_s": 120,
            }
            await client.send("a-run", [{"kind": "text", "text": "Checking."}, request])
            await until(lambda: any(t.startswith("🔐") for _, t in stack.mock.visible(stack.chat)), "the approval")
            message_id, _ = stack.approval_message()
            approve, deny = button_ids("a-run", "rm-logs")
            await until(lambda: stack.buttons(message_id) == [approve, deny], "the buttons")

            async def press(data: str, user: str) -> dict[str, Any]:
                async with httpx.AsyncClient() as control:
                    answer = await control.post(
                        f"{stack.mock.control_url}/press",
                        json={"chat_id": stack.chat, "message_id": message_id, "data": data, "user": user},
                    )
                assert answer.status_code == 200, answer.text
                interaction = discord.Interaction(data=answer.json()["d"], state=bot._connection)
                await on_interaction(interaction)
                responses = [r for r in discord_mock.responses if r["interaction"] == str(interaction.id)]
                assert len(responses) == 1, responses  # answered once
                response: dict[str, Any] = responses[0]
                return response

            told = await press(approve, str(stranger))
            assert (told["type"], told["content"], told["ephemeral"]) == (4, NOT_ALLOWED, True)
            assert (await stack.state())["state"] == "pending"  # nothing changed
            deferred = await press(approve if decision == "approve" else deny, str(allowed))
            assert deferred["type"] == 6  # deferred update: the message is edited by the sidecar
            unit = await asyncio.wait_for(client.wait_approval("a-run", "rm-logs"), 30)
            assert (unit.approved, unit.by) == (decision == "approve", f"discord:user:{allowed}")
            mark = "✅ Approved" if decision == "approve" else "❌ Denied"
            await until(lambda: mark in stack.approval_message()[1], "the decision shown")
            await until(lambda: stack.buttons(message_id) == [], "the buttons gone")
            await client.send("a-run", [{"kind": "end"}])
        finally:
            await bot.close()
