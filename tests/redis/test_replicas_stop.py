"""Stop behind a load balancer (issue 15, part 3, on replicas): a bot forwards a Stop press to whichever replica it
reaches. The press names the run only by its Stop control's id (``stop:<16 hex>``, a hash of the run's key), which
any replica resolves from Redis (recorded with the run's index entry at ``run.start``); the owner proxy forwards it
to the run's owner, and the run ends ``cancelled``. The agent's later lines get 409 on every replica."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer

from examples.stop_bot import stop_router
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.core.run.stop import STOPPED_ERROR
from streamrelay.core.run.stop_controls import control_id
from streamrelay.mocks.telegram.buttons import PRESSER_ID
from tests.redis.test_failover import TOKEN, _cluster, _owner, _until, post_as_agent

pytestmark = pytest.mark.timeout(180)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _ndjson(run: str, *lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


async def test_a_stop_press_forwarded_to_a_replica_that_does_not_own_the_run_stops_it(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    dry = DRY_RUN["telegram"]
    target = dry.target()
    chat = int(target.chat_id)
    async with (
        _cluster(tmp_path, redis_url, client, "preview", extra="stop_button = true") as (mock, replicas),
        httpx.AsyncClient(headers=AUTH, timeout=30) as http,
    ):
        run = "stop-anywhere-1"
        start = {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0}
        text = {"kind": "text", "mode": "delta", "text": "The first half", "seq": 1}
        posted = await post_as_agent(http, replicas.url(0) + f"/v1/runs/{run}/events", _ndjson(run, start, text))
        assert posted.status_code == 200, posted.text
        owner = await _owner(client, replicas, run)
        others = [i for i in range(3) if i != owner]

        await _until(lambda: bool(mock.visible(chat)), 30, "the preview")
        (message_id, _), *_ = mock.visible(chat)

        await _until(lambda: mock.inline_keyboard(chat, int(message_id)) is not None, 30, "the Stop button")
        button = mock.inline_keyboard(chat, int(message_id))[0][0]
        assert button["callback_data"] == control_id(run)

        async with httpx.AsyncClient() as control:
            pressed = await control.post(
                f"{mock.control_url}/press", json={"chat_id": chat, "message_id": int(message_id)}
            )
        assert pressed.status_code == 200, pressed.text
        bot = Bot(dry.token, session=AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url)))
        dispatcher = Dispatcher()
        dispatcher.include_router(stop_router(replicas.url(others[0]), TOKEN))  # the load balancer's pick
        try:
            await dispatcher.feed_raw_update(bot, pressed.json())
        finally:
            await bot.session.close()
        answered = [c for c in mock.calls if c.method == "answerCallbackQuery"]
        assert [(c.ok, c.text) for c in answered] == [(True, "Stopped.")], answered  # the forward answered 200

        report = await http.get(replicas.url(others[1]) + f"/v1/runs/{run}", params={"wait_s": 30})
        assert report.status_code == 200, report.text
        assert report.json()["end_status"] == "cancelled", report.text
        assert f"stopped by the reader (telegram:user:{PRESSER_ID}): pressed Stop" in report.json()["errors"]
        for i in range(3):  # the agent's later lines: refused on every replica, never accepted and dropped
            late = {"kind": "text", "mode": "delta", "text": "!", "seq": 2 + i}
            answer = await post_as_agent(http, replicas.url(i) + f"/v1/runs/{run}/events", _ndjson(run, late))
            assert answer.status_code == 409 and STOPPED_ERROR in answer.text, (i, answer.text)
