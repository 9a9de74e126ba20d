"""The example bots, run as a person would (issue 25): ``streamrelay run -- python examples/<bot>.py`` against the mock
platform and the fake model endpoint (examples/fake_model.py streaming a recording from tests/streams). A person's
message reaches the bot the way the platform delivers it (Telegram: getUpdates, aiogram's polling; Slack: a signed
Events API request to the Bolt app), the bot calls the real ``anthropic`` SDK with ``stream=True`` and forwards the
raw stream to the sidecar through ``RelayClient``; the chat ends showing the recorded answer once, and SIGTERM to
``run`` reaches the bot, which exits 0, and ``run`` exits with its code after draining the sidecar."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.telegram.render import render
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram
from tests.contention import wait_scale
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "streams" / "anthropic" / "thinking-then-text.jsonl"
INGEST_TOKEN = "example-bots-ingest-token"
BOT_TOKEN = "123456789:AAE-example_Bots-Token_0123456789ab"


def recorded_answer(path: Path) -> str:
    """The answer text of an Anthropic recording (its text deltas; the thinking left out)."""
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    deltas = [e["delta"] for e in events if e.get("type") == "content_block_delta"]
    return "".join(d["text"] for d in deltas if d.get("type") == "text_delta")


@contextmanager
def process(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def until(check: Callable[[], Awaitable[Any]], what: str, log: Path, procs: list[subprocess.Popen[bytes]]) -> Any:
    """``check()``'s first true answer (the mocks run in this event loop: the wait never blocks it); 120 s on an idle
    machine, stretched by the load (the Telegram bot's first poll waits for two processes importing aiogram)."""
    deadline = time.monotonic() + 120 * wait_scale()
    while time.monotonic() < deadline:
        for proc in procs:
            assert proc.poll() is None, f"{proc.args!r} exited while waiting for {what}:\n{log.read_text()[-4000:]}"
        if found := await check():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


def polled(mock: MockTelegram) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(c.method == "getUpdates" for c in mock.calls)

    return check


def fake_model(log: Path) -> tuple[list[str], str]:
    port = free_port()
    argv = [sys.executable, "examples/fake_model.py", str(RECORDING), "--port", str(port)]
    return argv, f"http://127.0.0.1:{port}"


def config(tmp: Path, port: int, channel: str) -> Path:
    path = tmp / "channels.toml"
    service = f'[service]\nport = {port}\nledger = "{tmp / "ledger.sqlite3"}"\nactions = ""\nlog_format = "json"\n'
    path.write_text(service + "\n" + channel)
    return path


async def report(port: int, run: str) -> dict[str, Any] | None:
    """The run's report once it is done (None before, or while the sidecar does not answer)."""
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(
                f"http://127.0.0.1:{port}/v1/runs/{run}",
                params={"wait_s": 1},
                headers={"Authorization": f"Bearer {INGEST_TOKEN}"},
            )
    except httpx.TransportError:
        return None
    body: dict[str, Any] = answer.json()
    return body if answer.status_code == 200 and body.get("done") else None


async def test_the_telegram_bot_answers_a_message_through_the_sidecar(tmp_path: Path) -> None:
    mock = MockTelegram()
    api = await mock.start()
    log, port = tmp_path / "bot.log", free_port()
    channel = (
        f'[channels.telegram]\nplatform = "telegram"\ntoken_env = "TELEGRAM_BOT_TOKEN"\napi_base = "{api}"\n'
        "throttle_ms = 100\ntyping = false\n"
    )
    model_argv, model_url = fake_model(log)
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": INGEST_TOKEN,
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "STREAMRELAY_CHANNELS__TELEGRAM__API_BASE": api,  # the bot's aiogram reads it too
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-fake-model",
    }
    run_argv = [sys.executable, "-m", "streamrelay", "run", "--config", str(config(tmp_path, port, channel)), "--port"]
    run_argv += [str(port), "--", sys.executable, "examples/telegram_bot.py"]
    try:
        with process(model_argv, env, log) as model, process(run_argv, env, log) as run:
            await until(polled(mock), "the bot's first poll", log, [model, run])
            asked = mock.user_message(42, "What is 25 times 37?")
            done = await until(lambda: report(port, f"tg-42-{asked}"), "the run's report", log, [model, run])
            assert done["status"] == "delivered", done
            expected = render(recorded_answer(RECORDING), TextFormat.MARKDOWN).text
            assert [text for _, text in mock.visible(42)] == [expected]  # the recorded answer, once
            run.send_signal(signal.SIGTERM)  # passed on to the bot: aiogram stops polling and exits 0
            assert await asyncio.to_thread(run.wait, 60) == 0, log.read_text()[-4000:]
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        events = [line["event"] for line in lines]
        assert any(e.startswith("SIGTERM: passed on to the bot") for e in events), events
        assert any(e.startswith("bot exited with 0") for e in events) and events[-1] == "stopped", events
        assert INGEST_TOKEN not in log.read_text() and BOT_TOKEN not in log.read_text()
    finally:
        await mock.stop()


