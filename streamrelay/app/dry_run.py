"""Dry runs: for each platform, its mock server, a token shaped like a real one, and chats to deliver to.

The case runner, the demo and ``streamrelay mock PLATFORM`` use this one table, so every platform is
exercised the same way: the real SDK, over loopback HTTP, against a mock that behaves like the platform.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from streamrelay.adapters.platform import DryRunFacts
from streamrelay.adapters.registry import REGISTRY
from streamrelay.core.events import Target

if TYPE_CHECKING:
    from streamrelay.mocks.common import MockPlatform


@dataclass(frozen=True)
class DryRunPlatform:
    """How to dry-run one platform.

    Attributes:
        make_mock: a new mock server (not started), ``rate_limits`` on or off.
        serve: runs a mock until cancelled (``streamrelay mock NAME``).
        default_port: the port ``streamrelay mock NAME`` listens on by default.
        token: a bot token shaped like the platform's (mocks check the shape; never a real secret).
        private: a one-to-one conversation (Telegram private chat, Slack DM, Discord channel).
        group: a group conversation (Telegram group, Slack channel, Discord guild channel).
        thread_id: a thread for native streaming where the platform needs one (Slack: a parent ts).
    """

    make_mock: Callable[[bool], MockPlatform]
    serve: Callable[[str, int, bool], Coroutine[Any, Any, None]]
    default_port: int
    token: str
    private: int | str
    group: int | str
    thread_id: str | None = None

    def target(self, *, group: bool = False, native: bool = False) -> Target:
        """Where a dry run delivers: the private or the group conversation (in a thread for native)."""
        chat = self.group if group else self.private
        return Target(chat_id=chat, thread_id=self.thread_id if native else None)


def _mock(where: str) -> Callable[[bool], MockPlatform]:
    """A factory of the mock ``"module:Class"``: the mock's module (and its aiohttp server) is imported at the first
    mock made, so a dry run of one platform never imports the others' mocks."""
    module, _, cls = where.partition(":")

    def make(limits: bool) -> MockPlatform:
        mock: MockPlatform = getattr(importlib.import_module(module), cls)(rate_limits=limits)
        return mock

    return make


def _serve(where: str) -> Callable[[str, int, bool], Coroutine[Any, Any, None]]:
    """The mock module's ``serve_forever``, imported when it is called (``streamrelay mock NAME``)."""
    module = where.partition(":")[0]

    async def serve(host: str, port: int, limits: bool) -> None:
        await importlib.import_module(module).serve_forever(host, port, limits)

    return serve


def _dry_run(facts: DryRunFacts) -> DryRunPlatform:
    return DryRunPlatform(
        make_mock=_mock(facts.mock),
        serve=_serve(facts.mock),
        default_port=facts.default_port,
        token=facts.token,
        private=facts.private,
        group=facts.group,
        thread_id=facts.thread_id,
    )


DRY_RUN: dict[str, DryRunPlatform] = {
    name: _dry_run(platform.dry_run) for name, platform in REGISTRY.items() if platform.dry_run is not None
}
"""Every platform that can be dry-run against a mock, from :mod:`adapters.registry` (the web channel has no mock:
the sidecar is its platform)."""


@runtime_checkable
class ThreadSeeding(Protocol):
    """A mock whose threads start at a message a person wrote (Slack's ``thread_ts`` is its parent's ``ts``)."""

    def add_user_message(self, chat_id: int | str, ts: str | None, text: str) -> object:
        """Store the person's message ``text`` with id ``ts`` in ``chat_id``."""
        ...


def seed_thread(mock: MockPlatform, target: Target) -> None:
    """Where a dry run streams into a thread (:attr:`adapters.platform.DryRunFacts.thread_id`: Slack native), the
    person's question starts it: the mock holds a parent message with the target's ``thread_id``.

    Raises:
        TypeError: the platform dry-runs in a thread but its mock cannot hold a person's message at a given id.
    """
    if target.thread_id is None:
        return
    if not isinstance(mock, ThreadSeeding):
        raise TypeError(f"mock {mock.platform!r} cannot seed thread {target.thread_id!r}: give it add_user_message")
    mock.add_user_message(target.chat_id, str(target.thread_id), "A question from the person, please.")
