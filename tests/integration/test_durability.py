"""Durable runs, as an operator meets them: `streamrelay serve` as its own process, kill -9 while a send is in
flight, a restart on the same journal and ledger, and the run finishes by itself (its agent never re-sends):
the chat shows the final once, and the report tells the truth about what could not be settled.

The restart runs in the test's own process (:func:`_serve_here`: `serve`'s start-up from its settings on, on the same
files and port): what is killed -9 is a process, and what resumes reads only what that process left on disk. A
second `serve` process cost 5-6 CPU-seconds more each, most of them importing aiogram (issue 25, item 7)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Protocol
from unittest.mock import patch

import httpx
import pytest

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.serving import StopSignals, _serve_configured
from streamrelay.config.settings import load_settings
from streamrelay.mocks.common import MockPlatform
from tests.contention import wait_scale
from tests.ports import free_port as _free_port
from tests.preloaded import Started, streamrelay_process

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "durability-test-token"
ANSWER = (
    "Your refund of 49.99 EUR for order A-1029 was approved today.\n\n"
    "It reaches your card within 14 days; you will get an email when it is sent."
)
FIRST_SEND = {
    "telegram": "sendMessage",
    "slack": "chat.postMessage",
    "discord": "createMessage",
    "teams": "sendToConversation",
}


def _config(tmp: Path, platform: str, api_base: str, port: int, **channel: Any) -> Path:
    values = {
        "platform": platform,
        "token_env": "DURABILITY_BOT_TOKEN",
        "api_base": api_base,
        "delivery": "preview",
        "throttle_ms": 200,
        "send_timeout_ms": 20_000,  # the hung send is still in flight when the process is killed
        "typing": False,
        **channel,
    }
    lines = [
        "[service]",
        f"port = {port}",
        f'ledger = "{tmp / "ledger.sqlite3"}"',
        "run_idle_timeout_s = 4",
        'actions = ""',
        "",
        "[channels.chat]",
        *(f"{k} = {json.dumps(v)}" for k, v in values.items()),
    ]
    path = tmp / "channels.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def _serve(config: Path, bot_token: str, log: Path) -> Iterator[Started]:
    """``serve --config config`` as a process (forked from the worker's zygote: tests/preloaded.py), its output
    appended to ``log``; killed at the exit if still running."""
    env = {**os.environ, "STREAMRELAY_TOKEN": TOKEN, "DURABILITY_BOT_TOKEN": bot_token, "NO_COLOR": "1"}
    proc = streamrelay_process(["serve", "--config", str(config)], env, log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def _until(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check() if asyncio.iscoroutinefunction(check) else check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Serving(Protocol):
    """A started sidecar: ``poll()`` is None while it runs (a process, or :class:`ServingHere`)."""

    def poll(self) -> int | None: ...


class ServingHere:
    """`streamrelay serve` running in this process (:func:`_serve_here`)."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def poll(self) -> int | None:
        """None while it runs; else 0 (stopped) or 1 (raised: the error is in the log's place, ``error``)."""
        if not self.task.done():
            return None
        return 1 if self.task.cancelled() or self.task.exception() is not None else 0

    @property
    def error(self) -> str:
        return repr(self.task.exception()) if self.task.done() and not self.task.cancelled() else ""


@asynccontextmanager
async def _serve_here(config: Path, bot_token: str) -> AsyncIterator[ServingHere]:
    """`serve --config config` in this process, as :func:`_serve` starts it as a process (the same tokens), from its
    settings on (:func:`app.serving._serve_configured`: the journal and ledger opened, runs resumed, channels built,
    the listener on the config's port); its logging is the test's. Stopped as SIGTERM twice would (no drain)."""
    with patch.dict(os.environ, {"STREAMRELAY_TOKEN": TOKEN, "DURABILITY_BOT_TOKEN": bot_token}):
        settings = load_settings(config)
        clients = [(limits, token.get_secret_value()) for limits, token in settings.client_tokens()]
        tokens = {name: channel.token(name) for name, channel in settings.channels.items()}
    signals = StopSignals()
    task = asyncio.create_task(
        _serve_configured(settings, clients, None, tokens, None, None, None, signals), name="serve-here"
    )
    try:
        yield ServingHere(task)
    finally:
        signals.asked.set()
        signals.forced.set()
        async with asyncio.timeout(30 * wait_scale()):
            await asyncio.gather(task, return_exceptions=True)
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def _ready(client: httpx.AsyncClient, proc: Serving, log: Path) -> None:
    async def up() -> bool:
        if proc.poll() is not None:
            why = proc.error if isinstance(proc, ServingHere) else log.read_text()[-2000:]
            raise AssertionError(f"the sidecar exited: {why}")
        try:
            return (await client.get("/readyz")).status_code == 200  # listening, and the journal resumed
        except httpx.TransportError:
            return False

    await _until(up, 60 * wait_scale(), "the sidecar to listen")  # a hang guard, scaled as the timeouts are


def _events(run: str, target: dict[str, Any]) -> bytes:
    lines: list[dict[str, Any]] = [{"kind": "run.start", "channel": "chat", "target": target, "seq": 0}]
    pieces = [ANSWER[i : i + 12] for i in range(0, len(ANSWER), 12)]
    lines += [{"kind": "text", "mode": "delta", "text": p, "seq": i + 1} for i, p in enumerate(pieces)]
    lines.append({"kind": "end", "status": "ok", "seq": len(pieces) + 1})
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


@asynccontextmanager
async def _mock(platform: str) -> AsyncIterator[MockPlatform]:
    mock = DRY_RUN[platform].make_mock(False)
    await mock.start()
    try:
        yield mock
    finally:
        await mock.stop()


async def _killed_mid_send_then_resumed(
    tmp_path: Path, platform: str, *, split: bool = False, group: bool = False, **channel: Any
) -> tuple[list[str], dict[str, Any]]:
    """A run whose first send is stored by the platform and then hangs; the sidecar is killed -9 with that send in
    flight and restarted; the agent never comes back. ``split``: the first send carries the first words only (the
    rest of the run arrives while it hangs); ``group``: in the dry run's group conversation. Returns what the chat
    shows and the report."""
    dry = DRY_RUN[platform]
    target = dry.target(group=group)
    async with _mock(platform) as mock:
        mock.add_fault(FIRST_SEND[platform], 1, "timeout_after_commit")
        port = _free_port()
        config = _config(tmp_path, platform, mock.base_url, port, **channel)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                lines = _events("r1", target.model_dump()).splitlines(keepends=True)
                head, tail = (lines[:3], lines[3:]) if split else (lines, [])
                answer = await client.post("/v1/runs/r1/events", content=b"".join(head))
                assert answer.status_code == 200, answer.text
                await _until(lambda: len(mock.visible(target.chat_id)) == 1, 20, "the first send to be stored")
                if tail:
                    assert (await client.post("/v1/runs/r1/events", content=b"".join(tail))).status_code == 200
                first.send_signal(signal.SIGKILL)  # the send is in flight: an intent without an outcome
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
                again = await client.post("/v1/runs/r1/events", content=_events("r1", target.model_dump()))
                assert again.status_code == 200 and again.json()["accepted"] == 0, again.text  # dropped, never 409
        return [text for _, text in mock.visible(target.chat_id)], report


@pytest.mark.timeout(180)
async def test_telegram_shared_bot_the_final_still_arrives_and_the_possible_duplicate_is_reported(
    tmp_path: Path,
) -> None:
    chat, report = await _killed_mid_send_then_resumed(tmp_path, "telegram")
    # the hung send carried the whole answer and was stored; the process died with no answer of it, and a shared
    # token cannot tell: it is sent again rather than risk a missing answer, and the report says so
    assert chat == [ANSWER, ANSWER]
    assert report["done"] and report["status"] == "partial"
    assert (report["uncertain"], report["confirmed"]) == (1, 1)


@pytest.mark.timeout(180)
async def test_telegram_shared_bot_an_unsettled_first_preview_is_reported_and_the_answer_goes_on_whole(
    tmp_path: Path,
) -> None:
    chat, report = await _killed_mid_send_then_resumed(tmp_path, "telegram", split=True)
    assert len(chat) == 2 and chat[1] == ANSWER  # the first words (may show twice: reported), the whole answer
    assert ANSWER.startswith(chat[0]) and len(chat[0]) < len(ANSWER)
    assert report["done"] and report["status"] == "partial"
    assert (report["uncertain"], report["confirmed"]) == (1, 1)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("split", [False, True])
async def test_telegram_exclusive_bot_a_hung_first_preview_is_found_and_edited(tmp_path: Path, split: bool) -> None:
    chat, report = await _killed_mid_send_then_resumed(tmp_path, "telegram", split=split, exclusive_bot=True)
    assert chat == [ANSWER]
    assert report["done"] and report["status"] == "delivered" and report["uncertain"] == 0


@pytest.mark.timeout(180)
@pytest.mark.parametrize("platform", ["discord", "slack"])
@pytest.mark.parametrize("split", [False, True])
async def test_a_send_in_flight_at_a_kill_is_settled_by_asking_the_platform(
    tmp_path: Path, platform: str, split: bool
) -> None:
    chat, report = await _killed_mid_send_then_resumed(tmp_path, platform, split=split)
    assert chat == [ANSWER]
    assert report["done"] and report["status"] == "delivered" and report["uncertain"] == 0


@pytest.mark.timeout(180)
async def test_teams_a_send_in_flight_at_a_kill_is_settled_through_graph(tmp_path: Path) -> None:
    # a Teams channel (the dry run's team channel) that settles through Microsoft Graph: after the restart the
    # conversation is read back, the stored message found and grown, never sent again (adapters/teams/graph.py)
    graph: dict[str, Any] = {
        "settle_with_graph": True,
        "graph_tenant": "00000000-0000-4000-8000-00000000a7e1",
        "graph_team": "00000000-0000-4000-8000-0000000000ea",  # the team of the dry run's channel
        "settle_window_ms": 0,
    }
    chat, report = await _killed_mid_send_then_resumed(tmp_path, "teams", group=True, **graph)
    assert chat == [ANSWER]
    assert report["done"] and report["status"] == "delivered" and report["uncertain"] == 0


@pytest.mark.timeout(180)
async def test_a_run_whose_agent_never_returns_is_closed_with_what_it_has_and_a_notice(tmp_path: Path) -> None:
    dry = DRY_RUN["telegram"]
    target = dry.target()
    async with _mock("telegram") as mock:
        port = _free_port()
        config = _config(tmp_path, "telegram", mock.base_url, port)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        body = b"".join(line + b"\n" for line in _events("r2", target.model_dump()).splitlines()[:4])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                assert (await client.post("/v1/runs/r2/events", content=body)).status_code == 200
                await _until(lambda: len(mock.visible(target.chat_id)) == 1, 20, "the preview")

                async def preview_acknowledged() -> bool:
                    # killed once the preview's ack is in the ledger: a kill between the platform's answer and its
                    # record is the uncertain case (a shared bot sends again and reports it), tested above
                    return bool((await client.get("/v1/runs/r2")).json().get("confirmed", 0) >= 1)

                await _until(preview_acknowledged, 20, "the preview's ack in the ledger")
                first.send_signal(signal.SIGKILL)
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                report = (await client.get("/v1/runs/r2", params={"wait_s": 60})).json()
    chat = [text for _, text in mock.visible(target.chat_id)]
    assert report["done"] and report["end_status"] == "error" and report["uncertain"] == 0
    assert chat == [ANSWER[:36], "⚠️ The answer stopped here: the agent did not finish it."]
