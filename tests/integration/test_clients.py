"""Clients with their own tokens over real HTTP (issue 12): each attack of one client on another fails, and the
victim's run is delivered whole; each limit answers with a status that names its setting."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import ClientLimits, run_key
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.approvals import button_ids
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN

ALICE, MALLORY = "alice-token-0123456789", "mallory-token-9876543210"


@dataclass
class Clients:
    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    alice: httpx.AsyncClient
    mallory: httpx.AsyncClient
    anon: httpx.AsyncClient


def ndjson(*lines: dict[str, Any] | str) -> bytes:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


def start(run: str, chat_id: int = 7, channel: str = "telegram", **extra: Any) -> dict[str, Any]:
    return {"kind": "run.start", "run": run, "channel": channel, "target": {"chat_id": chat_id}, **extra}


def text(run: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "text", "run": run, "mode": "delta", "text": value, **extra}


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0})
    channels = {name: make_runtime(name, settings, SecretStr(BOT_TOKEN)) for name in ("telegram", "staff")}
    alice = ClientLimits(name="alice", channels=frozenset({"telegram"}), seq_window=100)
    mallory = ClientLimits(
        name="mallory",
        channels=frozenset({"telegram"}),
        max_active_runs=3,
        max_runs_per_request=2,
        events_per_s=50,
        max_messages_per_run=2,
        max_chars_per_run=20_000,
    )
    relay = Relay(channels, MemoryLedger(), MonotonicClock(), clients={"alice": alice, "mallory": mallory})
    sidecar = Sidecar(relay, clients=[(alice, ALICE), (mallory, MALLORY)])
    await sidecar.start()
    async with (
        httpx.AsyncClient(base_url=sidecar.url, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as a,
        httpx.AsyncClient(base_url=sidecar.url, headers={"Authorization": f"bearer {MALLORY}"}, timeout=30) as m,
        httpx.AsyncClient(base_url=sidecar.url, timeout=30) as anon,
    ):
        yield Clients(mock, relay, sidecar, a, m, anon)
    await sidecar.stop()
    await relay.close()
    await mock.stop()


async def _alice_run(c: Clients, run: str = "run-1", chat_id: int = 7) -> None:
    answer = await c.alice.post(f"/v1/runs/{run}/events", content=ndjson(start(run, chat_id, seq=0)))
    assert answer.status_code == 200, answer.text


async def _alice_ends(c: Clients, run: str = "run-1", words: str = "the answer, whole") -> dict[str, Any]:
    body = ndjson(text(run, words, seq=1), {"kind": "end", "run": run, "seq": 2})
    answer = await c.alice.post(f"/v1/runs/{run}/events", content=body)
    assert answer.status_code == 200 and answer.json() == {"accepted": 2}, answer.text
    report: dict[str, Any] = (await c.alice.get(f"/v1/runs/{run}", params={"wait_s": 15})).json()
    return report


async def test_another_client_cannot_feed_end_or_read_a_run(clients: Clients) -> None:
    c = clients
    await _alice_run(c)
    injected = await c.mallory.post("/v1/runs/run-1/events", content=ndjson(text("run-1", "EVIL")))
    ghost = await c.mallory.post("/v1/runs/never-was/events", content=ndjson(text("never-was", "EVIL")))
    assert injected.status_code == ghost.status_code == 409
    assert injected.json()["error"] == ghost.json()["error"].replace("never-was", "run-1")
    ended = await c.mallory.post("/v1/events", content=ndjson({"kind": "end", "run": "run-1", "status": "error"}))
    assert ended.status_code == 409
    for path in ("/v1/runs/{}", "/v1/runs/{}/pipeline"):
        theirs, none = [await c.mallory.get(path.format(r)) for r in ("run-1", "never-was")]
        assert theirs.status_code == none.status_code == 404, path
        assert theirs.json()["error"] == none.json()["error"].replace("never-was", "run-1")
    # A watch link is given for a run not started yet too: Mallory's "run-1" is her own, like "never-was".
    theirs, none = [(await c.mallory.get(f"/v1/runs/{r}/watch")).json() for r in ("run-1", "never-was")]
    assert theirs["started"] is none["started"] is False
    assert "/runs/mallory%2Frun-1?token=" in theirs["url"] and "alice" not in theirs["url"]
    gate = await c.mallory.post("/v1/runs/run-1/gate", json={"id": "call-1"})
    assert gate.status_code == 404
    listing = (await c.mallory.get("/v1/runs")).json()
    assert listing["runs"] == []
    report = await _alice_ends(c)
    assert report["status"] == "delivered" and report["run"] == "run-1"
    assert [t for _, t in c.mock.visible(7)] == ["the answer, whole"]
    assert [row["run"] for row in (await c.alice.get("/v1/runs")).json()["runs"]] in ([], ["run-1"])


async def test_a_run_id_taken_first_by_another_client_is_still_yours(clients: Clients) -> None:
    c = clients
    claimed = await c.mallory.post("/v1/runs/run-1/events", content=ndjson(start("run-1", 99)))
    assert claimed.status_code == 200
    await _alice_run(c)  # no 409: mallory's run-1 is another run
    report = await _alice_ends(c)
    assert report["status"] == "delivered"
    assert [t for _, t in c.mock.visible(7)] == ["the answer, whole"]
    assert c.mock.visible(99) == []  # mallory's run shows nothing yet: it is its own


async def test_a_far_ahead_seq_is_refused_and_the_run_goes_on(clients: Clients) -> None:
    c = clients
    await _alice_run(c)
    far = await c.alice.post("/v1/runs/run-1/events", content=ndjson(text("run-1", "far", seq=10**15)))
    assert far.status_code == 422 and far.json()["accepted"] == 0
    assert "clients.alice.seq_window" in far.json()["error"]
    bad = await c.alice.post(
        "/v1/runs/run-1/events",
        content=ndjson(text("run-1", "x", seq="7"), text("run-1", "x", seq=10**29), text("run-1", "x", seq=True)),
    )
    assert bad.status_code == 400 and bad.json()["accepted"] == 0 and len(bad.json()["rejected"]) == 3
    report = await _alice_ends(c)
    assert report["status"] == "delivered" and report["done"]
    assert [t for _, t in c.mock.visible(7)] == ["the answer, whole"]


async def test_one_request_cannot_fill_the_run_slots(clients: Clients) -> None:
    c = clients
    body = ndjson(*(start(f"flood-{i}", 1000 + i) for i in range(50)))
    flood = await c.mallory.post("/v1/events", content=body)
    assert flood.status_code == 429 and flood.json()["accepted"] == 2
    assert "clients.mallory.max_runs_per_request" in flood.json()["error"]
    assert flood.json()["rejected_total"] == 48 and len(flood.json()["rejected"]) == 20
    more = await c.mallory.post("/v1/events", content=ndjson(start("flood-a", 2000), start("flood-b", 2001)))
    assert more.status_code == 429 and more.json()["accepted"] == 1  # 3 active: the most mallory may have
    assert "clients.mallory.max_active_runs" in more.json()["error"] and more.headers["retry-after"] == "1"
    await _alice_run(c)  # the victim still starts runs
    report = await _alice_ends(c)
    assert report["status"] == "delivered"


async def test_a_client_uses_only_its_channels(clients: Clients) -> None:
    answer = await clients.mallory.post("/v1/runs/r/events", content=ndjson(start("r", channel="staff")))
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "unknown channel 'staff'" in error and "telegram" in error


async def test_events_per_second_slow_a_request_down(clients: Clients) -> None:
    c = clients
    lines = [start("paced", 31)] + [text("paced", ".") for _ in range(149)]
    began = time.monotonic()
    answer = await c.mallory.post("/v1/runs/paced/events", content=ndjson(*lines))
    took = time.monotonic() - began
    assert answer.status_code == 200 and answer.json()["accepted"] == 150
    assert took >= 1.5  # 150 lines at 50/s with a bucket of 50: at least 2 s, a floor a slow machine cannot break


async def test_bad_lines_cost_constant_memory_and_stop_the_request(clients: Clients) -> None:
    body = b"{nope\n" * 5000
    answer = await clients.alice.post("/v1/events", content=body)
    assert answer.status_code == 400
    data = answer.json()
    assert data["rejected_total"] == 1000 and len(data["rejected"]) == 20
    assert "stopped reading at line 1000" in data["error"]


async def test_the_scheme_is_case_insensitive_and_a_wrong_token_is_401(clients: Clients) -> None:
    c = clients
    for scheme in ("bearer", "BEARER", "Bearer"):
        ok = await c.anon.get("/v1/runs", headers={"Authorization": f"{scheme} {ALICE}"})
        assert ok.status_code == 200, scheme
    for header in (f"Basic {ALICE}", f"Bearer {ALICE}x", "Bearer", ""):
        refused = await c.anon.get("/v1/runs", headers={"Authorization": header} if header else {})
        assert refused.status_code == 401 and ALICE not in refused.text


async def test_run_ids_with_a_slash_or_controls_are_refused(clients: Clients) -> None:
    for run in ("a/b", "a b", "a\x00b", "x" * 201):
        answer = await clients.alice.post("/v1/events", content=ndjson(start(run)))
        assert answer.status_code == 400 and "run must be" in answer.json()["error"], run


async def test_a_clients_watch_link_opens_its_live_page(clients: Clients) -> None:
    c = clients
    await _alice_run(c)
    watch = await c.alice.get("/v1/runs/run-1/watch")
    assert watch.status_code == 200
    link = watch.json()["url"]
    assert "/runs/alice%2Frun-1?token=" in link  # the page's address names the client's run
    assert (await c.anon.get(link)).status_code == 200
    await _alice_ends(c)
    live = link.replace("/runs/", "/v1/runs/", 1).replace("?", "/live?", 1)
    stream = await c.anon.get(live)
    assert stream.status_code == 200 and "the answer, whole" in stream.text
    mallory_link = (await c.mallory.get("/v1/runs/run-1/watch")).json()  # her own run-1, not started
    assert mallory_link["started"] is False and mallory_link["token"] != watch.json()["token"]


async def test_a_run_is_cut_at_its_clients_message_and_character_limits(clients: Clients) -> None:
    c = clients
    words = ("All work and no play makes a long answer. " * 300)[:12_000]
    body = ndjson(start("long", 55), text("long", words), {"kind": "end", "run": "long"})
    assert (await c.mallory.post("/v1/runs/long/events", content=body)).status_code == 200
    report = (await c.mallory.get("/v1/runs/long", params={"wait_s": 20})).json()
    assert report["status"] == "partial" and len(c.mock.visible(55)) == 2
    assert any("clients.mallory.max_messages_per_run" in (p["error"] or "") for p in report["parts"]), report
    more = await c.mallory.post(
        "/v1/events", content=ndjson(start("huge", 56), text("huge", "x" * 15_000), text("huge", "y" * 15_000))
    )
    assert more.status_code == 422 and more.json()["accepted"] == 2
    assert "clients.mallory.max_chars_per_run" in more.json()["error"]


async def test_another_client_cannot_decide_or_read_an_approval(clients: Clients) -> None:
    """Approvals are per client like runs (docs/approvals.md): another client's decision by run id or by the
    buttons' 16 hex is a 404 and decides nothing, and the owner's own errors name its run id, never the
    client-prefixed key (breaker: a 404 through the 16 hex said "run 'alice/run-1' asked no approval 'nope'")."""
    c = clients
    await _alice_run(c)
    ask = {
        "kind": "approval.request",
        "run": "run-1",
        "id": "refund",
        "question": "Refund?",
        "ttl_s": 600,
        "approvers": ["telegram:user:1"],
        "seq": 1,
    }
    asked = await c.alice.post("/v1/runs/run-1/events", content=ndjson(ask))
    assert asked.status_code == 200, asked.text
    run16, id16 = button_ids(run_key("alice", "run-1"), "refund")[0].split(":")[1:]
    press = {"decision": "approve", "by": "telegram:user:1"}
    for run, approval in (("run-1", "refund"), (run16, id16)):
        theirs = await c.mallory.post(f"/v1/runs/{run}/approvals/{approval}", json=press)
        assert theirs.status_code == 404, theirs.text
        assert (await c.mallory.get(f"/v1/runs/{run}/approvals/{approval}")).status_code == 404
    assert (await c.alice.get("/v1/runs/run-1/approvals/refund")).json()["state"] == "pending"
    for path in (f"/v1/runs/{run16}/approvals/nope", "/v1/runs/run-1/approvals/nope"):
        own = await c.alice.post(path, json=press)
        assert own.status_code == 404 and "alice" not in own.json()["error"], own.text
        shown = await c.alice.get(path)
        assert shown.status_code == 404 and "alice" not in shown.json()["error"], shown.text
    decided = await c.alice.post(f"/v1/runs/{run16}/approvals/{id16}", json=press)
    assert decided.status_code == 200 and decided.json()["run"] == "run-1", decided.text


async def test_a_line_after_the_end_is_dropped_naming_the_run_id_not_the_key(clients: Clients) -> None:
    """A dropped line's reason is shown as the client's own run id (breaker: "run 'alice/run-1' already took its
    end"), as rejections already were (``Caller.public``)."""
    c = clients
    await _alice_run(c)
    await _alice_ends(c)
    late = await c.alice.post("/v1/events", content=ndjson(text("run-1", "late")))
    assert late.status_code == 200 and late.json()["dropped"] == 1, late.text
    assert "'run-1'" in late.json()["dropped_reason"] and "alice" not in late.json()["dropped_reason"], late.text
