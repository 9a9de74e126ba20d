"""A WhatsApp approval tap reaching a replica that does not own the run (Meta posts every webhook to one URL, which
any replica may answer): posted on, signed as it came, to the owner's webhook, which decides it once (issue 27:
"decided once, whichever replica the press reaches"). Two replicas in this process (each its own
:func:`app.replicas.serving.serve_replica` with its listeners) on one redis-server, a WhatsApp channel through pywa
against the mock Cloud API; the tap's webhook is the mock's own payload, signed with the app secret."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import conversation_key, partition_of
from streamrelay.adapters.whatsapp.buttons import BODY
from streamrelay.adapters.whatsapp.webhook import SIGNATURE_HEADER, WEBHOOK_PATH, signature
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.replicas.serving import serve_replica
from streamrelay.config.settings import load_settings
from streamrelay.core.run.approvals import button_ids
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.contention import wait_scale
from tests.ports import free_port
from tests.redis.test_failover import post_as_agent

pytestmark = pytest.mark.timeout(120)

TOKEN = "replica-taps-token"
SECRET = "replica-taps-app-secret"
PARTITIONS = 2
OTHER_PERSON = "15550001114"
"""A chat whose conversation (on channel wa) is in the other partition than the dry run's person's."""


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s * wait_scale()  # a hang guard, scaled by the machine's load
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


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
        f'[service]\nbackend = "redis"\npartitions = {PARTITIONS}\nlease_ttl_s = 2.0\ndrain_s = 1\nactions = ""\n'
        "allow_volatile_redis = true\n\n"
        f'[channels.wa]\nplatform = "whatsapp"\ntoken_env = "TAPS_WA_TOKEN"\napi_base = "{api}"\n'
        'delivery = "block"\nformat = "plain"\ntyping = false\n'
    )
    settings = load_settings(config)
    clients = [(limits, token.get_secret_value()) for limits, token in settings.client_tokens()]
    tokens = {"wa": settings.channels["wa"].token("wa")}
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    stop, forced = asyncio.Event(), asyncio.Event()
    replicas = [
        asyncio.create_task(
            serve_replica(
                settings,
                clients=clients,
                metrics_token=None,
                tokens=tokens,
                metrics=ServiceMetrics("test"),
                host="127.0.0.1",
                port=port,
                log_level="warning",
                stop=stop,
                forced=forced,
            )
        )
        for port in ports
    ]
    person = dry.target().chat_id
    approver = f"whatsapp:user:{person}"
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:

            async def split() -> bool:  # both ready, each holding one partition
                for replica in replicas:
                    if replica.done():
                        replica.result()  # its error
                        raise AssertionError("a replica stopped")
                try:
                    ready = [(await http.get(url + "/readyz")).status_code == 200 for url in urls]
                except httpx.TransportError:
                    return False
                holders = [await client.get(f"sr:{{p{p}}}:lease") for p in range(PARTITIONS)]
                return all(ready) and len({str(h).split(":", 1)[1] for h in holders if h}) == PARTITIONS

            await _until(split, "two replicas holding a partition each")
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

            async def buttons() -> str | None:
                found = [str(m) for m, t in mock.visible(person) if t == BODY]
                return found[0] if found else None

            message_id = await _until(buttons, "the reply buttons message")
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

            async def other_buttons() -> str | None:
                found = [str(m) for m, t in mock.visible(other) if t == BODY]
                return found[0] if found else None

            other_message = await _until(other_buttons, "the second run's reply buttons message")
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
        stop.set()
        forced.set()
        for replica in replicas:
            async with asyncio.timeout(30):
                await replica
        await mock.stop()
