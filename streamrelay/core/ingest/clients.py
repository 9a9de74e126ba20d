"""Clients: who sends runs to the sidecar, what they may use, and how much.

A client is one caller with its own bearer token (``[clients.NAME]`` in the TOML; with none configured, one client
named :data:`DEFAULT_CLIENT` holds the service token). A run belongs to the client that started it. Run ids are per
client: the core keys a run by :func:`run_key` (``NAME/run``; the default client's keys are its run ids as they
are), so two clients may use the same run id, and one client can neither see, feed, end nor pre-claim another's
run: its request for ``run-1`` names another key, which for it does not exist. A run id may hold no ``/`` and no
control character (:data:`RUN_ID_PATTERN`), so keys never collide.

Limits (:class:`ClientLimits`) are counted per client (active runs, events per second) and per run (events,
characters, messages, the ``seq`` window); each refusal names its setting, ``clients.NAME.<setting>``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_CLIENT = "default"
"""The client of the single service token (``STREAMRELAY_TOKEN``) when no ``[clients.NAME]`` is configured."""

KEY_SEPARATOR = "/"

RUN_ID_PATTERN = re.compile(
    r"[^\x00-\x20\x7f-\xa0\u00ad/\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff\ud800-\udfff]{1,200}"
)
"""A run id: 1 to 200 characters, no ``/``, no space, control character (C0, C1), bidi, zero-width or invisible
formatting character and no lone surrogate: it appears in URLs, logs, keys, SQLite and operators' terminals."""

CLIENT_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""A client's name: lower-case letters, digits, ``_`` and ``-``, starting with a letter or digit."""


@dataclass(frozen=True)
class ClientLimits:
    """What one client may do. ``None`` for ``channels`` means every configured channel.

    Attributes:
        name: the client's name (``[clients.NAME]``).
        channels: the channels its runs may use (None: all).
        max_active_runs: runs of this client active at once (429 past it).
        events_per_s: events per second this client may send (a request waits for its share: acquire-or-wait).
        max_events_per_run: events one run may carry (422 past it).
        max_chars_per_run: characters of text one run may carry (422 past it).
        max_messages_per_run: chat messages one run may become (the answer is cut there, with a notice, and the
            report says ``partial``).
        max_runs_per_request: runs one request may start (429 past it).
        seq_window: how far ahead of the last taken ``seq`` a line may be (422 past it: refused, not waited for).
        approve_actions: tool calls of its runs a person must approve first, added to the channel's
            (:mod:`core.lanes.hold`).
    """

    name: str = DEFAULT_CLIENT
    channels: frozenset[str] | None = None
    max_active_runs: int = 1000
    events_per_s: float = 10_000.0
    max_events_per_run: int = 100_000
    max_chars_per_run: int = 1_000_000
    max_messages_per_run: int = 50
    max_runs_per_request: int = 20
    seq_window: int = 10_000
    approve_actions: tuple[str, ...] = ()

    def setting(self, field: str) -> str:
        """The TOML key of one of this client's limits, for error messages: ``clients.NAME.field``."""
        return f"clients.{self.name}.{field}"

    def may_use(self, channel: str) -> bool:
        """True when this client's runs may use ``channel``."""
        return self.channels is None or channel in self.channels


def run_key(client: str, run: str) -> str:
    """The core's key of ``client``'s run ``run``: the run id itself for :data:`DEFAULT_CLIENT`, else ``client/run``."""
    return run if client == DEFAULT_CLIENT else f"{client}{KEY_SEPARATOR}{run}"


def split_key(key: str) -> tuple[str, str]:
    """``(client, run id)`` of a core run key (:func:`run_key`'s inverse)."""
    client, sep, run = key.partition(KEY_SEPARATOR)
    return (client, run) if sep else (DEFAULT_CLIENT, key)


def run_id_problem(run: object) -> str | None:
    """Why ``run`` is not a valid run id (None when it is)."""
    if not isinstance(run, str):
        return f"run must be a string, got {type(run).__name__}"
    if RUN_ID_PATTERN.fullmatch(run) is None:
        return (
            "run must be 1 to 200 characters with no '/', no space, no control, bidi or invisible character and no "
            "lone surrogate"
        )
    return None


class ClientBook:
    """Every client's limits, and how many runs each has active (one book may serve several relays: a replica's
    partitions count a client's runs together).

    Args:
        limits: each client's limits by name; a client not listed gets the default limits under its name.
    """

    def __init__(self, limits: Mapping[str, ClientLimits] | None = None) -> None:
        self._limits = dict(limits or {})
        self.active: Counter[str] = Counter()
        """Active runs per client name."""

    def __repr__(self) -> str:
        return f"ClientBook({sorted(self._limits)!r}, active={dict(self.active)!r})"

    def limits_for(self, key: str) -> ClientLimits:
        """The limits of the client that owns the run keyed ``key``."""
        name = split_key(key)[0]
        limits = self._limits.get(name)
        if limits is None:
            limits = self._limits[name] = ClientLimits(name=name)
        return limits

    def started(self, key: str) -> None:
        """The run keyed ``key`` became active."""
        self.active[split_key(key)[0]] += 1

    def left(self, key: str, *, ended: bool = True) -> None:
        """The run keyed ``key`` is no longer active here: its client may start another. ``ended`` False: it stopped
        here without ending (its partition went to another replica, or its start was not taken), so a count shared
        by replicas keeps it (:class:`app.replicas.client_book.SharedClientBook`)."""
        name = split_key(key)[0]
        self.active[name] -= 1
        if self.active[name] <= 0:
            del self.active[name]
