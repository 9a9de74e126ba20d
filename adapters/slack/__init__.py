"""Slack channel adapter (slack-sdk): :class:`SlackAdapter`."""

from adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter"]
