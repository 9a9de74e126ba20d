"""Replicas do not apply ``text_retention_hours`` (the Redis ledger cannot expire text yet, docs/retention.md): a
replica says so at start, naming the channels that set it, rather than keeping their text silently."""

from __future__ import annotations

import logging

import pytest

from streamrelay.app.replicas.serving import warn_retention
from streamrelay.config.settings import ChannelSettings, Settings


def _settings(**retention: float) -> Settings:
    common = {"platform": "telegram", "api_base": "http://127.0.0.1:9", "delivery": "block"}
    channels = {"chat": ChannelSettings.model_validate(common)}
    for name, hours in retention.items():
        channels[name] = ChannelSettings.model_validate({**common, "text_retention_hours": hours})
    return Settings(channels=channels)


def test_a_replica_warns_that_it_keeps_text_a_channel_wants_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamrelay"):
        assert warn_retention(_settings(brief=1, short=24)) == ["brief", "short"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "brief, short" in warned[0] and "DELETE /v1/runs/{run}" in warned[0], warned


def test_no_warning_without_retention(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamrelay"):
        assert warn_retention(_settings()) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
