"""A WhatsApp approval tap reaching a replica that does not own the run (Meta posts every webhook to one URL, which
any replica may answer): posted on, signed as it came, to the owner's webhook, which decides it once (issue 27:
"decided once, whichever replica the press reaches"). Two replicas in this process
(:func:`tests.redis.replicas.two_replicas`) on one redis-server, a WhatsApp channel through pywa against the mock
Cloud API; the tap's webhook is the mock's own payload, signed with the app secret."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import conversation_key, partition_of
from streamrelay.adapters.whatsapp.buttons import BODY
from streamrelay.adapters.whatsapp.webhook import SIGNATURE_HEADER, WEBHOOK_PATH, signature
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.config.settings import load_settings
from streamrelay.core.run.approvals import button_ids
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.redis.replicas import PARTITIONS, SERVICE, two_replicas, until
from tests.redis.test_failover import post_as_agent

pytestmark = pytest.mark.timeout(120)

TOKEN = "replica-taps-token"
SECRET = "replica-taps-app-secret"
OTHER_PERSON = "15550001114"
"""A chat whose conversation (on channel wa) is in the other partition than the dry run's person's."""


async def test_a_tap_at_a_replica_that_does_not_own_the_run_is_decided_once_by_its_owner(
    tmp_path: Path, redis_url: str, client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    dry = DRY_RUN["whatsapp"]
    mock = dry.make_mock(False)
    assert isinstance(mock, MockWhatsApp)
    api = await mock.start()
    monkeypatch.setenv("STREAMRELAY_TOKEN", TOKEN)
    monkeypatch.setenv("TAPS_WA_TOKEN", dry.token)
    monkeypatch.setenv("WHATSAPP_APP_SECRET", SECRET)
    monkeypatch.setenv("STREAMRELAY_SERVICE__REDIS_URL", redis_url)
    config = tmp_path / "channels.toml"
    config.write_text(
        SERVICE + f'\n[channels.wa]\nplatform = "whatsapp"\ntoken_env = "TAPS_WA_TOKEN"\napi_base = "{api}"\n'
        'delivery = "block"\nformat = "plain"\ntyping = false\n'
    )
    settings = load_settings(config)
    person = dry.target().chat_id
    approver = f"whatsapp:user:{person}"
    try:
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            two_replicas(settings, client, http) as urls,
        ):
            events: list[dict[str, Any]] = [
                {"kind": "run.start", "channel": "wa", "target": {"chat_id": person}},
                {
                    "kind": "approval.request",
                    "id": "refund",
                    "question": "Refund 49.99 EUR?",
                    "approvers": [approver],
                    "ttl_s": 120,
                },
            ]
            body = "".join(json.dumps({"run": "tap-run", **e}) + "\n" for e in events).encode()
            asked = await post_as_agent(http, urls[0] + "/v1/runs/tap-run/events", body)
            assert asked.status_code == 200, asked.text

            def buttons_of(who: int | str) -> Callable[[], Awaitable[str | None]]:
                """The reply buttons message ``who`` sees, None while none."""

                async def buttons() -> str | None:
                    found = [str(m) for m, t in mock.visible(who) if t == BODY]
                    return found[0] if found else None

                return buttons

            message_id = await until(buttons_of(person), "the reply buttons message")
            partition = await client.get("sr:run:tap-run")
            lease = await client.get(f"sr:{{p{partition!s}}}:lease")
            owner_url = await client.hget("sr:{replicas}:urls", str(lease).split(":", 1)[1])
            elsewhere = next(url for url in urls if url != str(owner_url))  # the replica that does not own it
            approve, deny = button_ids("tap-run", "refund")

            async def tap(button: str) -> dict[str, Any]:
                raw = json.dumps(mock.press(person, message_id, button)).encode()
                headers = {SIGNATURE_HEADER: signature(SECRET, raw), "Content-Type": "application/json"}
                async with httpx.AsyncClient(timeout=30) as meta:  # as Meta posts it: no bearer token
                    answer = await meta.post(elsewhere + WEBHOOK_PATH, content=raw, headers=headers)
                assert answer.status_code == 200, answer.text
                return dict(answer.json())

            first = await tap(approve)
            assert first["presses"] == [{"button": approve, "status": 200, "decision": "approved"}], first
            second = await tap(deny)  # the first decision holds, wherever the tap lands
            assert [p["status"] for p in second["presses"]] == [409], second
            for url in urls:  # one approval unit, read through either replica
                units = (await http.get(url + "/v1/runs/tap-run/pipeline")).json()["units"]
                decided = [(u["decision"], u["by"]) for u in units if u["kind"] == "approval"]
                assert decided == [("approved", approver)], units

            # Meta batches messages: one webhook holding a tap of each replica's run, posted to the first run's owner.
            # The owner of the other run is forwarded the whole body; it decides its own tap and leaves the first
            # (not its run) to the replica that forwarded it (was: a 503 on that tap, the whole webhook a 500 every
            # time Meta sent it again: the second tap never answered).
            other = OTHER_PERSON
            assert partition_of(conversation_key("wa", other), PARTITIONS) != int(str(partition))
            second_run = [
                {"kind": "run.start", "channel": "wa", "target": {"chat_id": other}},
                {**events[1], "approvers": [f"whatsapp:user:{other}"]},
            ]
            body = "".join(json.dumps({"run": "tap-run-2", **e}) + "\n" for e in second_run).encode()
            asked = await post_as_agent(http, urls[0] + "/v1/runs/tap-run-2/events", body)
            assert asked.status_code == 200, asked.text

            other_message = await until(buttons_of(other), "the second run's reply buttons message")
            approve2, _ = button_ids("tap-run-2", "refund")
            batched = mock.press(person, message_id, deny)
            batched["entry"][0]["changes"][0]["value"]["messages"] += mock.press(other, other_message, approve2)[
                "entry"
            ][0]["changes"][0]["value"]["messages"]
            raw = json.dumps(batched).encode()
            headers = {SIGNATURE_HEADER: signature(SECRET, raw), "Content-Type": "application/json"}
            async with httpx.AsyncClient(timeout=30) as meta:
                answer = await meta.post(str(owner_url) + WEBHOOK_PATH, content=raw, headers=headers)
            assert answer.status_code == 200, answer.text
            assert [(p["button"], p["status"]) for p in answer.json()["presses"]] == [(deny, 409), (approve2, 200)]
            units = (await http.get(elsewhere + "/v1/runs/tap-run-2/pipeline")).json()["units"]
            assert [u["decision"] for u in units if u["kind"] == "approval"] == ["approved"], units
            ended = await post_as_agent(
                http, elsewhere + "/v1/runs/tap-run/events", b'{"run": "tap-run", "kind": "end"}\n'
            )
            assert ended.status_code == 200, ended.text
    finally:
        await mock.stop()
