"""Dry runs: for each platform, its mock server, a token shaped like a real one, and chats to deliver to.

The case runner, the demo and ``streamrelay mock PLATFORM`` use this one table, so every platform is
exercised the same way: the real SDK, over loopback HTTP, against a mock that behaves like the platform.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.events import Target

if TYPE_CHECKING:
    from mocks.common import MockPlatform


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


def _mock(platform: str, cls: str) -> Callable[[bool], MockPlatform]:
    """A factory of ``mocks.<platform>.<cls>``: the mock's module (and its aiohttp server) is imported at the first
    mock made, so a dry run of one platform never imports the others' mocks."""

    def make(limits: bool) -> MockPlatform:
        mock: MockPlatform = getattr(importlib.import_module(f"mocks.{platform}"), cls)(rate_limits=limits)
        return mock

    return make


def _serve(platform: str) -> Callable[[str, int, bool], Coroutine[Any, Any, None]]:
    """``mocks.<platform>.serve_forever``, imported when it is called (``streamrelay mock NAME``)."""

    async def serve(host: str, port: int, limits: bool) -> None:
        await importlib.import_module(f"mocks.{platform}").serve_forever(host, port, limits)

    return serve


DRY_RUN: dict[str, DryRunPlatform] = {
    "telegram": DryRunPlatform(
        make_mock=_mock("telegram", "MockTelegram"),
        serve=_serve("telegram"),
        default_port=8081,
        token="123456:DRY-run-token-for-the-mock-bot-api",
        private=1001,
        group=-1001001,
    ),
    "slack": DryRunPlatform(
        make_mock=_mock("slack", "MockSlack"),
        serve=_serve("slack"),
        default_port=8082,
        token="xoxb-1001-2002-DRYrunTOKENforTHEmock",
        private="D0DRYRUN01",
        group="C0DRYRUN01",
        thread_id="1700000000.000100",
    ),
    "discord": DryRunPlatform(
        make_mock=_mock("discord", "MockDiscord"),
        serve=_serve("discord"),
        default_port=8083,
        token="MTAwMTAwMTAwMTAwMTAwMQ.GdRyRn.dry-run-token-for-the-mock-discord-api",
        private=1001001001001001001,
        group=1001001001001001002,
    ),
}
"""Every platform that can be dry-run (``web`` arrives with issue 5)."""


def seed_thread(mock: MockPlatform, target: Target) -> None:
    """Where a dry run streams into a thread (Slack native), the person's question starts it: the mock
    holds a parent message with the target's ``thread_id``."""
    if target.thread_id is not None and mock.platform == "slack":
        from mocks.slack import MockSlack  # imported already: the mock is one

        assert isinstance(mock, MockSlack)
        mock.add_user_message(target.chat_id, str(target.thread_id), "A question from the person, please.")
