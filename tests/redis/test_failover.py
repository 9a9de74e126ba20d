"""Replicas on one Redis, as an operator runs them: three `streamrelay serve` processes, a run streamed slowly
through them, and the replica that owns the run's partition killed with -9 (or paused with SIGSTOP past its lease,
then woken): the run finishes on another replica, the chat shows the final once, the report tells the truth, and
the woken replica changes nothing (issue 11)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.config.settings import load_settings
from tests.contention import wait_scale
from tests.ports import free_port as _free_port
from tests.preloaded import Started, streamrelay_process
from tests.redis.replicas import start_replicas

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "replica-failover-token"
PARTITIONS = 4
LEASE_TTL_S = 2.0
ANSWER = " ".join(
    f"Step {i}: the replica that owns this chat may die, and the answer still arrives once." for i in range(8)
)
PIECES = [ANSWER[i : i + 14] for i in range(0, len(ANSWER), 14)]


def _config(tmp: Path, api_base: str, delivery: str, *, bot_per_s: float | None = None, extra: str = "") -> Path:
    path = tmp / "channels.toml"
    path.write_text(
        "\n".join(
            [
                "[service]",
                'backend = "redis"',
                f"partitions = {PARTITIONS}",
                f"lease_ttl_s = {LEASE_TTL_S}",
                "run_idle_timeout_s = 60",
                "drain_s = 1",
                'actions = ""',
                "",
                "[channels.chat]",
                'platform = "telegram"',
                'token_env = "FAILOVER_BOT_TOKEN"',
                f'api_base = "{api_base}"',
                f'delivery = "{delivery}"',
                "throttle_ms = 150",
                "send_timeout_ms = 5000",
                "exclusive_bot = true",
                "typing = false",
                "",
                *(
                    [
                        "[channels.chat.rate.per_bot]",
                        f"per_s = {bot_per_s}",
                        "",
                    ]
                    if bot_per_s is not None
                    else []
                ),
                extra,
            ]
        )
    )
    return path


async def _all_ready(http: httpx.AsyncClient, client: Redis, urls: list[str]) -> bool:
    """Every replica at ``urls`` answers /readyz 200 and every partition's lease is held."""
    for url in urls:
        try:
            if (await http.get(url + "/readyz")).status_code != 200:
                return False
        except httpx.TransportError:
            return False
    return all([await client.get(f"sr:{{p{p}}}:lease") for p in range(PARTITIONS)])


class Replicas:
    """Three replica processes on one Redis, each on its own port."""

    def __init__(self, config: Path, redis_url: str, log: Path) -> None:
        self.ports = [_free_port() for _ in range(3)]
        env = {
            **os.environ,
            "STREAMRELAY_TOKEN": TOKEN,
            "FAILOVER_BOT_TOKEN": DRY_RUN["telegram"].token,
            "STREAMRELAY_SERVICE__REDIS_URL": redis_url,
            "NO_COLOR": "1",
        }
        self.log = log
        self.procs = [  # forked from the worker's zygote (tests/preloaded.py): aiogram imported once per worker
            streamrelay_process(["serve", "--config", str(config), "--port", str(port)], env, log)
            for port in self.ports
        ]

    async def ready(self, http: httpx.AsyncClient, client: Redis) -> bool:
        """Every replica answers /readyz 200 and every partition's lease is held (raises when a replica exited)."""
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                raise AssertionError(f"replica {i} exited: {self.log.read_text()[-3000:]}")
        return await _all_ready(http, client, [self.url(i) for i in range(len(self.procs))])

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        for proc in self.procs:
            proc.wait(10)


