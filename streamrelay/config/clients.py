"""``[clients.NAME]``: callers with their own bearer tokens, channels and limits (:mod:`core.ingest.clients`)."""

from __future__ import annotations

import os

from pydantic import Field, SecretStr

from streamrelay.config.tables import Strict
from streamrelay.core.errors import ConfigError
from streamrelay.core.ingest.clients import ClientLimits


class ClientSettings(Strict):
    """One ``[clients.NAME]`` table: a caller with its own bearer token, its channels and its limits
    (:class:`core.ingest.clients.ClientLimits` documents each limit)."""

    token_env: str = Field(min_length=1)
    """The environment variable holding this client's bearer token."""
    channels: list[str] | None = None
    """The channels its runs may use; unset: every configured channel."""
    max_active_runs: int = Field(default=ClientLimits.max_active_runs, ge=1)
    events_per_s: float = Field(default=ClientLimits.events_per_s, gt=0)
    max_events_per_run: int = Field(default=ClientLimits.max_events_per_run, ge=1)
    max_chars_per_run: int = Field(default=ClientLimits.max_chars_per_run, ge=1)
    max_messages_per_run: int = Field(default=ClientLimits.max_messages_per_run, ge=1)
    max_runs_per_request: int = Field(default=ClientLimits.max_runs_per_request, ge=1)
    seq_window: int = Field(default=ClientLimits.seq_window, ge=1)
    approve_actions: list[str] = Field(default_factory=list, max_length=50)
    """Tool calls of this client's runs a person must approve first, added to each channel's ``approve_actions``
    (action classes and tool names; core/lanes/hold.py); a channel they run on must name who may decide."""

    def limits(self, name: str) -> ClientLimits:
        """The core's view of this client."""
        values = self.model_dump(exclude={"token_env", "channels", "approve_actions"})
        channels = frozenset(self.channels) if self.channels is not None else None
        return ClientLimits(name=name, channels=channels, approve_actions=tuple(self.approve_actions), **values)

    def token(self, name: str) -> SecretStr:
        """The client's bearer token from the environment.

        Raises:
            ConfigError: the variable is not set or empty.
        """
        value = os.environ.get(self.token_env, "")
        if not value:
            raise ConfigError(
                f"clients.{name}: environment variable {self.token_env} is not set; export the client's bearer token "
                "there (e.g. `openssl rand -hex 24`)"
            )
        return SecretStr(value)
