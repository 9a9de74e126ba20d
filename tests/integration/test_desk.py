"""The desk over real HTTP against the mock Bot API (aiogram through the adapter, a real SQLite ledger): a final left
uncertain by a fault after the commit (its settle cut by an outage) is listed, and its resend settles it without a
second copy; one that did not land is sent once; a failed one is sent once; resolve and prune; a client sees its own
entries only; ``streamrelay deliveries`` does the same from the command line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner, Result

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.app.cli import app
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram

pytestmark = pytest.mark.timeout(90)

BOT_TOKEN = "123456:DESK-test-token"
TOKEN = "desk-ingest-secret"
OTHER = "desk-other-client-secret"
RETRY_WINDOW_S = 1.5
"""The relay's retry window: how long a failing settle is retried before the part is left uncertain."""


@dataclass
class DeskStack:
    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    ledger: SqliteLedger
    client: httpx.AsyncClient


@pytest.fixture
async def desk_stack(tmp_path: Path) -> AsyncIterator[DeskStack]:
    mock = MockTelegram()
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": "telegram", "api_base": api, "throttle_ms": 0, "delivery": "final", "exclusive_bot": True}
    )
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    clients = {"default": ClientLimits(), "other": ClientLimits(name="other")}
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), retry_window_s=RETRY_WINDOW_S, clients=clients)
    desk = Desk(ledger, ledger, relay.channels, MonotonicClock())
    sidecar = Sidecar(relay, clients=[(ClientLimits(), TOKEN), (ClientLimits(name="other"), OTHER)], desk=desk)
    await sidecar.start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
        yield DeskStack(mock, relay, sidecar, ledger, client)
    await sidecar.stop()
    await relay.close()
    await mock.stop()
    await ledger.close()


def _lines(run: str, chat_id: int, text: str) -> bytes:
    events: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat_id}},
        {"kind": "text", "mode": "delta", "text": text},
        {"kind": "end", "status": "ok"},
    ]
    return "".join(json.dumps({"run": run, **event}) + "\n" for event in events).encode()


async def _ended(
    stack: DeskStack, run: str, chat_id: int, text: str, *, client: httpx.AsyncClient | None = None
) -> Any:
    http = client or stack.client
    answer = await http.post(f"/v1/runs/{run}/events", content=_lines(run, chat_id, text))
    assert answer.status_code == 200, answer.text
    report = await http.get(f"/v1/runs/{run}", params={"wait_s": "30"})
    assert report.status_code == 200 and report.json()["done"], report.text
    return report.json()


def _settle_outage(stack: DeskStack) -> None:
    """Every settle probe (editMessageText) meets a 502 until :func:`_outage_over`: the run's settle gives up."""
    stack.mock.script.set_outage(60, {"status": 502}, ["editMessageText"])


def _outage_over(stack: DeskStack) -> None:
    stack.mock.script.outage = None


async def _listed(stack: DeskStack, **params: str) -> list[dict[str, Any]]:
    answer = await stack.client.get("/v1/deliveries", params=params)
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()["deliveries"]
    return rows


def _texts(stack: DeskStack, chat_id: int) -> list[str]:
    return [text for _, text in stack.mock.visible(chat_id)]


async def _cli(stack: DeskStack, *args: str) -> Result:
    env = {"STREAMRELAY_TOKEN": TOKEN, "STREAMRELAY_URL": stack.sidecar.url, "COLUMNS": "200", "NO_COLOR": "1"}
    return await asyncio.to_thread(CliRunner().invoke, app, ["deliveries", *args], env=env)


