"""Settling an uncertain Teams send by reading the conversation's messages through Microsoft Graph.

The Bot Framework Connector takes no idempotency key for a new activity and lists no conversation's activities to a
bot (https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference), so a
create whose answer was lost (a timeout, a 5xx after Teams stored it, a kill -9 between the intent and the ack) cannot
be read back there. Microsoft Graph can read a conversation's messages, with a permission the operator grants:

- a group chat ``19:…@thread.v2``: ``GET /v1.0/chats/{chat-id}/messages?$top=50&$orderby=createdDateTime desc``,
  permission ``ChatMessage.Read.Chat`` (resource-specific consent) or ``Chat.Read.All``;
- a channel's post ``19:…@thread.tacv2``: ``GET /v1.0/teams/{team-id}/channels/{channel-id}/messages`` (``graph_team``
  names the team), permission ``ChannelMessage.Read.Group`` (resource-specific consent) or ``ChannelMessage.Read.All``;
- a reply in a channel's thread (``thread_id``): ``…/messages/{thread_id}/replies``, the same permissions;
- a personal chat ``a:…``: its Graph chat id is another one, which the Connector never names. It is found once per
  conversation (then kept): the person's Microsoft Entra object id from the Connector's member list
  (``GET /v3/conversations/{id}/members``, ``aadObjectId``,
  https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#get-conversation-members),
  the app's installation in that person's personal scope
  (``GET /v1.0/users/{user-id}/teamwork/installedApps?$expand=teamsAppDefinition($expand=bot)``, the one whose
  ``teamsAppDefinition.bot.id`` is the bot's app id, https://learn.microsoft.com/en-us/graph/api/userteamwork-list-installedapps,
  https://learn.microsoft.com/en-us/graph/api/resources/teamworkbot) and that installation's chat
  (``GET /v1.0/users/{user-id}/teamwork/installedApps/{installation-id}/chat``,
  https://learn.microsoft.com/en-us/graph/api/userscopeteamsappinstallation-get-chat); then it is read as a chat.
  Permissions: ``TeamsAppInstallation.ReadForUser.All`` (application) for the two installation reads, ``Chat.Read.All``
  for the messages. Without them (403), or with no member who has the app installed: ``unknown``.

Sources: https://learn.microsoft.com/en-us/graph/api/chat-list-messages (``$top`` at most 50; ``$orderby``
``lastModifiedDateTime`` (the default) or ``createdDateTime``, descending only),
https://learn.microsoft.com/en-us/graph/api/channel-list-messages (root posts without replies, 20 a page by default,
at most 50; no order documented), https://learn.microsoft.com/en-us/graph/api/chatmessage-list-replies,
resource-specific consent https://learn.microsoft.com/en-us/microsoftteams/platform/graph-api/rsc/resource-specific-consent.
The token is app-only, by the client credentials grant at ``https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token``
with ``scope=https://graph.microsoft.com/.default``
(https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow): a tenant's id is needed
(``graph_tenant``), not the Bot Framework's ``botframework.com``.

The matching rule (:func:`is_match`): a message is the create's when

- it was sent by this bot: ``from.application.id`` is the bot's Microsoft App ID
  (https://learn.microsoft.com/en-us/graph/api/resources/chatmessagefromidentityset);
- it is not deleted (``deletedDateTime`` null) and is a ``message``;
- it is newer than the newest message the sidecar knew when it made the create (``PendingSend.after_id``: the read
  stops there, newest first), and, when this process made the create, created at or after it less
  :data:`CLOCK_SKEW_S`;
- its id is not one the sidecar already holds for another part (``PendingSend.known_ids``);
- its content, normalized, is what the create sent, normalized (:func:`normalize`: Graph returns the body as HTML
  that Teams rendered from the Markdown, and a card as its JSON in ``attachments[].content``; the body's tags and
  entities, a sent Markdown link's URL, Markdown list markers, punctuation, whitespace and case are left out). The
  sent text is never read as HTML (``List<int>`` is text).

Found: ``found`` with its id (taken as the Connector's activity id: see the residual risks). Every message back to
the bound read and none matches: ``not_sent``, but only once the settle window
(``settle_window_ms``) since the create has passed, reading again each second until then (Graph may
show a message a moment after the Connector stored it). Graph refusing (401, 403: no permission; 404) or a
conversation Graph cannot name: ``unknown`` (the core reports the part uncertain, today's behaviour without Graph).
Graph failing (429, 5xx, a timeout): the error is raised and the core asks again later; past its settle window the
part is reported uncertain.

Residual risks, stated: two parts of the same run with the same text between the bound and now, where one is not yet
in ``known_ids`` (a restart forgot it), would be taken for each other (the core then keeps one copy: the text is
the same), and so would a message of the same text created in the very millisecond of the bound message. That the
Connector's activity id is the Graph chatMessage id (a ``found`` id is then edited and deleted through the Connector) is
an assumption no Microsoft page states: Graph's examples show channel message ids as millisecond timestamps, as
Teams' activity ids in channels are; the mock keeps the two the same.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.teams.errors import DEFAULT_RETRY_AFTER_S, PLATFORM, ConnectorError
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    ForbiddenError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    TargetNotFoundError,
    UnreadableAnswerError,
)
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome

GRAPH_SCOPE = "https://graph.microsoft.com/.default"
GRAPH_URL = "https://graph.microsoft.com/v1.0"
LOGIN_URL = "https://login.microsoftonline.com"
PAGE_SIZE = 50
"""Messages per page (``$top``): Graph's maximum for these lists."""
MAX_PAGES = 6
"""Pages read per look; past them, with more to read and the bound not reached, the answer is ``unknown``."""
CLOCK_SKEW_S = 60.0
"""How much earlier than this process's clock a message's ``createdDateTime`` may be and still be the create's."""
POLL_S = 1.0
"""How often a settle reads again while the settle window since its create has not passed."""
TOKEN_MARGIN_S = 300.0
"""A Graph token is renewed this long before it expires."""
REFUSED = (400, 401, 403, 404)
"""Graph answers that mean it cannot be read here (no permission, no such chat or team): ``unknown``."""

