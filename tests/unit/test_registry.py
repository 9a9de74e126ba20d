"""The platform registry (:mod:`adapters.registry`): one registration per platform, read by settings, the service,
the SDK loader, the dry runs and the mock command."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.platform_loading import SDK_MODULES
from streamrelay.config.platforms import NATIVE_PLATFORMS, PLATFORMS, TOKEN_PLATFORMS
from streamrelay.config.settings import load_settings
from streamrelay.core.errors import ConfigError
from streamrelay.core.events import DeliveryMode


def test_every_list_of_platforms_is_read_from_the_registry() -> None:
    assert list(REGISTRY) == ["telegram", "slack", "discord", "matrix", "whatsapp", "teams", "web"]
    assert {name: spec for name, spec in PLATFORMS.items()} == {n: p.spec for n, p in REGISTRY.items()}
    assert list(DRY_RUN) == [
        "telegram",
        "slack",
        "discord",
        "matrix",
        "whatsapp",
        "teams",
    ]  # the web channel has no mock: the sidecar is it
    assert SDK_MODULES == {
        "telegram": "streamrelay.adapters.telegram.adapter",
        "slack": "streamrelay.adapters.slack.adapter",
        "discord": "streamrelay.adapters.discord.adapter",
        "matrix": "streamrelay.adapters.matrix.adapter",
        "whatsapp": "streamrelay.adapters.whatsapp.adapter",
        "teams": "streamrelay.adapters.teams.adapter",
    }
    assert NATIVE_PLATFORMS == ("telegram", "slack", "teams")
    assert TOKEN_PLATFORMS == ("telegram", "slack", "discord", "matrix", "whatsapp", "teams")


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_registration_names_modules_that_exist(name: str) -> None:
    platform = REGISTRY[name]
    assert platform.name == name
    assert importlib.import_module(f"streamrelay.adapters.{name}").PLATFORM is platform  # the package exposes it
    if platform.sdk_module is not None:
        assert importlib.util.find_spec(platform.sdk_module) is not None
    if platform.dry_run is not None:
        module, _, cls = platform.dry_run.mock.partition(":")
        assert hasattr(importlib.import_module(module), cls)
        assert hasattr(importlib.import_module(module), "serve_forever")
    for sourced in platform.spec.budgets.values():
        assert sourced.source.startswith("https://")
    assert platform.spec.limit_source.startswith("https://")


def test_a_campaign_gets_its_platforms_mock_facts_from_the_registry() -> None:
    from streamrelay.app.chaos.plan import CREATE, EDIT, PLATFORMS, chat_id
    from streamrelay.app.chaos.procs import API_PREFIX, TOKEN_ENV

    assert PLATFORMS == ("telegram", "slack", "discord", "matrix", "whatsapp", "teams")
    assert CREATE == {
        "telegram": "sendMessage",
        "slack": "chat.postMessage",
        "discord": "createMessage",
        "matrix": "send",
        "whatsapp": "messages",
        "teams": "sendToConversation",
    }
    assert EDIT == {
        "telegram": "editMessageText",
        "slack": "chat.update",
        "discord": "editMessage",
        "matrix": "send",
        "whatsapp": "messages",
        "teams": "updateActivity",
    }
    assert API_PREFIX == {
        "telegram": "",
        "slack": "/api/",
        "discord": "/api/v10",
        "matrix": "",
        "whatsapp": "",
        "teams": "",
    }
    assert TOKEN_ENV["slack"] == "CHAOS_SLACK_TOKEN"
    assert [chat_id("telegram", i) for i in (0, 1)] == [7_000_000, -1_007_000_000_001]  # private, supergroup
    for platform in PLATFORMS:
        assert len({chat_id(platform, i) for i in range(50)}) == 50  # a conversation per run


def test_the_web_adapter_is_built_from_its_registration() -> None:
    adapter = REGISTRY["web"].build(SecretStr(""), None, 1.0, 1000)
    assert type(adapter).__name__ == "WebAdapter"


def test_a_telegram_bot_id_is_the_digits_before_the_colon_never_the_secret() -> None:
    assert REGISTRY["telegram"].bot_id("123456:SECRET-part") == "123456"
    assert REGISTRY["slack"].bot_id("xoxb-1-2-SECRET") is None
    assert REGISTRY["whatsapp"].bot_id("106540352242922:EAASECRET") == "106540352242922"  # the phone number id
    assert REGISTRY["whatsapp"].bot_id("EAASECRET") is None
    app = "11111111-2222-4333-8444-555555555555"
    assert REGISTRY["teams"].bot_id(f"{app}:Xy7Q~SECRET") == app  # the Microsoft App ID
    assert REGISTRY["teams"].bot_id("SECRET") is None


def test_an_unregistered_platform_is_refused_naming_the_registered_ones(tmp_path: Path) -> None:
    path = tmp_path / "channels.toml"
    path.write_text('[channels.i]\nplatform = "irc"\n')
    with pytest.raises(
        ConfigError,
        match=r"channels\.i\.platform.*Input should be 'telegram', 'slack', 'discord', 'matrix', 'whatsapp', "
        r"'teams' or",
    ):
        load_settings(path)


def test_a_campaign_channel_takes_its_platforms_settings_from_the_registration(tmp_path: Path) -> None:
    from streamrelay.app.chaos.plan import Options
    from streamrelay.app.chaos.procs import write_config

    path = tmp_path / "campaign.toml"
    options = Options(runs=1, seed=1, platforms=("telegram", "discord", "matrix", "whatsapp"), modes=("preview",))
    mocks = {"telegram": 1, "discord": 2, "matrix": 3, "whatsapp": 4}
    write_config(path, options, 8787, mocks, tmp_path / "ledger.sqlite3")
    settings = load_settings(path)
    assert settings.channels["telegram"].format == "plain"  # DryRunFacts.campaign
    assert settings.channels["discord"].throttle_ms == 1200
    assert settings.channels["matrix"].format == "markdown"  # the default
    [budget] = [b.budget for b in settings.channels["matrix"].budgets()]  # campaign_rates over rc_message
    assert (budget.per_s, budget.burst) == (20.0, 10)
    from streamrelay.app.chaos.services import _limits_flag

    # and its mock homeserver, the exempted bot's, answers no rc_message 429 of its own (a mock at Synapse's default
    # 0.2/s under a sidecar paced at 20/s: 456 429s and 29 of 60 runs unfinished in a seed-7 campaign)
    assert _limits_flag("matrix") == ["--no-rate-limits"]
    assert _limits_flag("telegram") == []
    whatsapp = settings.channels["whatsapp"]  # no edits: block replies, plain, the pair limit raised
    assert (whatsapp.delivery, whatsapp.format) == ("block", "plain")
    assert {b.budget.name: b.budget.per_s for b in whatsapp.budgets()}["pair"] == 20.0


def test_a_platform_without_edits_runs_preview_and_progress_as_block_replies_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "channels.toml"
    path.write_text('[channels.w]\nplatform = "whatsapp"\ndelivery = "preview"\n')
    channel = load_settings(path, include_disabled=True).channels["w"]
    assert channel.policy("w").delivery == "block" and channel.policy("w").edits is False
    assert "cannot edit" in (channel.delivery_note() or "")
    assert channel.policy("w").delivery_for(DeliveryMode.PROGRESS) is DeliveryMode.BLOCK  # a run's mode too
    assert channel.policy("w").delivery_for(DeliveryMode.FINAL) is DeliveryMode.FINAL
    # a native run's place here (chaos-29-00054: a Slack native run's WhatsApp place streamed as a preview, whose
    # edits WhatsApp refuses: 2,444 characters never shown)
    assert channel.policy("w").delivery_for(DeliveryMode.NATIVE) is DeliveryMode.BLOCK
    path.write_text('[channels.w]\nplatform = "whatsapp"\nstop_button = true\ndelivery = "block"\n')
    with pytest.raises(ConfigError, match="stop_button: whatsapp cannot edit a sent message"):
        load_settings(path, include_disabled=True)
