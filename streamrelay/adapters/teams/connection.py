"""TeamsConnection: one bot's Teams SDK clients (``microsoft-teams-api``) where every call is one attempt with its own
deadline and every failure is translated at the boundary (:mod:`adapters.teams.errors`).
:class:`~adapters.teams.adapter.TeamsAdapter` holds one.

The Bot Framework Connector is reached at the conversation's ``serviceUrl``
(https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#base-uri):
the SDK's ``ConversationActivityClient`` takes it as its ``service_url``, so a mock is the service URL
``http://127.0.0.1:PORT``. A channel has one service URL (``api_base``; Teams' public one by default).

The bot authenticates with a token it gets by the OAuth client credentials grant from Microsoft Entra ID
(``POST {login}/{tenant}/oauth2/v2.0/token``, scope ``https://api.botframework.com/.default``,
https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-authentication#bot-to-connector),
through the SDK's ``BotTokenClient``. The login endpoint is Microsoft's (``login.microsoftonline.com``) unless the
service URL is on this machine (loopback): then the mock serves the token too, and the client secret never leaves
the machine. The token is kept until 5 minutes before it expires. The SDK's HTTP client does not retry and its
timeout is off: each call runs under ``asyncio.timeout(send_timeout_s)``, token included.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from microsoft_teams.api.auth.cloud_environment import PUBLIC
from microsoft_teams.api.auth.credentials import ClientCredentials
from microsoft_teams.api.clients.bot.token_client import BotTokenClient
from microsoft_teams.api.clients.conversation.activity import ConversationActivityClient
from microsoft_teams.api.clients.conversation.member import ConversationMemberClient
from microsoft_teams.common.http import Client, ClientOptions

from streamrelay.adapters.adapter_parts import shows
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.teams.errors import PLATFORM, ConnectorError, translate
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    ForbiddenError,
    PlatformUnavailableError,
    UnreadableAnswerError,
)
from streamrelay.core.events import Target

DEFAULT_SERVICE_URL = "https://smba.trafficmanager.net/teams"
"""Teams' public service URL (a conversation's activity names its own; one per channel here)."""
TOKEN_MARGIN_S = 300.0
"""A token is renewed this long before it expires."""


def split_credentials(token: str) -> tuple[str, str, str | None]:
    """``APP_ID:CLIENT_SECRET`` or ``APP_ID:CLIENT_SECRET:TENANT_ID`` (a single-tenant bot) → the three parts.

    Raises:
        ConfigError: not two or three parts, an app id that is no GUID, an empty secret or whitespace (the message
            never shows the secret).
    """
    parts = token.split(":")
    tenant: str | None = None
    if len(parts) == 3 and _is_tenant(parts[2]):
        parts, tenant = parts[:2], parts[2]
    app_id, secret = parts[0], ":".join(parts[1:])
    if len(parts) < 2 or not _is_guid(app_id) or not secret or any(ch.isspace() for ch in token):
        raise ConfigError(
            "teams: the token must be APP_ID:CLIENT_SECRET or APP_ID:CLIENT_SECRET:TENANT_ID (the bot's Microsoft "
            "App ID, a GUID, then its client secret; the tenant's id for a single-tenant bot), without whitespace"
        )
    return app_id, secret, tenant


def _is_guid(text: str) -> bool:
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(
        c in "0123456789abcdefABCDEF" for c in text.replace("-", "")
    )


def _is_tenant(text: str) -> bool:
    return _is_guid(text) or text.endswith(".onmicrosoft.com")


def _loopback(url: str) -> bool:
    host = httpx.URL(url).host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_service_url(url: str) -> str:
    """``url`` without its trailing ``/`` when the bot's token may be sent there: ``https`` with a host, or ``http`` on
    this machine (loopback: the mock). Every call carries the bot's bearer token, which plain ``http`` to another
    machine would show to the network; Teams' service URLs are ``https``
    (https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#base-uri).

    Raises:
        ConfigError: another scheme, no host, or ``http`` to a host that is not loopback.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or not parsed.host or parsed.scheme not in ("http", "https"):
        raise ConfigError(f"teams: api_base {url!r} must be an https URL (Teams' service URL) with a host")
    if parsed.scheme == "http" and not _loopback(url):
        raise ConfigError(
            f"teams: api_base {url!r} is plain http to another machine: the bot's token would travel unencrypted; use "
            "the https service URL Teams names (or http://127.0.0.1:PORT for the mock)"
        )
    return url.rstrip("/")


class TeamsConnection:
    """The Teams SDK's clients used by one bot: one attempt per call.

    Args:
        token: ``APP_ID:CLIENT_SECRET[:TENANT_ID]`` (:func:`split_credentials`). The secret and the access token are
            never shown in ``repr``, ``str``, logs or errors.
        base_url: the service URL (``http://127.0.0.1:PORT`` for :class:`mocks.teams.MockTeams`); None is
            :data:`DEFAULT_SERVICE_URL`.
        send_timeout_s: seconds one call may take; past it the call is unknown (``AnswerTimeoutError``).

    Raises:
        ConfigError: malformed credentials, or a service URL that is not ``https`` (:func:`checked_service_url`).
    """

    def __init__(self, token: str, *, base_url: str | None = None, send_timeout_s: float = 10.0) -> None:
        self.app_id, secret, tenant = split_credentials(token)
        self.service_url = checked_service_url(base_url or DEFAULT_SERVICE_URL)
        self.send_timeout_s = send_timeout_s
        cloud = PUBLIC
        self.login_url = "https://login.microsoftonline.com"
        """The login endpoint's base (the mock's service URL on loopback)."""
        if _loopback(self.service_url):
            cloud = dataclasses.replace(PUBLIC, login_endpoint=self.service_url)
            self.login_url = self.service_url
        self._credentials = ClientCredentials(client_id=self.app_id, client_secret=secret, tenant_id=tenant)
        self._access: str | None = None
        self._token_lock = asyncio.Lock()
        self._expires_at = 0.0
        self._scrub = Scrubber(token, secret)
        self._session = httpx.AsyncClient(timeout=None)
        self._token_client = BotTokenClient(Client(ClientOptions(), _http=self._session), cloud=cloud)
        http = Client(ClientOptions(token=self._bearer), _http=self._session)
        self.activities = ConversationActivityClient(self.service_url, http)
        self.members = ConversationMemberClient(self.service_url, http)
        """The SDK's member client (``GET /v3/conversations/{id}/members``): a personal chat's person for Graph."""
        self._closed = False

    __repr__ = __str__ = shows(service_url="service_url", app_id="app_id")

    @property
    def client_secret(self) -> str:
        """The bot's client secret (for the Graph token of :mod:`adapters.teams.graph`; never logged)."""
        return self._credentials.client_secret

    @property
    def session(self) -> httpx.AsyncClient:
        """The HTTP session every call of this bot uses."""
        return self._session

    def _bearer(self) -> str | None:
        return self._access

    async def _ensure_token(self) -> None:
        """Get a token when none is kept or it expires within :data:`TOKEN_MARGIN_S`."""
        if self._access is not None and time.monotonic() < self._expires_at:
            return
        answer = await self._token_client.get(self._credentials)
        self._scrub = Scrubber(answer.access_token, *self._scrub_parts())
        self._access = answer.access_token
        self._expires_at = time.monotonic() + max(0.0, answer.expires_in - TOKEN_MARGIN_S)

    def _scrub_parts(self) -> tuple[str, ...]:
        return (self._credentials.client_secret,)

    async def call(
        self,
        method: str,
        target: Target,
        action: Callable[[ConversationActivityClient], Awaitable[Any]],
        *,
        creates: bool,
    ) -> Any:
        """One attempt at one call: the token when it must be had (:meth:`_token`, its own deadline), then ``action``
        with the activity client under ``send_timeout_s``; its answer, or a ``DeliveryError`` (secret-free).
        ``creates``: the call makes a new message (a 5xx or a lost answer to it is uncertain).

        A failure to get the token is ``ForbiddenError`` (401/400: the credentials are refused) or
        ``PlatformUnavailableError`` (anything else): no message was sent."""
        conversation = str(target.chat_id)
        if self._closed:
            raise PlatformUnavailableError("teams: the adapter is closed", platform=PLATFORM, target=conversation)
        await self._token(conversation)
        error: DeliveryError
        try:
            async with asyncio.timeout(self.send_timeout_s):
                return await action(self.activities)
        except TimeoutError:
            error = AnswerTimeoutError(
                f"teams {method}: no answer within {self.send_timeout_s:g} s", platform=PLATFORM, target=conversation
            )
        except httpx.HTTPStatusError as exc:
            answer = ConnectorError.of(exc.response)
            error = translate(answer, method=method, creates=creates, target=conversation, scrub=self._scrub)
        except httpx.HTTPError as exc:
            error = translate(exc, method=method, creates=creates, target=conversation, scrub=self._scrub)
        except (ValueError, KeyError) as exc:  # a 2xx that is no JSON or lacks the id: the send may have happened
            error = UnreadableAnswerError(
                self._scrub(f"teams {method}: unreadable answer: {type(exc).__name__}: {exc}"),
                platform=PLATFORM,
                target=conversation,
            )
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    async def _token(self, conversation: str) -> None:
        """The token, had before the call's own deadline starts and by one request however many calls wait for it
        (a restarted sidecar resumes many runs at once): a slow or failed token request leaves nothing sent
        (``PlatformUnavailableError``, ``ForbiddenError`` for refused credentials), never an uncertain create."""
        error: DeliveryError | None = None
        try:
            async with self._token_lock, asyncio.timeout(self.send_timeout_s):
                await self._ensure_token()
        except TimeoutError:
            error = PlatformUnavailableError(
                f"teams token: no answer within {self.send_timeout_s:g} s", platform=PLATFORM, target=conversation
            )
        except httpx.HTTPStatusError as exc:
            answer = ConnectorError.of(exc.response)
            text = self._scrub(f"teams token: HTTP {answer.status} {answer.code}: {answer.message}")
            kind = ForbiddenError if answer.status in (400, 401, 403) else PlatformUnavailableError
            error = kind(text, platform=PLATFORM, target=conversation)
        except (httpx.HTTPError, ValueError) as exc:
            text = self._scrub(f"teams token: {type(exc).__name__}: {exc}")
            error = PlatformUnavailableError(text, platform=PLATFORM, target=conversation)
        if error is not None:
            raise error

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        self._closed = True
        await self._session.aclose()