_TAG_RE = re.compile(r"<[^>]*>")
_LIST_MARK_RE = re.compile(r"^[ \t]*(?:\d{1,9}[.)]|[-*+])[ \t]+", re.M)
_NOT_WORD_RE = re.compile(r"[\W_]+")
_SPACE_RE = re.compile(r"\s+")
_MD_LINK_RE = re.compile(r"!?\[([^\]\n]*)\]\(([^()\s]*)\)")
_log = logging.getLogger("streamrelay.teams.graph")
MAX_PERSONAL = 4096
"""Personal chats whose Graph chat id is kept (by Connector conversation id)."""
INSTALLED_PAGES = 5
"""Pages of a person's installed apps read when looking for the bot's installation."""
GUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def normalize(text: str) -> str:
    """The form two texts are compared on: Markdown list markers at line starts dropped, then only letters and digits
    kept, case-folded (``"1. A & b"`` is ``"ab"``). A text with no letter or digit (a preview's first ``**``) keeps
    its other characters, whitespace aside, so that it can still be told apart."""
    words = _NOT_WORD_RE.sub("", _LIST_MARK_RE.sub("", text).casefold())
    return words or _SPACE_RE.sub("", text)


def html_text(content: str) -> str:
    """The text of an HTML body: tags dropped (each ends a line: a list marker after ``<br>`` starts one), entities
    decoded (``"<p>a &lt; b</p>"`` is ``"a < b"``)."""
    return html.unescape(_TAG_RE.sub("\n", content))


def sent_form(fields: Mapping[str, Any]) -> str:
    """What a create sent, normalized: the message activity's ``text`` (taken as written, never as HTML: ``a < b`` is
    text; a Markdown link ``[label](url)`` as its label, as Teams shows it) and each attachment's ``content`` as
    JSON."""
    text = str(fields.get("text") or "")
    if fields.get("textFormat") == "markdown":
        text = _MD_LINK_RE.sub(r"\1", text)
    parts = [text]
    for attachment in fields.get("attachments") or []:
        if isinstance(attachment, Mapping):
            parts.append(json.dumps(attachment.get("content"), ensure_ascii=False))
    return normalize("\n".join(parts))


def shown_form(message: Mapping[str, Any]) -> str:
    """What a Graph chatMessage holds, normalized: the text of its HTML ``body.content`` (:func:`html_text`) and each
    attachment's ``content`` (a card's JSON, as text)."""
    body = message.get("body")
    parts = [html_text(str(body.get("content") or "")) if isinstance(body, Mapping) else ""]
    for attachment in message.get("attachments") or []:
        if isinstance(attachment, Mapping) and isinstance(attachment.get("content"), str):
            parts.append(attachment["content"])
    return normalize("\n".join(parts))


