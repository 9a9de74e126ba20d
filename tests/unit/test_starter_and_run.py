"""``streamrelay init``'s starter files and ``streamrelay run``'s pure parts; the mock Telegram's ``getUpdates``.

The whole ``run`` (a sidecar, a real bot, signals, the exit code) is tests/integration/test_example_bots.py."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.cli import app
from streamrelay.app.run_bot import base_url, exit_code
from streamrelay.app.starter import CHANNELS_FILE, ENV_FILE, channels_toml, write_starter
from streamrelay.config.settings import load_settings
from streamrelay.mocks.telegram import MockTelegram

RATE_NUMBERS = re.compile(r"^(per_s|per_min|burst|limit) = ")


def test_every_rate_number_of_the_starter_sits_under_its_documentation_link() -> None:
    lines = channels_toml(["telegram", "slack", "discord"]).splitlines()
    numbers = [i for i, line in enumerate(lines) if RATE_NUMBERS.match(line)]
    assert len(numbers) > 15
    for i in numbers:
        heading = max(j for j, line in enumerate(lines[:i]) if line.startswith("["))
        links = [line for line in lines[heading:i] if line.startswith("#") and "https://" in line]
        assert links, f"{lines[i]!r} in {lines[heading]} has no documentation link above it"


def test_the_starter_loads_as_settings_with_the_platforms_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = write_starter(tmp_path, ["telegram", "slack"])
    assert [p.name for p in written] == [CHANNELS_FILE, ENV_FILE]
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:x")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    settings = load_settings(tmp_path / CHANNELS_FILE)
    assert settings.service.host == "127.0.0.1" and settings.service.ledger == str(tmp_path / "streamrelay.sqlite3")
    for name in ("telegram", "slack"):
        got = {b.budget.name: (b.budget.per_s, b.budget.burst, b.source) for b in settings.channels[name].budgets()}
        spec = REGISTRY[name].spec.budgets
        want = {n: (s.budget.per_s, s.budget.burst, s.source) for n, s in spec.items()}
        assert got.keys() == want.keys()
        for key, (per_s, burst, source) in want.items():
            assert got[key][0] == pytest.approx(per_s) and got[key][1:] == (burst, source)


def test_the_env_template_names_the_variables_without_a_value(tmp_path: Path) -> None:
    write_starter(tmp_path, ["telegram", "slack"])
    assigned = [line for line in (tmp_path / ENV_FILE).read_text().splitlines() if not line.startswith("#")]
    names = {line.split("=", 1)[0] for line in assigned}
    assert {"STREAMRELAY_TOKEN", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY"} <= names
    assert all(line.endswith("=") for line in assigned)  # no value, so no secret


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["init", str(tmp_path), "--platform", "telegram"])
    assert first.exit_code == 0, first.output
    (tmp_path / CHANNELS_FILE).write_text("# mine\n")
    again = runner.invoke(app, ["init", str(tmp_path)])
    assert again.exit_code == 1 and (tmp_path / CHANNELS_FILE).read_text() == "# mine\n"
    forced = runner.invoke(app, ["init", str(tmp_path), "--force", "--platform", "slack"])
    assert forced.exit_code == 0 and "[channels.slack]" in (tmp_path / CHANNELS_FILE).read_text()
    unknown = runner.invoke(app, ["init", str(tmp_path / "other"), "--platform", "irc"])
    assert unknown.exit_code == 1 and not (tmp_path / "other").exists()


def test_the_exit_code_is_the_bots_or_128_plus_its_signal_and_the_url_is_reachable() -> None:
    assert [exit_code(0), exit_code(3), exit_code(-15), exit_code(-2)] == [0, 3, 143, 130]
    assert base_url("127.0.0.1", 8787) == "http://127.0.0.1:8787"
    assert base_url("0.0.0.0", 9) == "http://127.0.0.1:9" and base_url("::", 9) == "http://[::1]:9"


async def test_the_mock_telegram_serves_a_persons_messages_by_get_updates() -> None:
    """offset confirms, limit caps, timeout holds the poll until an update arrives
    (https://core.telegram.org/bots/api#getupdates)."""
    async with MockTelegram() as mock:
        first = mock.user_message(42, "one")
        mock.user_message(42, "two")
        updates = await mock.updates.get_updates({"limit": 1})
        assert [u["message"]["text"] for u in updates] == ["one"] and updates[0]["message"]["message_id"] == first
        both = await mock.updates.get_updates({})
        assert [u["message"]["chat"]["id"] for u in both] == [42, 42]
        after = both[-1]["update_id"] + 1
        waiting = asyncio.create_task(mock.updates.get_updates({"offset": after, "timeout": 30}))
        await asyncio.sleep(0)
        assert not waiting.done()  # confirmed: nothing pending, the poll is held
        mock.user_message(42, "three")
        held = await asyncio.wait_for(waiting, 5)
        assert [u["message"]["text"] for u in held] == ["three"] and held[0]["message"]["from"]["is_bot"] is False
