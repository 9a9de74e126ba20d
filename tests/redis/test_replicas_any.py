"""Replicas on one Redis, as a bot and a browser use them: whichever replica they ask, the run's pipeline lane, its
action gate, its report and its live page answer (the owner proxy forwards to the run's owner); and three replicas
sending for one bot stay inside its documented rate limits together (issue 11: budgets shared in Redis)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from tests.contention import wait_scale
from tests.redis.test_failover import TOKEN, _cluster, _owner, post_as_agent

pytestmark = pytest.mark.timeout(180)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _ndjson(run: str, *lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


async def test_the_lane_the_gate_the_report_and_the_live_page_answer_on_every_replica(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    target = DRY_RUN["telegram"].target()
    async with (
        _cluster(tmp_path, redis_url, client, "preview") as (_mock, replicas),
        httpx.AsyncClient(headers=AUTH, timeout=30) as http,
    ):
        run = "anywhere-1"
        start = {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0}
        call = {"kind": "tool_call", "id": "c1", "name": "search", "state": "end", "args": {"q": "refund"}, "seq": 1}
        text = {"kind": "text", "mode": "delta", "text": "Looking it up.", "seq": 2}
        posted = await post_as_agent(http, replicas.url(0) + f"/v1/runs/{run}/events", _ndjson(run, start, call, text))
        assert posted.status_code == 200, posted.text
        owner = await _owner(client, replicas, run)
        for i in range(3):  # the owner answers itself; the two others forward to it
            base = replicas.url(i) + f"/v1/runs/{run}"
            for _ in range(100):
                lane = await http.get(base + "/pipeline")
                if lane.status_code == 200 and lane.json().get("units"):
                    break
                await asyncio.sleep(0.1)
            assert [u["kind"] for u in lane.json()["units"]] == ["tool_call"], (i, owner, lane.text)
            gate = await http.post(base + "/gate", json={"id": "c1"})
            assert gate.status_code == 200 and gate.json()["unit"]["name"] == "search", gate.text
            watch = await http.get(base + "/watch")
            assert watch.status_code == 200, watch.text
            token = watch.json()["token"]
            async with http.stream("GET", base + "/live", params={"token": token}) as live:
                assert live.status_code == 200 and live.headers["content-type"].startswith("text/event-stream")
                first = await anext(line async for line in live.aiter_lines() if line.startswith("data:"))
            assert json.loads(first[5:])["type"] == "run"
        end = {"kind": "end", "status": "ok", "seq": 3}
        assert (await post_as_agent(http, replicas.url(2) + f"/v1/runs/{run}/events", _ndjson(run, end))).is_success
        for i in range(3):
            report = await http.get(replicas.url(i) + f"/v1/runs/{run}", params={"wait_s": 30})
            assert report.status_code == 200 and report.json()["status"] == "delivered", (i, report.text)


async def test_three_replicas_sending_for_one_bot_share_its_budget_no_429(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    """Ninety chats' answers at once through three replicas, the mock answering 429 past Telegram's documented limits
    (30 messages a second per bot): each replica's own bot budget would let 20 a second through, 60 together; the
    budget shared in Redis keeps all three at 20."""
    dry = DRY_RUN["telegram"]
    scale = wait_scale()  # the waits below stretch with the load, as the test's timeout does
    wait_s = min(600.0, 100 * scale)  # the sidecar waits 600 s at most
    async with (
        _cluster(tmp_path, redis_url, client, "final", rate_limits=True) as (mock, replicas),
        httpx.AsyncClient(headers=AUTH, timeout=120 * scale) as http,
    ):
        chats = [9000 + i for i in range(90)]
        answer = "Your refund of 49.99 EUR was approved today."

        async def one(i: int) -> dict[str, Any]:
            run = f"budget-{i}"
            target = dry.target().model_copy(update={"chat_id": chats[i]})
            lines = [
                {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0},
                {"kind": "end", "status": "ok", "final_text": answer, "seq": 1},
            ]
            posted = await post_as_agent(http, replicas.url(i % 3) + f"/v1/runs/{run}/events", _ndjson(run, *lines))
            assert posted.status_code == 200, posted.text
            report = await http.get(replicas.url((i + 1) % 3) + f"/v1/runs/{run}", params={"wait_s": wait_s})
            assert report.status_code == 200, report.text
            return dict(report.json())

        reports = await asyncio.gather(*(one(i) for i in range(90)))
        assert all(r["status"] == "delivered" for r in reports), [r for r in reports if r["status"] != "delivered"]
        refused = [c for c in mock.calls if c.status == 429]
        assert refused == [], f"{len(refused)} x 429"
        assert [[text for _, text in mock.visible(chat)] for chat in chats] == [[answer]] * 90


async def test_clients_own_their_runs_on_every_replica(
    tmp_path: Path, redis_url: str, client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients through three replicas: each uses the same run id without conflict; neither reads, feeds nor
    ends the other's run, whichever replica it asks (the owner proxy maps each caller's run id to its own run)."""
    monkeypatch.setenv("ALICE_INGEST", "alice-replica-token-0123")
    monkeypatch.setenv("MALLORY_INGEST", "mallory-replica-token-3210")
    clients = '[clients.alice]\ntoken_env = "ALICE_INGEST"\n\n[clients.mallory]\ntoken_env = "MALLORY_INGEST"\n'
    target = DRY_RUN["telegram"].target()
    alice = {"Authorization": "Bearer alice-replica-token-0123"}
    mallory = {"Authorization": "bearer mallory-replica-token-3210"}
    async with (
        _cluster(tmp_path, redis_url, client, "final", extra=clients) as (mock, replicas),
        httpx.AsyncClient(timeout=60) as http,
    ):
        start = {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0}
        other = {**start, "target": {**target.model_dump(), "chat_id": 424242}}
        posted = await post_as_agent(
            http, replicas.url(0) + "/v1/runs/same/events", _ndjson("same", start), headers=alice
        )
        assert posted.status_code == 200, posted.text
        claimed = await post_as_agent(
            http, replicas.url(1) + "/v1/runs/same/events", _ndjson("same", other), headers=mallory
        )
        assert claimed.status_code == 200, claimed.text  # mallory's "same" is another run
        evil = {"kind": "end", "status": "ok", "final_text": "EVIL", "seq": 1}
        for i in range(3):
            ghost = await http.get(replicas.url(i) + "/v1/runs/nobody", headers=mallory)
            assert ghost.status_code == 404, ghost.text
        end = {"kind": "end", "status": "ok", "final_text": "alice's answer", "seq": 1}
        assert (
            await post_as_agent(http, replicas.url(2) + "/v1/runs/same/events", _ndjson("same", end), headers=alice)
        ).is_success
        assert (
            await post_as_agent(http, replicas.url(2) + "/v1/runs/same/events", _ndjson("same", evil), headers=mallory)
        ).is_success
        for i in range(3):
            report = await http.get(replicas.url(i) + "/v1/runs/same", params={"wait_s": 30}, headers=alice)
            assert report.status_code == 200 and report.json()["status"] == "delivered", (i, report.text)
            assert report.json()["run"] == "same"
        assert [text for _, text in mock.visible(target.chat_id)] == ["alice's answer"]
        theirs = await http.get(replicas.url(0) + "/v1/runs/same", params={"wait_s": 30}, headers=mallory)
        assert theirs.json()["status"] == "delivered", theirs.text
        assert [text for _, text in mock.visible(424242)] == ["EVIL"]  # mallory's end ended mallory's own run
        mine = (await http.get(replicas.url(1) + "/v1/runs", params={"all": 1}, headers=mallory)).json()["runs"]
        assert all(row["run"] == "same" for row in mine)
