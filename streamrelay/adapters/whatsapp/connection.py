"""WhatsAppConnection: one business phone number's pywa client where every call is one attempt with its own deadline
and every failure is translated at the boundary (:mod:`adapters.whatsapp.errors`).
:class:`~adapters.whatsapp.adapter.WhatsAppAdapter` holds one.

pywa (``pywa_async.WhatsApp``) is given the phone number id and the access token and an ``httpx.AsyncClient`` of
ours. pywa cannot be pointed at another base URL: it sets its session's ``base_url`` to
``https://graph.facebook.com/v{version}`` itself (``pywa/api.py``). It can be given its session, though, and an
httpx request hook (https://www.python-httpx.org/advanced/event-hooks/) moves each request to ``base_url`` (a mock)
keeping its path (``/v{version}/{phone-number-id}/messages``): pywa builds every payload and parses every answer
unchanged. httpx's own timeout is off: each call runs under ``asyncio.timeout(send_timeout_s)``; httpx does not
retry a request by itself, pywa neither: one attempt per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pywa.errors import WhatsAppError
from pywa_async.client import WhatsApp

from streamrelay.adapters.adapter_parts import shows
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.whatsapp.errors import PLATFORM, GraphError, translate
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    PlatformUnavailableError,
    UnreadableAnswerError,
)
from streamrelay.core.events import Target

GRAPH_URL = "https://graph.facebook.com"


def split_token(token: str) -> tuple[str, str]:
    """``PHONE_NUMBER_ID:ACCESS_TOKEN`` → ``(phone number id, access token)``.

    Raises:
        ConfigError: not two parts, a phone number id that is not digits, or whitespace in the token (the message
            never shows the token).
    """
    phone_id, sep, access = token.partition(":")
    if not sep or not phone_id.isdigit() or not access or any(ch.isspace() for ch in access):
        raise ConfigError(
            "whatsapp: the token must be PHONE_NUMBER_ID:ACCESS_TOKEN (the business phone number id, digits, then "
            "the system user's access token without whitespace)"
        )
    return phone_id, access


class WhatsAppConnection:
    """A pywa client used by one business phone number: one attempt per call.

    Args:
        token: ``PHONE_NUMBER_ID:ACCESS_TOKEN``. The access token is never shown in ``repr``, ``str``, logs or errors.
        base_url: where the Graph API is (``http://127.0.0.1:PORT`` for :class:`mocks.whatsapp.MockWhatsApp`); None
            is https://graph.facebook.com.
        send_timeout_s: seconds one call may take; past it the call is unknown (``AnswerTimeoutError``).

    Raises:
        ConfigError: a malformed token (:func:`split_token`).
    """

    def __init__(self, token: str, *, base_url: str | None = None, send_timeout_s: float = 10.0) -> None:
        self.phone_id, access = split_token(token)
        self.base_url = (base_url or GRAPH_URL).rstrip("/")
        self.send_timeout_s = send_timeout_s
        target = httpx.URL(self.base_url)
        prefix = target.path.rstrip("/")

        async def redirect(request: httpx.Request) -> None:
            if self.base_url != GRAPH_URL:
                request.url = request.url.copy_with(
                    scheme=target.scheme, host=target.host, port=target.port, path=prefix + request.url.path
                )
                request.headers["Host"] = target.netloc.decode()

        self.session = httpx.AsyncClient(timeout=None, event_hooks={"request": [redirect]})
        self.client = WhatsApp(phone_id=self.phone_id, token=access, session=self.session)
        self._scrub = Scrubber(access)
        self._closed = False

    __repr__ = __str__ = shows(base_url="base_url", phone_id="phone_id")

    async def call(
        self, method: str, target: Target, action: Callable[[WhatsApp], Awaitable[Any]], *, creates: bool
    ) -> Any:
        """One attempt at one call: ``action`` with the client under ``send_timeout_s``; its answer, or a
        ``DeliveryError`` (token-free). ``creates``: the call makes a new message (a 5xx or a lost answer to it is
        uncertain)."""
        to = str(target.chat_id)
        if self._closed:
            raise PlatformUnavailableError("whatsapp: the adapter is closed", platform=PLATFORM, target=to)
        error: DeliveryError
        try:
            async with asyncio.timeout(self.send_timeout_s):
                return await action(self.client)
        except TimeoutError:
            error = AnswerTimeoutError(
                f"whatsapp {method}: no answer within {self.send_timeout_s:g} s", platform=PLATFORM, target=to
            )
        except WhatsAppError as exc:
            response = exc.raw_response
            status = response.status_code if response is not None else None
            header = response.headers.get("Retry-After", "") if response is not None else ""
            wait = float(header) if header.replace(".", "", 1).isdigit() else None
            answer = GraphError(status, exc.code, exc.message, exc.details, wait)
            error = translate(answer, method=method, creates=creates, target=to, scrub=self._scrub)
        except httpx.HTTPError as exc:
            error = translate(exc, method=method, creates=creates, target=to, scrub=self._scrub)
        except ValueError as exc:  # an answer that is no JSON (a proxy's HTML page): the send may have happened
            error = UnreadableAnswerError(
                self._scrub(f"whatsapp {method}: unreadable answer: {exc}"), platform=PLATFORM, target=to
            )
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        self._closed = True
        await self.session.aclose()
