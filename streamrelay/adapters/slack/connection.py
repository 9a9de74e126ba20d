"""SlackConnection: one Slack app's Web API client, where every call is one attempt and every failure is
translated at the boundary (:mod:`adapters.slack.errors`). :class:`~adapters.slack.adapter.SlackAdapter`
holds one and builds its messages, streams and threads on it (so do :mod:`adapters.slack.media` and
:mod:`adapters.slack.settle`).

The client gets ``retry_handlers=[]`` (slack-sdk otherwise retries connection errors by itself, and with
``AsyncRateLimitErrorRetryHandler`` 429s), so retries belong to the core's scheduler alone; the one exception is
:meth:`SlackConnection.verify` at start-up, which retries connection errors only (nothing was sent). Every answer is
checked before it is used (:mod:`adapters.slack.answers`): one that cannot be read is *unknown*.

References: auth.test https://docs.slack.dev/reference/methods/auth.test, responses
https://docs.slack.dev/apis/web-api/#responses, slack-sdk https://docs.slack.dev/tools/python-slack-sdk/web.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import aiohttp
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from streamrelay.adapters.adapter_parts import shows
from streamrelay.adapters.deadline import TRACE, SendDeadline
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.slack.answers import BodyKeepingResponse, CheckedWebClient
from streamrelay.adapters.slack.errors import BOUNDARY_ERRORS, error_code, translate
from streamrelay.core.errors import ConfigError, DeliveryError
from streamrelay.core.events import Target

Send = Callable[[], Awaitable[AsyncSlackResponse]]
"""One Web API call, ready to send (a closure over the client)."""

_TOKEN_RE = re.compile(r"^xox[a-z]-[A-Za-z0-9-]+$")
_CONNECT_ERRORS = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


HARD_TIMEOUT_EXTRA_S = 60.0
"""aiohttp's (and slack-sdk's) own timeout is three times ``send_timeout_s`` plus this: a cap for a loop stalled for
long; the timeout that counts is :class:`~adapters.deadline.SendDeadline`'s."""


@dataclass(frozen=True)
class Refused:
    """An expected refusal: Slack's ``code`` and the translated ``error`` (to raise if it stays a failure)."""

    code: str
    error: DeliveryError


