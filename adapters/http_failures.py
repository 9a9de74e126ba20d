"""What an aiohttp failure says about a call: was the request never sent, or may it have landed?

Shared by every adapter whose SDK talks HTTP through aiohttp (aiogram, slack-sdk, discord.py), so the rule
that decides between "retry freely" and "never send again" is written once. First match wins:

- a connection that never opened (refused, DNS, TLS, connect timeout): nothing was sent →
  ``PlatformUnavailableError``;
- a timeout or a broken connection after the request may have been written → ``UncertainDeliveryError``;
- any other client error (an invalid URL and the like): nothing was sent → ``PlatformUnavailableError``.
"""

from __future__ import annotations

import asyncio

import aiohttp

from core.errors import DeliveryError, PlatformUnavailableError, UncertainDeliveryError

NETWORK_OUTCOMES: tuple[tuple[type[BaseException], type[DeliveryError]], ...] = (
    (aiohttp.ConnectionTimeoutError, PlatformUnavailableError),  # connect timed out: nothing sent
    (asyncio.TimeoutError, UncertainDeliveryError),  # sent, no answer in time (aiohttp.ServerTimeoutError too)
    (aiohttp.ClientConnectorError, PlatformUnavailableError),  # refused, DNS, TLS: nothing sent
    (aiohttp.ServerDisconnectedError, UncertainDeliveryError),
    (aiohttp.ClientOSError, UncertainDeliveryError),  # reset mid-request
    (aiohttp.ClientPayloadError, UncertainDeliveryError),
    (aiohttp.ClientError, PlatformUnavailableError),  # InvalidURL and the like: nothing sent
)
"""``(exception type, what it means)``, most specific first."""
