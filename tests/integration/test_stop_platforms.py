"""Stop from Slack, Discord and Teams: the live message carries a Stop button (slack-sdk / discord.py / the Teams
SDK → the mocks, which check the blocks / components / card as the platforms do; Teams: an Adaptive Card's
Action.Submit); a press makes what the platform delivers to the app (a Slack ``block_actions`` payload, a Discord
``INTERACTION_CREATE``, a Teams message activity with the action's ``value``), which a test forwards as the app
would (docs/stop.md snippets); the run ends cancelled, the button goes, the parent loop reads a ``stop`` unit, later
lines get 409."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from nio import AsyncClient, Event, ReactionEvent
from nio.api import RelationshipType
from pydantic import SecretStr

from streamrelay.adapters.matrix.controls import CONTROL_KEY, control_of
from streamrelay.app.client import RelayClient, RelayError
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.contracts.units import StopUnit
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import STOPPED_NOTICE
from streamrelay.core.run.stop import STOPPED_ERROR
from streamrelay.core.run.stop_controls import control_id
from streamrelay.mocks.common import MockServer
from streamrelay.mocks.matrix import PERSON as MATRIX_PERSON
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)


def slack_buttons(mock: Any, chat: int | str, message_id: int | str) -> list[str]:
    found = [m for m in mock.messages(chat) if str(m.ts) == str(message_id)]
    blocks = found[0].blocks if found else None
    return [e["action_id"] for b in blocks or [] if b.get("type") == "actions" for e in b["elements"]]


def slack_click(payload: dict[str, Any]) -> tuple[str, str]:
    """What a Slack app's action handler reads: the control id and who pressed (docs/stop.md: the Bolt snippet)."""
    assert payload["type"] == "block_actions"
    return payload["actions"][0]["value"], f"slack:user:{payload['user']['id']}"


def discord_buttons(mock: Any, chat: int | str, message_id: int | str) -> list[str]:
    found = [m for m in mock.messages(chat) if str(m.id) == str(message_id)]
    rows = found[0].components if found else None
    return [c["custom_id"] for row in rows or [] for c in row["components"] if c.get("type") == 2]


def discord_click(dispatch: dict[str, Any]) -> tuple[str, str]:
    """What a discord.py ``on_interaction`` reads: the component's custom_id and who pressed (docs/stop.md snippet)."""
    assert dispatch["t"] == "INTERACTION_CREATE" and dispatch["d"]["type"] == 3
    return dispatch["d"]["data"]["custom_id"], f"discord:user:{dispatch['d']['member']['user']['id']}"


def teams_buttons(mock: Any, chat: int | str, message_id: int | str) -> list[str]:
    from streamrelay.mocks.teams.server import card_actions

    found = [a for a in mock.activities(chat) if a.activity_id == str(message_id) and not a.deleted]
    return [a["data"]["streamrelay"] for a in card_actions(found[0].payload)] if found else []


def teams_click(activity: dict[str, Any]) -> tuple[str, str]:
    """What a Teams bot's message handler reads of an Action.Submit press: the action's data in ``value``."""
    assert activity["type"] == "message" and "replyToId" in activity
    return activity["value"]["streamrelay"], f"teams:user:{activity['from']['id']}"


def matrix_buttons(mock: Any, chat: int | str, message_id: int | str) -> list[str]:
    """The control ids of the bot's reactions on the message (adapters/matrix/controls.py)."""
    return [
        e.content[CONTROL_KEY]
        for e in mock.rooms.relations(str(chat), str(message_id), "m.annotation")
        if e.sender != MATRIX_PERSON and CONTROL_KEY in e.content
    ]


async def matrix_bot_reads(mock: Any, delivered: dict[str, Any]) -> tuple[str, str]:
    """The Matrix snippet of docs/approvals.md, through matrix-nio: the person's reaction (a ``ReactionEvent`` from
    the bot's sync) names a control when the bot's own reaction on that message has its key and a control id."""
    event = Event.parse_event(delivered)
    assert isinstance(event, ReactionEvent)
    bot = AsyncClient(mock.base_url, "@streamrelay:mock.local")
    bot.access_token = DRY_RUN["matrix"].token
    try:
        reactions = [
            e.source
            async for e in bot.room_get_event_relations(
                delivered["room_id"], event.reacts_to, RelationshipType.annotation, "m.reaction"
            )
        ]
    finally:
        await bot.close()
    control = control_of(reactions, bot.user, event.key)
    assert control is not None
    return control, f"matrix:user:{event.sender}"


BUTTONS: dict[str, Callable[[Any, int | str, int | str], list[str]]] = {
    "matrix": matrix_buttons,
    "slack": slack_buttons,
    "discord": discord_buttons,
    "teams": teams_buttons,
}
CLICKS: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    "slack": slack_click,
    "discord": discord_click,
    "teams": teams_click,
}


async def until(check: Callable[[], bool]) -> None:
    for _ in range(300):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not reached")


@pytest.mark.parametrize("platform", ["slack", "discord", "teams", "matrix"])
async def test_stop_button(platform: str) -> None:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    assert isinstance(mock, MockServer)
    settings = ChannelSettings.model_validate(
        {"platform": platform, "api_base": await mock.start(), "throttle_ms": 0, "stop_button": True}
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    chat, buttons = dry.private, BUTTONS[platform]
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            await client.start("s1", channel="c", chat_id=chat)
            await client.send("s1", [{"kind": "text", "text": "The first half"}])
            await until(lambda: bool(mock.visible(chat)))
            message_id = mock.visible(chat)[0][0]
            await until(lambda: buttons(mock, chat, message_id) == [control_id("s1")])
            await client.send("s1", [{"kind": "text", "text": " of the answer."}])
            await until(lambda: mock.visible(chat)[0][1] == "The first half of the answer.")
            assert buttons(mock, chat, message_id) == [control_id("s1")]  # the edit kept the button

            async with httpx.AsyncClient() as control:
                pressed = await control.post(
                    f"{mock.control_url}/press", json={"chat_id": chat, "message_id": message_id}
                )
            assert pressed.status_code == 200, pressed.text
            if platform == "matrix":  # a person's ⏹ reaction, read through matrix-nio as the docs' snippet does
                control_value, by = await matrix_bot_reads(mock, pressed.json())
            else:
                control_value, by = CLICKS[platform](pressed.json())
            assert control_value == control_id("s1")
            stopped = await client.stop(control_value.removeprefix("stop:"), by=by, reason="pressed Stop")
            assert (stopped.run, stopped.state) == ("s1", "stopping")

            report = await client.report("s1", wait_s=15)
            assert report.end_status == "cancelled"
            assert f"stopped by the reader ({by}): pressed Stop" in report.errors
            assert [t for _, t in mock.visible(chat)] == ["The first half of the answer.", STOPPED_NOTICE]
            assert all(buttons(mock, chat, m) == [] for m, _ in mock.visible(chat))  # the button is gone
            units = await client.units("s1")
            assert [u.kind for u in units] == ["stop", "run.end"]
            assert isinstance(units[0], StopUnit) and units[0].by == by
            with pytest.raises(RelayError) as late:
                await client.send("s1", [{"kind": "text", "text": "!"}])
            assert late.value.status == 409 and STOPPED_ERROR in str(late.value)
            again = await client.stop(control_value.removeprefix("stop:"))
            assert (again.state, again.by) == ("stopped", by)  # idempotent
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