class SlackConnection:
    """The Web API client of one Slack app: one attempt per call, failures as :class:`core.errors.DeliveryError`.

    Args:
        token: the bot token ``xoxb-…`` (a user token ``xoxp-…`` works too). Never shown in ``repr``, ``str``,
            logs or errors.
        base_url: Web API base, e.g. ``http://127.0.0.1:8082/api/`` for :class:`mocks.slack.MockSlack`;
            ``None`` is https://slack.com/api/.
        send_timeout_s: per-call timeout in seconds, counted from when the request is written and leaving out the
            time our event loop stalled meanwhile (:class:`adapters.deadline.SendDeadline`). A call that times out
            raises :class:`core.errors.UncertainDeliveryError` (it may have landed); one whose request could not
            be written within it (a connection not opened in time) raises
            :class:`core.errors.PlatformUnavailableError` (nothing was sent). aiohttp's own timeout is only a hard
            cap (:data:`HARD_TIMEOUT_EXTRA_S` past three times it).

    Attributes:
        verify_backoff_s: the first wait between :meth:`verify` attempts, doubled each time.

    Raises:
        ConfigError: the token is not shaped like a Slack token.
    """

    def __init__(self, token: str, *, base_url: str | None = None, send_timeout_s: float = 10.0) -> None:
        if not _TOKEN_RE.match(token):
            raise ConfigError("slack: the bot token is malformed (expected 'xoxb-…')")
        self.send_timeout_s = send_timeout_s
        self.verify_backoff_s = 0.5
        self.base_url = base_url or CheckedWebClient.BASE_URL
        secret = token.rsplit("-", 1)[-1]
        self.scrub = Scrubber(token, secret)
        """Takes the token out of a text (an error's, an answer's excerpt)."""
        self.client = CheckedWebClient(
            token=token, base_url=self.base_url, timeout=math.ceil(self._hard_timeout_s), retry_handlers=[]
        )
        self._user_id: str | None = None

    @property
    def _hard_timeout_s(self) -> float:
        return self.send_timeout_s * 3 + HARD_TIMEOUT_EXTRA_S

    __repr__ = __str__ = shows(base_url="base_url")

    def _ensure_session(self) -> None:
        """One aiohttp session for every call (slack-sdk would open one per call), made inside the loop."""
        session = self.client.session
        if session is None or session.closed:
            timeout = aiohttp.ClientTimeout(total=self._hard_timeout_s, sock_connect=self.send_timeout_s / 2)
            self.client.session = aiohttp.ClientSession(
                timeout=timeout, trace_configs=[TRACE], response_class=BodyKeepingResponse
            )

    async def try_call(
        self, method: str, target: Target, send: Send, allow: Collection[str] = ()
    ) -> AsyncSlackResponse | Refused:
        """One attempt at ``send`` (``method`` names it in errors); a refusal whose code is in ``allow`` is returned,
        every other failure raised as a :class:`core.errors.DeliveryError`."""
        self._ensure_session()
        deadline = SendDeadline(self.send_timeout_s)
        try:
            async with deadline:
                return await send()
        except BOUNDARY_ERRORS as exc:
            code = error_code(exc)
            if isinstance(exc, TimeoutError) and not deadline.written:  # our deadline, before the request went out
                exc = aiohttp.ConnectionTimeoutError(
                    f"the request could not be written within {self.send_timeout_s:g} s"
                )
            error = translate(exc, method=method, target=str(target.chat_id), scrub=self.scrub)
        if code is not None and code in allow:
            return Refused(code, error)
        raise error  # outside the except block: no __context__ that could carry the request

    async def call(self, method: str, target: Target, send: Send) -> AsyncSlackResponse:
        """One attempt at ``send``; every failure raised as a :class:`core.errors.DeliveryError`."""
        answer = await self.try_call(method, target, send)
        if isinstance(answer, Refused):  # pragma: no cover - nothing is allowed
            raise answer.error
        return answer

    async def verify(self) -> str:
        """Check the token at start-up (auth.test); return ``"<bot name> (<user id>)"``.

        Connection errors (nothing sent) are retried: 3 attempts, waits ``verify_backoff_s`` then twice that.

        Raises:
            core.errors.ForbiddenError: the token is wrong or revoked (``invalid_auth``, ``token_revoked``).
            core.errors.PlatformUnavailableError: Slack could not be reached in 3 attempts.
        """
        self._ensure_session()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=self.verify_backoff_s),
            retry=retry_if_exception_type(_CONNECT_ERRORS),
            reraise=True,
        )
        try:
            answer: AsyncSlackResponse = await retrying(self.client.auth_test)
        except BOUNDARY_ERRORS as exc:
            error = translate(exc, method="auth.test", target="", scrub=self.scrub)
        else:
            user_id = answer.get("user_id")
            self._user_id = user_id if isinstance(user_id, str) and user_id else None
            return f"{answer.get('user')} ({answer.get('user_id')})"
        raise error

    async def user_id(self) -> str | None:
        """The bot's own user id (auth.test, asked once and kept; :meth:`verify` keeps it too), or None when the
        answer names none (then every message is taken as possibly the bot's).

        Raises:
            core.errors.DeliveryError: a subclass, as every call.
        """
        if self._user_id is None:
            answer = await self.call("auth.test", Target(chat_id=0), lambda: self.client.auth_test())
            user_id = answer.get("user_id")
            self._user_id = user_id if isinstance(user_id, str) and user_id else None
        return self._user_id

    async def close(self) -> None:
        """Close the HTTP session."""
        session = self.client.session
        if session is not None and not session.closed:
            await session.close()