async def test_an_uncertain_final_that_landed_is_listed_and_its_resend_settles_it_without_a_second_copy(
    desk_stack: DeskStack,
) -> None:
    stack = desk_stack
    text = "The answer: forty-two."
    stack.mock.add_fault("sendMessage", 1, {"status": 502}, after_commit=True)  # stored, answered 502: unknown
    _settle_outage(stack)
    report = await _ended(stack, "landed", 7, text)
    assert (report["status"], report["uncertain"], report["confirmed"]) == ("partial", 1, 0), report
    assert _texts(stack, 7) == [text]  # it did land: the person sees it once already

    (row,) = await _listed(stack)
    assert row["run"] == "landed" and row["state"] == "uncertain" and row["client"] == "default"
    assert row["channel"] == "telegram" and row["chat"] == {"chat_id": 7} and row["role"] == "answer"
    assert row["error"].startswith("uncertain") and row["age_s"] >= 0 and row["chars"] == len(text)
    assert row["delivery_id"] is not None
    shown = await stack.client.get(f"/v1/deliveries/{row['id']}")
    assert shown.status_code == 200 and shown.json()["text"] == text

    _outage_over(stack)
    sends = stack.mock.script.count("sendMessage")
    answer = await stack.client.post(f"/v1/deliveries/{row['id']}/resend")
    assert answer.status_code == 200, answer.text
    done = answer.json()
    assert done["state"] == "delivered" and done["was"] == "uncertain" and done["message_id"] == "1"
    assert "nothing sent" in done["outcome"]
    assert stack.mock.script.count("sendMessage") == sends  # settled by a probe: no second send
    assert _texts(stack, 7) == [text]
    assert await _listed(stack) == []
    again = await stack.client.post(f"/v1/deliveries/{row['id']}/resend")
    assert again.status_code == 409 and "never resent" in again.json()["error"]
    assert _texts(stack, 7) == [text]


async def test_an_uncertain_final_that_did_not_land_is_sent_once_settled_below_the_new_message(
    desk_stack: DeskStack,
) -> None:
    stack = desk_stack
    text = "Nothing of this reached the chat."
    stack.mock.add_fault("sendMessage", 1, {"status": 502})  # refused before the store: a 5xx to a create, unknown
    _settle_outage(stack)
    report = await _ended(stack, "lost", 8, text)
    assert report["uncertain"] == 1, report
    assert _texts(stack, 8) == []

    (row,) = await _listed(stack, state="uncertain")
    _outage_over(stack)
    answer = await stack.client.post(f"/v1/deliveries/{row['id']}/resend")
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "delivered"
    assert _texts(stack, 8) == [text]  # a private chat: sent, then the first create settled below it (not there)


async def test_a_failed_final_is_resent_once_then_never_again(desk_stack: DeskStack) -> None:
    stack = desk_stack
    text = "Refused the first time."
    stack.mock.add_fault("sendMessage", 1, {"status": 403, "description": "Forbidden: bot was blocked by the user"})
    report = await _ended(stack, "refused", 9, text)
    assert report["failed"] == 1 and report["status"] == "failed", report
    assert _texts(stack, 9) == []

    (row,) = await _listed(stack, state="failed")
    assert row["state"] == "failed" and "Forbidden" in row["error"]
    answer = await stack.client.post(f"/v1/deliveries/{row['id']}/resend")
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"].startswith("sent as message")
    assert _texts(stack, 9) == [text]
    assert (await stack.client.post(f"/v1/deliveries/{row['id']}/resend")).status_code == 409
    assert _texts(stack, 9) == [text]
    (closed,) = await _listed(stack, state="delivered")
    assert closed["id"] == row["id"]


async def test_resolve_prune_and_each_client_sees_its_own(desk_stack: DeskStack) -> None:
    stack = desk_stack
    for nth in (1, 2):
        stack.mock.add_fault(
            "sendMessage", nth, {"status": 403, "description": "Forbidden: bot was blocked by the user"}
        )
    await _ended(stack, "mine", 10, "Mine.")
    headers = {"Authorization": f"Bearer {OTHER}"}
    async with httpx.AsyncClient(base_url=stack.sidecar.url, headers=headers, timeout=30) as other:
        await _ended(stack, "theirs", 11, "Theirs.", client=other)
        (their,) = (await other.get("/v1/deliveries")).json()["deliveries"]
        assert their["run"] == "theirs" and their["client"] == "other"
        (mine,) = await _listed(stack)
        assert mine["run"] == "mine"
        assert (await other.get(f"/v1/deliveries/{mine['id']}")).status_code == 404  # another client's: unknown
        assert (await other.post(f"/v1/deliveries/{mine['id']}/resend")).status_code == 404

        bad = await stack.client.get("/v1/deliveries", params={"state": "lost"})
        assert bad.status_code == 400 and "unknown state" in bad.json()["error"]
        resolved = await stack.client.post(f"/v1/deliveries/{mine['id']}/resolve", json={"note": "told by phone"})
        assert resolved.status_code == 200 and resolved.json()["state"] == "resolved"
        assert resolved.json()["note"] == "told by phone"
        assert await _listed(stack) == []
        counts = (await stack.client.get("/v1/deliveries")).json()["counts"]
        assert counts["resolved"] == 1 and counts["failed"] == 0
        assert (await stack.client.post(f"/v1/deliveries/{mine['id']}/resend")).status_code == 409

        kept = await stack.client.post("/v1/deliveries/prune", json={"older_than_s": 3600})
        assert kept.json() == {"pruned": 0}
        pruned = await stack.client.post("/v1/deliveries/prune", json={"older_than_s": 0})
        assert pruned.json() == {"pruned": 1}  # the caller's own only
        assert len((await other.get("/v1/deliveries")).json()["deliveries"]) == 1
    assert _texts(stack, 10) == [] and _texts(stack, 11) == []