def created_ms(message: Mapping[str, Any]) -> int | None:
    """A chatMessage's ``createdDateTime`` in Unix milliseconds, None when absent or unreadable."""
    raw = message.get("createdDateTime")
    if not isinstance(raw, str):
        return None
    try:
        from datetime import datetime

        return round(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def sender_app(message: Mapping[str, Any]) -> str | None:
    """The application id of a chatMessage's sender (``from.application.id``), None for a person or the system."""
    sender = message.get("from")
    application = sender.get("application") if isinstance(sender, Mapping) else None
    app_id = application.get("id") if isinstance(application, Mapping) else None
    return str(app_id) if app_id else None


def is_match(
    message: Mapping[str, Any], *, app_id: str, want: str, not_before_ms: int | None, taken: frozenset[str]
) -> bool:
    """Whether Graph chatMessage ``message`` is the create that sent ``want`` (:func:`sent_form`) (module docstring).

    Args:
        message: one item of a Graph list's ``value``.
        app_id: the bot's Microsoft App ID.
        want: the create's :func:`sent_form`.
        not_before_ms: the create's start less the clock skew (Unix ms), None when unknown (made before a restart).
        taken: message ids the sidecar holds for other parts.
    """
    if message.get("deletedDateTime") or message.get("messageType", "message") != "message":
        return False
    if str(message.get("id")) in taken or (sender_app(message) or "").lower() != app_id.lower():
        return False
    if not_before_ms is not None:
        created = created_ms(message)
        if created is None or created < not_before_ms:
            return False
    return bool(want) and shown_form(message) == want


@dataclass(frozen=True)
class GraphSettings:
    """A Teams channel's Graph settlement: ``tenant`` (the tenant's id or ``….onmicrosoft.com`` name), ``team`` (the
    team's group id, a GUID, for a channel's conversations; None: a channel's sends are ``unknown``) and ``window_s``
    (how long after a create a settle that finds nothing keeps reading)."""

    tenant: str
    team: str | None = None
    window_s: float = 30.0


class Refused(Exception):
    """Graph refused to be read here (:data:`REFUSED`): the settle answers ``unknown``. ``status``: its HTTP status."""

    def __init__(self, text: str, status: int = 403) -> None:
        super().__init__(text)
        self.status = status


class GraphReader:
    """Reads a Teams conversation's messages through Microsoft Graph with an app-only token (module docstring).

    Args:
        app_id: the bot's Microsoft App ID (the client id).
        secret: its client secret (never shown in ``repr``, logs or errors).
        settings: the channel's :class:`GraphSettings`.
        session: the HTTP session to use (the connection's).
        graph_url: Graph's base (``…/v1.0``); login_url: the login endpoint's base.
        timeout_s: seconds one request may take.
        members: ``members(conversation) -> [aadObjectId, …]``, the Entra object ids of a conversation's members as
            the Connector lists them (the adapter's call); None: personal chats are ``unknown``.
    """

    def __init__(
        self,
        *,
        app_id: str,
        secret: str,
        settings: GraphSettings,
        session: httpx.AsyncClient,
        graph_url: str = GRAPH_URL,
        login_url: str = LOGIN_URL,
        timeout_s: float = 10.0,
        members: Callable[[str], Awaitable[list[str]]] | None = None,
    ) -> None:
        if not (GUID_RE.fullmatch(settings.tenant) or settings.tenant.endswith(".onmicrosoft.com")):
            raise ConfigError(
                "teams: graph_tenant must be the tenant's id (a GUID) or its NAME.onmicrosoft.com domain: an app-only "
                "Graph token is granted by the tenant"
            )
        if settings.team is not None and not GUID_RE.fullmatch(settings.team):
            raise ConfigError("teams: graph_team must be the team's id (its Microsoft 365 group id, a GUID)")
        self.app_id, self.settings = app_id, settings
        self._secret = secret
        self._session = session
        self.graph_url, self.login_url = graph_url.rstrip("/"), login_url.rstrip("/")
        self.timeout_s = timeout_s
        self._access: str | None = None
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self._scrub = Scrubber(secret)
        self._refusals_logged = 0
        self._members = members
        self._personal: dict[str, str] = {}
        """Graph chat ids of personal chats, by Connector conversation id (``a:…``)."""

    def __repr__(self) -> str:
        return f"GraphReader(app_id={self.app_id!r}, tenant={self.settings.tenant!r}, graph_url={self.graph_url!r})"

    __str__ = __repr__

    def path_for(self, conversation: str, thread_id: str | None) -> str | None:
        """The Graph list path of a conversation (module docstring's table), None when Graph cannot name it."""
        base = conversation.split(";", 1)[0]
        if base.endswith(("@thread.tacv2", "@thread.skype")):
            if self.settings.team is None:
                return None
            path = f"/teams/{self.settings.team}/channels/{quote(base, safe='')}/messages"
            return path + f"/{quote(thread_id, safe='')}/replies" if thread_id is not None else path
        if base.startswith("19:") and thread_id is None:
            return f"/chats/{quote(base, safe='')}/messages"
        if base.startswith("a:") and thread_id is None and base in self._personal:
            return f"/chats/{quote(self._personal[base], safe='')}/messages"
        return None

    async def personal_chat(self, conversation: str) -> str:
        """The Graph chat id of personal chat ``conversation`` (``a:…``), found once and kept (module docstring).

        Raises:
            Refused: the Connector or Graph refuses (no permission, no such member), or no member has the app
                installed: the settle answers ``unknown``.
            core.errors.DeliveryError: a 429, 5xx or timeout (asked again later).
        """
        base = conversation.split(";", 1)[0]
        known = self._personal.get(base)
        if known is not None:
            return known
        if self._members is None:
            raise Refused("no member list: a personal chat cannot be named in Graph")
        try:
            users = await self._members(base)
        except (ForbiddenError, TargetNotFoundError, PayloadRejectedError) as exc:
            raise Refused(f"the Connector's member list: {exc}") from None
        for user in users:
            if not GUID_RE.fullmatch(user):
                continue
            chat = await self._installed_chat(user, base)
            if chat is not None:
                self._personal[base] = chat
                while len(self._personal) > MAX_PERSONAL:
                    self._personal.pop(next(iter(self._personal)))
                return chat
        raise Refused(f"no member of {base} has this bot's app installed in Graph")

    async def _installed_chat(self, user: str, conversation: str) -> str | None:
        """The chat between person ``user`` (an Entra object id) and this bot's app, None when the app is not
        installed for them (module docstring)."""
        url: str | None = (
            f"{self.graph_url}/users/{quote(user, safe='')}/teamwork/installedApps"
            "?$expand=teamsAppDefinition($expand=bot)"
        )
        installation: str | None = None
        for _ in range(INSTALLED_PAGES):
            assert url is not None
            token = await self._token(conversation)
            headers = {"Authorization": f"Bearer {token}"}
            answer = await self._request("GET", url, conversation, "graph list installed apps", headers=headers)
            for item in answer.get("value") or []:
                definition = item.get("teamsAppDefinition") if isinstance(item, Mapping) else None
                bot = definition.get("bot") if isinstance(definition, Mapping) else None
                bot_id = bot.get("id") if isinstance(bot, Mapping) else None
                if isinstance(bot_id, str) and bot_id.lower() == self.app_id.lower() and item.get("id"):
                    installation = str(item["id"])
                    break
            next_link = answer.get("@odata.nextLink")
            if installation is not None or not isinstance(next_link, str) or not next_link:
                break
            if not next_link.startswith(self.graph_url + "/"):
                raise UnreadableAnswerError(
                    "teams graph list installed apps: a nextLink outside Graph", platform=PLATFORM, target=conversation
                )
            url = next_link
        if installation is None:
            return None
        token = await self._token(conversation)
        chat_url = (
            f"{self.graph_url}/users/{quote(user, safe='')}/teamwork/installedApps/{quote(installation, safe='')}/chat"
        )
        headers = {"Authorization": f"Bearer {token}"}
        chat = await self._request("GET", chat_url, conversation, "graph get installed app chat", headers=headers)
        chat_id = chat.get("id")
        if not isinstance(chat_id, str) or not chat_id.startswith("19:"):
            raise UnreadableAnswerError(
                "teams graph get installed app chat: no chat id", platform=PLATFORM, target=conversation
            )
        return chat_id

    async def _token(self, target: str) -> str:
        async with self._lock:
            if self._access is not None and time.monotonic() < self._expires_at:
                return self._access
            url = f"{self.login_url}/{self.settings.tenant}/oauth2/v2.0/token"
            form = {
                "grant_type": "client_credentials",
                "client_id": self.app_id,
                "client_secret": self._secret,
                "scope": GRAPH_SCOPE,
            }
            answer = await self._request("POST", url, target, "graph token", data=form)
            token = answer.get("access_token")
            if not isinstance(token, str) or not token:
                raise UnreadableAnswerError("teams graph token: no access_token", platform=PLATFORM, target=target)
            self._scrub = Scrubber(token, self._secret)
            expires = answer.get("expires_in")
            self._access = token
            self._expires_at = time.monotonic() + max(0.0, float(expires or 0) - TOKEN_MARGIN_S)
            return token

    async def _request(self, verb: str, url: str, target: str, what: str, **kwargs: Any) -> dict[str, Any]:
        """One request under :attr:`timeout_s`: its JSON object, :class:`Refused`, or a ``DeliveryError``."""
        error: DeliveryError
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self._session.request(verb, url, **kwargs)
        except TimeoutError:
            error = AnswerTimeoutError(
                f"teams {what}: no answer within {self.timeout_s:g} s", platform=PLATFORM, target=target
            )
            raise error from None
        except httpx.HTTPError as exc:
            error = PlatformUnavailableError(
                self._scrub(f"teams {what}: {type(exc).__name__}: {exc}"), platform=PLATFORM, target=target
            )
            raise error from None
        if response.status_code >= 400:
            answer = ConnectorError.of(response)
            text = self._scrub(f"teams {what}: HTTP {answer.status} {answer.code}: {answer.message}")
            if answer.status == 429:
                wait = answer.retry_after_s if answer.retry_after_s is not None else DEFAULT_RETRY_AFTER_S
                raise RateLimitedError(
                    text, retry_after_s=wait, scope=RateScope.CONVERSATION, platform=PLATFORM, target=target
                )
            if answer.status in REFUSED:
                raise Refused(text, answer.status)
            raise PlatformUnavailableError(text, platform=PLATFORM, target=target)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UnreadableAnswerError(f"teams {what}: the answer is no JSON object", platform=PLATFORM, target=target)
        return body

    def message_path(self, conversation: str, thread_id: str | None, message_id: str) -> str | None:
        """The Graph path of one message (Get chatMessage, https://learn.microsoft.com/en-us/graph/api/chatmessage-get):
        ``/chats/{chat}/messages/{id}``, ``/teams/{team}/channels/{channel}/messages/{id}``, or a channel thread's reply
        ``…/messages/{thread}/replies/{id}``; None where Graph cannot name the conversation (module docstring)."""
        base = conversation.split(";", 1)[0]
        if base.endswith(("@thread.tacv2", "@thread.skype")):
            if self.settings.team is None:
                return None
            path = f"/teams/{self.settings.team}/channels/{quote(base, safe='')}/messages"
            if thread_id is not None and thread_id != message_id:
                return path + f"/{quote(thread_id, safe='')}/replies/{quote(message_id, safe='')}"
            return path + f"/{quote(message_id, safe='')}"
        if base.startswith("19:") and thread_id is None:
            return f"/chats/{quote(base, safe='')}/messages/{quote(message_id, safe='')}"
        return None

    async def read_message(self, conversation: str, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        """Graph's chatMessage ``message_id`` of ``conversation`` (:meth:`message_path`); None when Graph has it no
        more (404). A deleted message comes back with ``deletedDateTime`` set (Graph keeps it, its body empty).

        Raises:
            Refused: Graph cannot name the conversation (a personal chat, a channel without ``graph_team``) or refuses
                to read it (401, 403: no permission, 400).
            core.errors.DeliveryError: 429, 5xx, a timeout, an unreadable answer.
        """
        path = self.message_path(conversation, thread_id, message_id)
        if path is None:
            raise Refused(
                f"teams: Microsoft Graph cannot name conversation {conversation!r} (a personal chat, or a channel "
                "without graph_team)",
                400,
            )
        token = await self._token(conversation)
        try:
            return await self._request(
                "GET",
                self.graph_url + path,
                conversation,
                "graph get message",
                headers={"Authorization": f"Bearer {token}"},
            )
        except Refused as refusal:
            if refusal.status == 404:
                return None
            raise

    async def look(
        self, path: str, conversation: str, *, after_id: str | None, ordered: bool, match: Any
    ) -> tuple[str | None, bool]:
        """Read ``path``'s messages, newest first, until past ``after_id`` and the messages created in its millisecond
        (when ``ordered``: Graph documents the order for chats) or the list's end, at most :data:`MAX_PAGES` pages.

        Returns:
            ``(message id, complete)``: the id of the first message ``match`` accepts (None: none), and whether every
            message back to the bound was read.

        Raises:
            Refused: Graph cannot be read here.
            core.errors.DeliveryError: 429, 5xx, a timeout, an unreadable answer.
        """
        query = f"?$top={PAGE_SIZE}" + ("&$orderby=createdDateTime%20desc" if ordered else "")
        url: str | None = self.graph_url + path + query
        bound_ms: int | None = None  # the bound's createdDateTime once read: its millisecond's messages may follow it
        for _ in range(MAX_PAGES):
            assert url is not None
            token = await self._token(conversation)
            headers = {"Authorization": f"Bearer {token}"}
            answer = await self._request("GET", url, conversation, "graph list messages", headers=headers)
            value = answer.get("value")
            if not isinstance(value, list):
                raise UnreadableAnswerError(
                    "teams graph list messages: no value array", platform=PLATFORM, target=conversation
                )
            for message in value:
                if not isinstance(message, Mapping):
                    continue
                created = created_ms(message)
                if bound_ms is not None and (created is None or created < bound_ms):
                    return None, True  # past the bound message and every message created in its millisecond
                if ordered and after_id is not None and str(message.get("id")) == after_id:
                    bound_ms = created if created is not None else 0
                    continue
                if match(message):
                    return str(message["id"]), True
            next_link = answer.get("@odata.nextLink")
            if not isinstance(next_link, str) or not next_link:
                return None, True
            if not next_link.startswith(self.graph_url + "/"):
                raise UnreadableAnswerError(
                    "teams graph list messages: a nextLink outside Graph", platform=PLATFORM, target=conversation
                )
            url = next_link
        return None, False

    def _refused(self, conversation: str, refusal: Refused) -> Settlement:
        """``unknown``, logged the first times (an operator must see it: the sends stay uncertain until it is
        fixed)."""
        if self._refusals_logged < 3:
            self._refusals_logged += 1
            _log.warning(
                "teams: Microsoft Graph refused to read %s (%s): the uncertain send is reported, not settled; grant "
                "the app ChatMessage.Read.Chat or Chat.Read.All (chats; personal chats also "
                "TeamsAppInstallation.ReadForUser.All), ChannelMessage.Read.Group or ChannelMessage.Read.All "
                "(channels), docs/platforms.md, Microsoft Teams",
                conversation,
                refusal,
            )
        return Settlement(SettleOutcome.UNKNOWN)

    async def settle(
        self,
        conversation: str,
        thread_id: str | None,
        pending: PendingSend,
        fields: Mapping[str, Any],
        sent_at: float | None,
    ) -> Settlement:
        """Settle ``pending`` (it sent ``fields``; ``sent_at``: when this process began the create, Unix seconds, None
        after a restart) by the module docstring's rule.

        Raises:
            core.errors.DeliveryError: Graph failing (429, 5xx, timeout): the core asks again later.
        """
        path = self.path_for(conversation, thread_id)
        if path is None and conversation.startswith("a:") and thread_id is None:
            try:
                await self.personal_chat(conversation)
            except Refused as refusal:
                return self._refused(conversation, refusal)
            path = self.path_for(conversation, thread_id)
        if path is None:
            return Settlement(SettleOutcome.UNKNOWN)
        want = sent_form(fields)
        not_before = None if sent_at is None else round((sent_at - CLOCK_SKEW_S) * 1000)
        taken = pending.known_ids

        def match(message: Mapping[str, Any]) -> bool:
            return is_match(message, app_id=self.app_id, want=want, not_before_ms=not_before, taken=taken)

        ordered = path.startswith("/chats/")
        while True:
            try:
                found, complete = await self.look(
                    path, conversation, after_id=pending.after_id, ordered=ordered, match=match
                )
            except Refused as refusal:
                return self._refused(conversation, refusal)
            if found is not None:
                return Settlement(SettleOutcome.FOUND, found)
            if not complete:
                return Settlement(SettleOutcome.UNKNOWN)
            if sent_at is None or time.time() - sent_at >= self.settings.window_s:
                return Settlement(SettleOutcome.NOT_SENT)
            await asyncio.sleep(min(POLL_S, max(0.0, sent_at + self.settings.window_s - time.time())))
