"""MatrixConnection: one bot's matrix-nio ``AsyncClient`` where every call is one attempt with its own deadline and
every failure is translated at the boundary (:mod:`adapters.matrix.errors`).
:class:`~adapters.matrix.adapter.MatrixAdapter` holds one.

The client is given the bot's access token (no login: https://spec.matrix.org/latest/client-server-api/#using-access-tokens)
and its user id, read once with ``GET /account/whoami`` when a call needs it (typing names the user in its path).
nio's own retries are off (``max_limit_exceeded=0``: a 429 comes back as an answer instead of a sleep;
``max_timeouts=0``: a timeout raises instead of a retry), aiohttp's own retry of an idempotent ``PUT`` on a broken
connection too (:meth:`MatrixConnection._new_session`), and its request timeout is off: each call runs under
``asyncio.timeout(send_timeout_s)``. End-to-end encryption is not used (no olm store): rooms must be unencrypted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from nio import AsyncClient, AsyncClientConfig, ErrorResponse, WhoamiResponse

from streamrelay.adapters.adapter_parts import shows
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.matrix.errors import PLATFORM, ErrorAnswer, translate
from streamrelay.adapters.matrix.media import PublicResolver
from streamrelay.core.errors import AnswerTimeoutError, ConfigError, DeliveryError, PlatformUnavailableError
from streamrelay.core.events import Target

DEFAULT_BASE_URL = "https://matrix.org"


class MatrixConnection:
    """A matrix-nio client used by one bot: one attempt per call.

    Args:
        token: the access token. Never shown in ``repr``, ``str``, logs or errors.
        base_url: the homeserver's URL (``http://127.0.0.1:PORT`` for :class:`mocks.matrix.MockMatrix`); None is
            https://matrix.org.
        send_timeout_s: seconds one call may take; past it the call is unknown (``AnswerTimeoutError``).

    Raises:
        ConfigError: an empty token, or one with whitespace.
    """

    def __init__(self, token: str, *, base_url: str | None = None, send_timeout_s: float = 10.0) -> None:
        if not token or any(ch.isspace() for ch in token):
            raise ConfigError("matrix: the access token is empty or holds whitespace")
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.send_timeout_s = send_timeout_s
        config = AsyncClientConfig(
            max_limit_exceeded=0, max_timeouts=0, request_timeout=0, encryption_enabled=False, store_sync_tokens=False
        )
        self.client = AsyncClient(self.base_url, config=config)
        self.client.access_token = token
        self._scrub = Scrubber(token, token.rpartition("_")[0])
        self._user_id: str | None = None
        self._closed = False
        self._media_session: aiohttp.ClientSession | None = None

    __repr__ = __str__ = shows(base_url="base_url")

    async def user_id(self, target: Target) -> str:
        """The bot's user id (``GET /account/whoami`` once, then kept)."""
        if self._user_id is None:
            answer = await self.call("whoami", target, lambda c: c.whoami(), creates=False)
            if not isinstance(answer, WhoamiResponse):
                raise PlatformUnavailableError("matrix whoami: no user id in the answer", platform=PLATFORM)
            self._user_id = answer.user_id
            self.client.user_id = answer.user_id
        return self._user_id

    def media_session(self, public_only: bool) -> aiohttp.ClientSession:
        """The session a media item's file is fetched through: with ``public_only`` its own, whose connections
        reach only public addresses (:class:`adapters.matrix.media.PublicResolver`: the homeserver itself may be on
        a private network, the agent's URLs may not reach it); else nio's (:meth:`session`)."""
        if not public_only:
            return self.session()
        if self._media_session is None or self._media_session.closed:
            connector = aiohttp.TCPConnector(resolver=PublicResolver())
            self._media_session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        return self._media_session

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session nio sends through (made now if it is not yet: :meth:`_new_session`); a media item's file
        is fetched through it too when the channel allows private addresses (:meth:`media_session`)."""
        if self.client.client_session is None:
            self.client.client_session = self._new_session()
        session: aiohttp.ClientSession = self.client.client_session
        return session

    async def call(
        self,
        method: str,
        target: Target,
        action: Callable[[AsyncClient], Awaitable[Any]],
        *,
        creates: bool,
        timeout_s: float | None = None,
    ) -> Any:
        """One attempt at one call: ``action`` with the client under ``timeout_s`` (None: ``send_timeout_s``); its
        answer, or a ``DeliveryError`` (token-free) for an error answer or a failure. ``creates``: the call makes a
        new message (a 5xx to it is uncertain)."""
        room = str(target.chat_id)
        if self._closed:
            raise PlatformUnavailableError("matrix: the adapter is closed", platform=PLATFORM, target=room)
        self.session()
        limit_s = self.send_timeout_s if timeout_s is None else timeout_s
        error: DeliveryError
        try:
            async with asyncio.timeout(limit_s):
                answer = await action(self.client)
        except TimeoutError:
            error = AnswerTimeoutError(
                f"matrix {method}: no answer within {limit_s:g} s", platform=PLATFORM, target=room
            )
        except aiohttp.ClientError as exc:
            error = translate(exc, method=method, creates=creates, target=room, scrub=self._scrub)
        else:
            if not isinstance(answer, ErrorResponse):
                return answer
            error = translate(ErrorAnswer.of(answer), method=method, creates=creates, target=room, scrub=self._scrub)
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    @staticmethod
    def _new_session() -> aiohttp.ClientSession:
        """The HTTP session nio sends through, made here rather than by nio: aiohttp sends an idempotent request
        (``PUT``: every Matrix send) a second time by itself when a kept-alive connection breaks
        (https://www.rfc-editor.org/rfc/rfc9112.html#name-retrying-requests); that retry is turned off, as aiohttp's
        own test client does (``_retry_connection``), so the platform sees one request per attempt and a broken
        connection is reported (uncertain), then settled with the same transaction id. One retry layer, ours."""
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        session._retry_connection = False
        return session

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        self._closed = True
        await self.client.close()
        if self._media_session is not None:
            await self._media_session.close()