async def test_streamrelay_deliveries_lists_and_resends_an_uncertain_final_without_doubling_it(
    desk_stack: DeskStack,
) -> None:
    stack = desk_stack
    text = "Shown once, whatever happens."
    stack.mock.add_fault("sendMessage", 1, {"status": 502}, after_commit=True)
    _settle_outage(stack)
    await _ended(stack, "cli-run", 12, text)
    listed = await _cli(stack)
    assert listed.exit_code == 0, listed.output
    assert "cli-run" in listed.stdout and "uncertain" in listed.stdout
    (row,) = await _listed(stack)
    shown = await _cli(stack, "show", row["id"])
    assert shown.exit_code == 0 and text in shown.stdout

    _outage_over(stack)
    resent = await _cli(stack, "resend", row["id"])
    assert resent.exit_code == 0, resent.output
    assert "delivered" in resent.stdout and "nothing sent" in resent.stdout
    assert _texts(stack, 12) == [text]
    again = await _cli(stack, "resend", row["id"])
    assert again.exit_code == 1 and "never resent" in again.stderr
    as_json = json.loads((await _cli(stack, "--state", "all", "--json")).stdout)
    assert [r["state"] for r in as_json["deliveries"]] == ["delivered"]
    assert _texts(stack, 12) == [text]


async def test_on_slack_an_uncertain_final_is_settled_by_reading_the_conversation_back(tmp_path: Path) -> None:
    """Slack carries the delivery id in the message's metadata: the resend reads the conversation back
    (conversations.history with include_all_metadata) and finds the first copy, so nothing is sent."""
    dry = DRY_RUN["slack"]
    mock = dry.make_mock(False)
    assert isinstance(mock, MockSlack)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": "slack", "api_base": api, "delivery": "final"})
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    relay = Relay(
        {"slack": make_runtime("slack", settings, SecretStr(dry.token))},
        ledger,
        MonotonicClock(),
        retry_window_s=RETRY_WINDOW_S,
    )
    sidecar = Sidecar(relay, token=TOKEN, desk=Desk(ledger, ledger, relay.channels, MonotonicClock()))
    await sidecar.start()
    target = dry.target()
    text = "Slack keeps it once."
    mock.add_fault("chat.postMessage", 1, {"status": 500}, after_commit=True)  # stored, answered 500: unknown
    mock.script.set_outage(60, {"status": 500}, ["conversations.history", "conversations.replies"])
    lines = [
        {"run": "sl", "kind": "run.start", "channel": "slack", "target": target.model_dump(mode="json")},
        {"run": "sl", "kind": "text", "mode": "delta", "text": text},
        {"run": "sl", "kind": "end", "status": "ok"},
    ]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as http:
            body = "".join(json.dumps(line) + "\n" for line in lines).encode()
            assert (await http.post("/v1/runs/sl/events", content=body)).status_code == 200
            report = (await http.get("/v1/runs/sl", params={"wait_s": "30"})).json()
            assert report["uncertain"] == 1, report
            shown = [t for _, t in mock.visible(target.chat_id)]
            assert shown == [text]
            (row,) = (await http.get("/v1/deliveries")).json()["deliveries"]
            assert row["state"] == "uncertain" and row["delivery_id"]
            mock.script.outage = None
            posts = mock.script.count("chat.postMessage")
            done = await http.post(f"/v1/deliveries/{row['id']}/resend")
            assert done.status_code == 200, done.text
            assert done.json()["state"] == "delivered" and "nothing sent" in done.json()["outcome"]
            assert mock.script.count("chat.postMessage") == posts
            assert [t for _, t in mock.visible(target.chat_id)] == [text]
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
        await ledger.close()
