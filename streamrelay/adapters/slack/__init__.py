"""Slack channel adapter (slack-sdk): :class:`SlackAdapter`; the platform's registration: :data:`PLATFORM`.

The package imports slack_sdk only when :class:`SlackAdapter` is used: the registry reads :data:`PLATFORM` without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.slack.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.slack.adapter import SlackAdapter


def __getattr__(name: str) -> Any:
    if name == "SlackAdapter":
        from streamrelay.adapters.slack.adapter import SlackAdapter

        return SlackAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "SlackAdapter"]