async def _until(check: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check() if asyncio.iscoroutinefunction(check) else check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def post_as_agent(
    http: httpx.AsyncClient, url: str, body: bytes, *, headers: dict[str, str] | None = None, tries: int = 60
) -> httpx.Response:
    """POST NDJSON ``body`` to ``url`` as an agent does (RelayClient, the compose example): while the replica pushes
    back for its load (503 "over capacity" with ``Retry-After``: its event loop lags past ``overload_lag_ms`` on a
    machine whose cores other test workers share) the lines from ``pushed_back_from`` (1-based) on are sent again
    after ``Retry-After`` seconds, up to ``tries`` times; returns the first answer that is not such a push-back (or
    the last one). Any other answer comes back as it is, for the test to check."""
    lines = body.splitlines(keepends=True)
    answer = await http.post(url, content=body, headers=headers)
    for _ in range(tries):
        if answer.status_code != 503 or "over capacity" not in answer.text:
            return answer
        first = answer.json().get("pushed_back_from", 1)
        lines = lines[int(first) - 1 :] if isinstance(first, int) and 1 <= first <= len(lines) else lines
        await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
        answer = await http.post(url, content=b"".join(lines), headers=headers)
    return answer


class InProcessReplicas:
    """Three replicas in this process on one Redis, as :class:`Replicas` starts them (the same TOML, bearer tokens and
    bot token), each its own :func:`app.replicas.serving.serve_replica` with its own listener on its own port: they
    reach each other over HTTP (the owner proxy) and share their leases, budgets and counts only through Redis.

    For the tests that kill or pause no replica: a ``streamrelay serve`` process takes about 8 CPU-s to start (5 of
    them importing aiogram, the Telegram SDK), which this process has imported already (issue 25, item 7)."""

    def __init__(self, config: Path, redis_url: str) -> None:
        env = {"STREAMRELAY_TOKEN": TOKEN, "FAILOVER_BOT_TOKEN": DRY_RUN["telegram"].token}
        with patch.dict(os.environ, {**env, "STREAMRELAY_SERVICE__REDIS_URL": redis_url}):  # what serve reads
            settings = load_settings(config)
            self.ports = [_free_port() for _ in range(3)]
            self.stop_asked, self.forced = asyncio.Event(), asyncio.Event()
            self.tasks = start_replicas(settings, self.ports, self.stop_asked, self.forced)  # tokens read here

    async def ready(self, http: httpx.AsyncClient, client: Redis) -> bool:
        """Every replica answers /readyz 200 and every partition's lease is held (raises when a replica stopped)."""
        for i, task in enumerate(self.tasks):
            if task.done():
                task.result()  # its error, if it raised
                raise AssertionError(f"replica {i} stopped")
        return await _all_ready(http, client, [self.url(i) for i in range(len(self.tasks))])

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    async def stop(self) -> None:
        """Stop every replica (no drain: ``forced``), and raise the first error one of them stopped with."""
        self.stop_asked.set()
        self.forced.set()
        async with asyncio.timeout(60 * wait_scale()):
            results = await asyncio.gather(*self.tasks, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]


async def _mock_and_config(tmp: Path, delivery: str, *, rate_limits: bool, extra: str) -> tuple[Any, Path]:
    """A started mock Telegram (``rate_limits``: 429 past the documented limits) and the replicas' TOML for it."""
    mock = DRY_RUN["telegram"].make_mock(rate_limits)
    await mock.start()
    # With the mock's limits on, three replicas and the mock share two cores: calls reach it with up to a few hundred
    # ms of jitter, so the bot's budget keeps that margin (20/s of Telegram's 30/s; the default 25/s keeps 150 ms).
    return mock, _config(tmp, mock.base_url, delivery, bot_per_s=20.0 if rate_limits else None, extra=extra)


async def _until_ready(replicas: Replicas | InProcessReplicas, client: Redis) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:

        async def ready() -> bool:
            return await replicas.ready(http, client)

        await _until(ready, 90 * wait_scale(), "three replicas ready and every partition owned")  # a hang guard


@asynccontextmanager
async def _cluster(
    tmp: Path, redis_url: str, client: Redis, delivery: str, *, rate_limits: bool = False, extra: str = ""
) -> AsyncIterator[tuple[Any, InProcessReplicas]]:
    """Three replicas in this process (:class:`InProcessReplicas`) on ``redis_url`` delivering to a mock Telegram
    (``rate_limits``: 429 past the documented limits), ready and owning every partition; ``extra`` is appended to
    their TOML. A test that kills or pauses a replica takes :func:`_process_cluster`."""
    mock, config = await _mock_and_config(tmp, delivery, rate_limits=rate_limits, extra=extra)
    try:
        replicas = InProcessReplicas(config, redis_url)
        try:
            await _until_ready(replicas, client)
            yield mock, replicas
        finally:
            await replicas.stop()
    finally:
        await mock.stop()


@asynccontextmanager
async def _process_cluster(
    tmp: Path, redis_url: str, client: Redis, delivery: str, *, rate_limits: bool = False, extra: str = ""
) -> AsyncIterator[tuple[Any, Replicas]]:
    """As :func:`_cluster`, the replicas three ``streamrelay serve`` processes (:class:`Replicas`): for the tests that
    kill one with -9 or pause it with SIGSTOP."""
    mock, config = await _mock_and_config(tmp, delivery, rate_limits=rate_limits, extra=extra)
    replicas = Replicas(config, redis_url, tmp / "replicas.log")
    try:
        await _until_ready(replicas, client)
        yield mock, replicas
    finally:
        replicas.stop()
        await mock.stop()


async def _owner(client: Redis, replicas: Replicas | InProcessReplicas, run: str) -> int:
    """Which replica owns ``run``'s partition now (waiting out a hand-over between replicas that just joined)."""
    partition = await client.get(f"sr:run:{run}")
    assert partition is not None
    for _ in range(200):
        lease = await client.get(f"sr:{{p{partition!s}}}:lease")
        if lease is not None:
            url = await client.hget("sr:{replicas}:urls", str(lease).split(":", 1)[1])
            return replicas.ports.index(int(str(url).rsplit(":", 1)[1]))
        await asyncio.sleep(0.05)
    raise AssertionError(f"partition {partition!r} has no owner")


def _line(run: str, obj: dict[str, Any]) -> bytes:
    return (json.dumps({"run": run, **obj}) + "\n").encode()


async def _stream_through_a_failure(
    client: Redis,
    replicas: Replicas,
    mock: Any,
    fail: Callable[[Started], None],
    *,
    block: bool = False,
) -> tuple[int, dict[str, Any]]:
    """Stream the answer slowly into replica 0; a third of the way in, ``fail`` the run's owner; the agent sends
    the rest (and, as a runtime after an error, the whole run again from seq 0) to a replica that is up."""
    target = DRY_RUN["telegram"].target()
    run = "failover-1"
    lines = [_line(run, {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0})]
    lines += [_line(run, {"kind": "text", "mode": "delta", "text": p, "seq": i + 1}) for i, p in enumerate(PIECES)]
    lines.append(_line(run, {"kind": "end", "status": "ok", "seq": len(PIECES) + 1}))
    third = len(lines) // 3
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        for line in lines[:third]:
            assert (await post_as_agent(http, replicas.url(0) + f"/v1/runs/{run}/events", line)).status_code == 200
            await asyncio.sleep(0.05)
        if mock.visible(target.chat_id) == []:  # preview: the first words show before the kill
            await _until(lambda: len(mock.visible(target.chat_id)) >= 1 or block, 30, "the first message")
        await asyncio.sleep(0.5)  # block: the owner holds a third of the answer, not a block of it sent yet
        owner = await _owner(client, replicas, run)
        fail(replicas.procs[owner])
        other = next(i for i in range(3) if i != owner)
        for line in lines[third:]:
            assert (await post_as_agent(http, replicas.url(other) + f"/v1/runs/{run}/events", line)).status_code == 200
            await asyncio.sleep(0.02)
        again = await post_as_agent(http, replicas.url(other) + f"/v1/runs/{run}/events", b"".join(lines))
        assert again.status_code == 200, again.text
        for _ in range(600):  # the partition moved (a read sent to a paused owner would wait for it to wake)
            if await _owner(client, replicas, run) != owner:
                break
            await asyncio.sleep(0.1)
        answer = await http.get(replicas.url(other) + f"/v1/runs/{run}", params={"wait_s": 60}, timeout=90)
        assert answer.status_code == 200, answer.text
        return owner, answer.json()


def _shown_once(mock: Any, chat_id: int | str) -> list[str]:
    texts = [text for _, text in mock.visible(chat_id)]
    joined = "".join("".join(texts).split())
    assert joined == "".join(ANSWER.split()), texts  # whole, in order, nothing twice
    return texts


@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_the_owner_killed_mid_run_the_run_finishes_on_another_replica(
    tmp_path: Path, redis_url: str, client: Redis, delivery: str
) -> None:
    async with _process_cluster(tmp_path, redis_url, client, delivery) as (mock, replicas):
        _owner_index, report = await _stream_through_a_failure(
            client, replicas, mock, lambda p: p.kill(), block=delivery == "block"
        )
        assert report["done"] and report["status"] == "delivered", report
        texts = _shown_once(mock, DRY_RUN["telegram"].target().chat_id)
        if delivery == "preview":
            assert texts == [ANSWER]


async def test_an_owner_paused_past_its_lease_cannot_double_or_roll_back_a_message(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    async with _process_cluster(tmp_path, redis_url, client, "preview") as (mock, replicas):
        owner, report = await _stream_through_a_failure(client, replicas, mock, lambda p: p.send_signal(signal.SIGSTOP))
        assert report["done"] and report["status"] == "delivered", report
        chat_id = DRY_RUN["telegram"].target().chat_id
        assert _shown_once(mock, chat_id) == [ANSWER]
        calls = len(mock.calls)
        replicas.procs[owner].send_signal(signal.SIGCONT)  # it wakes with a run it no longer owns
        await asyncio.sleep(LEASE_TTL_S * 2)
        assert _shown_once(mock, chat_id) == [ANSWER]  # nothing doubled, nothing rolled back
        late = [c for c in mock.calls[calls:] if c.method in ("sendMessage", "editMessageText")]
        assert late == [], late
