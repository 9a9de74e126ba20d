"""Approvals on the live page in a real Chromium (docs/approvals.md, adapters/web/approvals.py): the agent asks with
docs/approvals.md's ``approval.request`` line, the page shows a card saying what is asked with Approve and Deny, a
press on a link made for an approver decides as that person and the agent's ``wait_approval`` returns the decision;
a press by a viewer who may not decide changes nothing and is told so on the card; a decision made elsewhere (a bot
forwarding a Telegram press) reaches the card through the event stream; a read link only watches; ``anyone`` only
where the channel says ``approvals_anyone``."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser

from streamrelay.app.client import RelayError
from streamrelay.config.paths import CHECKOUT
from streamrelay.core.contracts.units import ApprovalUnit
from tests.browser.conftest import INGEST_TOKEN, WAIT_MS, LivePage, WebStack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

ALICE = "web:user:alice"
BOB = "web:user:bob"


def docs_request() -> dict[str, Any]:
    """docs/approvals.md's ``approval.request`` line (the agent's side), as the docs show it."""
    text = (CHECKOUT / "docs" / "approvals.md").read_text(encoding="utf-8")
    block = re.search(r"## The agent's side.*?```json\n(.*?)```", text, re.S)
    assert block is not None, "docs/approvals.md lost its approval.request example"
    line: dict[str, Any] = json.loads(block.group(1))
    assert line["kind"] == "approval.request"
    return line


async def link_for(web: WebStack, run: str, viewer: str | None = None) -> str:
    params = {"as": viewer} if viewer else {}
    async with httpx.AsyncClient(base_url=web.sidecar.url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}) as h:
        answer = await h.get(f"/v1/runs/{run}/watch", params=params)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["url"])


async def open_page(browser: Browser, url: str) -> LivePage:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    live = LivePage(await context.new_page())
    await live.page.goto(url)
    await live.wait_state("live")
    return live


async def ask(web: WebStack, run: str, approvers: list[str], *, channel: str = "web") -> dict[str, Any]:
    """Start ``run`` and send the docs' request with ``approvers``; returns the line sent."""
    line = {**docs_request(), "run": run, "approvers": approvers}
    async with web.client() as client:
        await client.start(run, channel=channel, chat_id="page")
        await client.send(run, [{"kind": "text", "text": "I found the order."}, line])
    return line


