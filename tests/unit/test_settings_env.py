"""Environment overrides merge into the TOML's tables (also of disabled channels); paths resolve beside the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streamrelay.config.actions import DEFAULT_ACTIONS
from streamrelay.config.settings import DEFAULT_CONFIG, load_settings
from streamrelay.core.errors import ConfigError


def test_an_override_of_a_channel_the_file_disables_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRELAY_CHANNELS__SLACK__API_BASE", "http://127.0.0.1:8082/api/")
    assert sorted(load_settings(DEFAULT_CONFIG).channels) == ["telegram", "web"]  # still off
    slack = load_settings(DEFAULT_CONFIG, include_disabled=True).channels["slack"]
    assert slack.api_base == "http://127.0.0.1:8082/api/" and slack.platform == "slack" and slack.limit == 4000


def test_a_channel_is_switched_off_and_on_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRELAY_CHANNELS__TELEGRAM__ENABLED", "false")
    monkeypatch.setenv("STREAMRELAY_CHANNELS__SLACK__ENABLED", "true")
    assert sorted(load_settings(DEFAULT_CONFIG).channels) == ["slack", "web"]


def test_an_override_of_a_channel_that_exists_nowhere_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRELAY_CHANNELS__SLAKC__API_BASE", "http://127.0.0.1:8082/api/")
    with pytest.raises(ConfigError) as caught:
        load_settings(DEFAULT_CONFIG)
    message = str(caught.value)
    assert "STREAMRELAY_CHANNELS__SLAKC__API_BASE" in message and "'slakc'" in message
    assert str(DEFAULT_CONFIG) in message and "slack" in message and "Field required" not in message


def test_a_channel_defined_wholly_in_the_environment_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRELAY_CHANNELS__WEB2__PLATFORM", "web")
    assert load_settings(DEFAULT_CONFIG).channels["web2"].platform == "web"


def test_a_relative_ledger_is_beside_the_config_file_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "etc" / "channels.toml"
    config.parent.mkdir()
    shutil.copy(DEFAULT_CONFIG, config)
    monkeypatch.chdir(tmp_path)
    service = load_settings(config).service
    assert service.ledger == str(tmp_path / "etc" / "var" / "streamrelay.sqlite3")
    monkeypatch.setenv("STREAMRELAY_SERVICE__LEDGER", "state/x.sqlite3")
    assert load_settings(config).service.ledger == str(tmp_path / "etc" / "state" / "x.sqlite3")
    monkeypatch.setenv("STREAMRELAY_SERVICE__LEDGER", ":memory:")
    assert load_settings(config).service.ledger == ":memory:"


def test_a_copied_channels_file_keeps_the_shipped_action_catalog_until_one_sits_beside_it(tmp_path: Path) -> None:
    config = tmp_path / "channels.toml"
    shutil.copy(DEFAULT_CONFIG, config)
    assert load_settings(config).service.actions == str(DEFAULT_ACTIONS)
    (tmp_path / "actions.toml").write_text("", encoding="utf-8")
    assert load_settings(config).service.actions == str(tmp_path / "actions.toml")


def test_a_missing_action_catalog_says_where_it_was_looked_for(tmp_path: Path) -> None:
    config = tmp_path / "channels.toml"
    config.write_text('[service]\nactions = "mine.toml"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert str(tmp_path / "mine.toml") in message and 'actions = ""' in message


def test_a_missing_config_file_says_where_it_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_settings("config/channels.toml")
    assert (
        str(caught.value)
        == f"configuration file config/channels.toml not found (in {tmp_path}): pass --config with its path"
    )
