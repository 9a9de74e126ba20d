"""Redis settings never show a password and never drop what they were given (hostile findings on the Sentinel
settings: a mistyped host-less redis_url printed as it was; pydantic's input_value in a settings error; a port or
options in a Sentinel redis_url silently ignored)."""

from __future__ import annotations

import pytest

from streamrelay.adapters.redis.client import connect_sentinel, redacted
from streamrelay.config.settings import ServiceSettings
from streamrelay.core.errors import ConfigError

SECRET = "hunter2-secret"


@pytest.mark.parametrize("url", [f"redis//:{SECRET}@/0", f"redis:/:{SECRET}@/0", SECRET])
def test_a_malformed_sentinel_redis_url_is_never_shown_with_its_password(url: str) -> None:
    assert SECRET not in redacted(url)
    with pytest.raises(ConfigError) as raised:
        connect_sentinel([("127.0.0.1", 1)], "m", url=url)
    assert SECRET not in str(raised.value)


def test_a_sentinel_settings_error_never_shows_the_password() -> None:
    with pytest.raises(ValueError) as raised:
        ServiceSettings.model_validate(
            {"backend": "redis", "redis_sentinels": ["a:1"], "redis_url": f"redis://:{SECRET}@/0"}
        )
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize("url", [f"redis://:{SECRET}@:6380/0", f"redis://:{SECRET}@/0?ssl=true"])
def test_a_sentinel_redis_url_with_parts_that_are_ignored_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        ServiceSettings.model_validate(
            {"backend": "redis", "redis_sentinels": ["a:1"], "redis_sentinel_master": "m", "redis_url": url}
        )