async def listening(url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            await http.get(url)
    except httpx.TransportError:
        return False
    return True


async def test_the_slack_bot_answers_a_message_through_the_sidecar(tmp_path: Path) -> None:
    dry = DRY_RUN["slack"]
    mock = MockSlack()
    api = await mock.start()
    log, port, bot_port = tmp_path / "bot.log", free_port(), free_port()
    secret = "example-bots-signing-secret"
    mock.events_to(f"http://127.0.0.1:{bot_port}/slack/events", secret)  # the app's Request URL
    channel = (
        f'[channels.slack]\nplatform = "slack"\ntoken_env = "SLACK_BOT_TOKEN"\napi_base = "{api}"\n'
        "throttle_ms = 100\ntyping = false\n"
    )
    model_argv, model_url = fake_model(log)
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": INGEST_TOKEN,
        "SLACK_BOT_TOKEN": dry.token,
        "SLACK_SIGNING_SECRET": secret,
        "PORT": str(bot_port),
        "STREAMRELAY_CHANNELS__SLACK__API_BASE": api,  # the bot's Bolt client reads it too
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-fake-model",
    }
    run_argv = [sys.executable, "-m", "streamrelay", "run", "--config", str(config(tmp_path, port, channel)), "--port"]
    run_argv += [str(port), "--", sys.executable, "examples/slack_bot.py"]
    chat = dry.group
    try:
        with process(model_argv, env, log) as model, process(run_argv, env, log) as run:
            bot = f"http://127.0.0.1:{bot_port}/slack/events"
            await until(lambda: listening(bot), "the Bolt app to listen", log, [model, run])
            asked = mock.user_message(chat, "What is 25 times 37?")
            done = await until(lambda: report(port, f"slack-{chat}-{asked}"), "the run's report", log, [model, run])
            assert done["status"] == "delivered", done
            assert mock.events is not None and mock.events.answers == [200]  # Bolt checked the signature
            expected = recorded_answer(RECORDING)  # sent as markdown_text: Slack renders it
            assert [text for _, text in mock.visible(chat)] == [expected]  # the recorded answer, once
            run.send_signal(signal.SIGTERM)  # passed on to the bot: Bolt's aiohttp server stops, exit 0
            assert await asyncio.to_thread(run.wait, 60) == 0, log.read_text()[-4000:]
        assert INGEST_TOKEN not in log.read_text() and dry.token not in log.read_text()
    finally:
        await mock.stop()


def test_run_with_a_configuration_error_exits_2_and_never_starts_the_bot(tmp_path: Path) -> None:
    marker = tmp_path / "bot-started"
    channel = '[channels.telegram]\nplatform = "telegram"\ntoken_env = "EXAMPLE_BOTS_UNSET_TOKEN"\n'
    path = config(tmp_path, free_port(), channel)
    env = {k: v for k, v in os.environ.items() if k != "EXAMPLE_BOTS_UNSET_TOKEN"}
    bot = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    done = subprocess.run(
        [sys.executable, "-m", "streamrelay", "run", "--config", str(path), "--", *bot],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120 * wait_scale(),
    )
    assert done.returncode == 2 and "EXAMPLE_BOTS_UNSET_TOKEN" in done.stderr, done.stderr
    assert not marker.exists()