async def test_the_page_approves_and_the_agent_goes_on(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    run = "approve-1"
    line = await ask(web, run, [ALICE])
    await live.page.goto(await link_for(web, run, ALICE))
    await live.wait_state("live")
    card = live.page.locator(f'.approval[data-approval="{line["id"]}"]')
    await card.wait_for()
    assert await card.get_attribute("data-state") == "pending"
    assert await live.text(".approval-question") == f"🔐 {line['question']}"
    assert await live.text(".approval-action") == f"If approved: {line['action']}"
    assert await live.text(".approval-who") == f"Who may decide: {ALICE}"
    assert await live.text("#viewer") == f"you decide as {ALICE}"
    approve = live.page.get_by_role("button", name=f"Approve: {line['question']}")
    assert await approve.is_visible()
    async with web.client() as client:
        waiter = asyncio.create_task(client.wait_approval(run, line["id"]))
        await approve.click()
        unit = await asyncio.wait_for(waiter, WAIT_MS / 1000)
        assert isinstance(unit, ApprovalUnit)
        assert (unit.decision, unit.approved, unit.by) == ("approved", True, ALICE)
        await live.wait_text(f'.approval[data-approval="{line["id"]}"] .approval-outcome', lambda t: "Approved" in t)
        assert (await live.text(".approval-outcome")).startswith(f"✅ Approved by {ALICE} at ")
        assert not await approve.is_visible()  # decided: no buttons
        # The web channel's approval part (the same message a chat shows) says so too, once.
        parts = await live.wait_text(
            "#deliveries", lambda t: f"✅ Approved by {ALICE}" in t and "Who may decide" not in t
        )
        assert parts.count("🔐 Approval:") == 1
        # A second press elsewhere gets the first decision (decided once).
        with pytest.raises(RelayError) as again:
            await client.decide_approval(run, line["id"], "deny", by=ALICE)
        assert again.value.status == 409
        await client.send(run, [{"kind": "end", "status": "ok"}])
        assert [u.kind for u in await client.units(run)].count("approval") == 1
    await live.wait_state("ended")
    await live.snapshot(tmp_path / "approved.png")


async def test_a_non_approver_is_told_and_the_approver_denies(web: WebStack, browser: Browser) -> None:
    run = "deny-1"
    line = await ask(web, run, [ALICE])
    bob = await open_page(browser, await link_for(web, run, BOB))
    alice = await open_page(browser, await link_for(web, run, ALICE))
    try:
        async with web.client() as client:
            waiter = asyncio.create_task(client.wait_approval(run, line["id"]))
            await bob.page.get_by_role("button", name=f"Approve: {line['question']}").click()
            await bob.wait_text(".approval-note", lambda t: t == "You may not decide this approval.")
            state = await _approval(web, run, line["id"])
            assert state["state"] == "pending"  # bob's press changed nothing
            assert not waiter.done()
            await alice.page.get_by_role("button", name=f"Deny: {line['question']}").click()
            unit = await asyncio.wait_for(waiter, WAIT_MS / 1000)
            assert (unit.decision, unit.approved, unit.by) == ("denied", False, ALICE)
            # Bob's card follows the decision through the event stream; his buttons are gone.
            await bob.wait_text(".approval-outcome", lambda t: t.startswith(f"❌ Denied by {ALICE} at "))
            assert not await bob.page.locator(".approval-buttons button").first.is_visible()
            await client.send(run, [{"kind": "end", "status": "ok"}])
        assert bob.problems == [] and alice.problems == []
    finally:
        await bob.page.context.close()
        await alice.page.context.close()


async def test_a_decision_made_in_the_chat_reaches_a_watching_page(web: WebStack, live: LivePage) -> None:
    run = "elsewhere-1"
    line = await ask(web, run, ["telegram:user:123"])
    await live.page.goto(await link_for(web, run))  # a read link: it watches
    await live.wait_state("live")
    await live.page.locator(".approval").wait_for()
    assert not await live.page.locator(".approval-buttons button").first.is_visible()
    assert "to decide, open a link made for you" in await live.text(".approval-note")
    async with web.client() as client:  # the bot forwards a Telegram press (docs/approvals.md)
        await client.decide_approval(run, line["id"], "approve", by="telegram:user:123")
        await live.wait_text(".approval-outcome", lambda t: t.startswith("✅ Approved by telegram:user:123 at "))
        await client.send(run, [{"kind": "end", "status": "ok"}])


async def test_an_undecided_card_says_so_when_the_run_ends(web: WebStack, live: LivePage) -> None:
    run = "ended-1"
    await ask(web, run, [ALICE])
    await live.page.goto(await link_for(web, run, ALICE))
    await live.page.locator(".approval-buttons button.approve").wait_for()
    async with web.client() as client:
        await client.send(run, [{"kind": "end", "status": "ok"}])
    await live.wait_state("ended")
    await live.wait_text(".approval-outcome", lambda t: t == "Not decided: the run ended.")
    assert not await live.page.locator(".approval-buttons button.approve").is_visible()


async def test_tokens_decide_only_as_their_viewer(web: WebStack) -> None:
    """The page's route over HTTP: a read token or another viewer's token never decides; ``anyone`` only where the
    channel says so."""
    run = "tokens-1"
    line = await ask(web, run, [ALICE])
    alice_link = httpx.URL(await link_for(web, run, ALICE))
    read = alice_link.params["token"]
    decide = alice_link.params["decide"]
    assert alice_link.params["viewer"] == ALICE
    path = f"/v1/runs/{run}/live/approvals/{line['id']}"
    async with httpx.AsyncClient(base_url=web.sidecar.url) as http:
        body = {"decision": "approve", "viewer": ALICE}
        assert (await http.post(path, json=body)).status_code == 401
        assert (await http.post(path, json=body, headers={"Authorization": f"Bearer {read}"})).status_code == 403
        as_bob = await http.post(path, json={**body, "viewer": BOB}, headers={"Authorization": f"Bearer {decide}"})
        assert as_bob.status_code == 403 and "does not let web:user:bob decide" in as_bob.json()["error"]
        bad = await http.post(
            path, json={"decision": "maybe", "viewer": ALICE}, headers={"Authorization": f"Bearer {decide}"}
        )
        assert bad.status_code == 400 and "approve" in bad.json()["error"]
        assert (await _approval(web, run, line["id"]))["state"] == "pending"
        async with httpx.AsyncClient(
            base_url=web.sidecar.url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}
        ) as h:
            wrong = await h.get(f"/v1/runs/{run}/watch", params={"as": "alice smith"})
        assert wrong.status_code == 400 and "web:user:alice" in wrong.json()["error"]
        # Anyone: a request naming nobody on a channel with approvals_anyone: any named viewer decides.
        other = "tokens-2"
        anyone_line = {**docs_request(), "run": other, "approvers": []}
        async with web.client() as client:
            await client.start(other, channel="web-anyone", chat_id="page")
            await client.send(other, [anyone_line])
            carol = httpx.URL(await link_for(web, other, "web:user:carol"))
            ok = await http.post(
                f"/v1/runs/{other}/live/approvals/{anyone_line['id']}",
                json={"decision": "approve", "viewer": "web:user:carol"},
                headers={"Authorization": f"Bearer {carol.params['decide']}"},
            )
            assert ok.status_code == 200 and ok.json()["by"] == "web:user:carol"
            for name in (run, other):
                await client.send(name, [{"kind": "end", "status": "ok"}])
        # Without approvals_anyone a request naming nobody is refused when asked (docs/approvals.md).
        async with web.client() as client:
            await client.start("tokens-3", channel="web", chat_id="page")
            with pytest.raises(RelayError) as nobody:
                await client.send("tokens-3", [{**docs_request(), "run": "tokens-3", "approvers": []}])
            assert nobody.value.status == 400


async def _approval(web: WebStack, run: str, approval: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=web.sidecar.url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}) as h:
        answer = await h.get(f"/v1/runs/{run}/approvals/{approval}")
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()
    return state


@pytest.mark.parametrize("live_buffer", [3])
async def test_a_page_that_missed_the_events_gets_the_card_from_the_state(web: WebStack, live: LivePage) -> None:
    """Past the replay buffer a page gets one ``reset``: its state's ``approvals`` rebuild the card, buttons and all."""
    run = "reset-1"
    line = await ask(web, run, [ALICE])
    async with web.client() as client:
        await client.send(run, [{"kind": "status", "text": f"step {n}"} for n in range(8)])
        await live.page.goto(await link_for(web, run, ALICE))
        await live.wait_state("live")
        assert (await live.view())["resets"] >= 1
        await live.page.get_by_role("button", name=f"Approve: {line['question']}").click()
        unit = await asyncio.wait_for(client.wait_approval(run, line["id"]), WAIT_MS / 1000)
        assert unit.by == ALICE and unit.approved
        await live.wait_text(".approval-outcome", lambda t: t.startswith(f"✅ Approved by {ALICE}"))
        await client.send(run, [{"kind": "end", "status": "ok"}])
