"""What the mock's Microsoft Graph reads answer: a stored activity as a Graph ``chatMessage``, and a page of them.

The Graph routes of :class:`mocks.teams.MockTeams` read the same stored activities the Connector routes wrote, so a
message the mock stored and then answered 5xx for (or held past the client's timeout) is there to be found:

- ``GET /v1.0/chats/{chat-id}/messages`` (https://learn.microsoft.com/en-us/graph/api/chat-list-messages): ``$top``
  at most 50 (400 past it), ``$orderby`` ``lastModifiedDateTime desc`` (the default) or ``createdDateTime desc`` (an
  ascending order is 400, as Graph supports descending only); ``@odata.nextLink`` while more remain;
- ``GET /v1.0/teams/{team-id}/channels/{channel-id}/messages`` (https://learn.microsoft.com/en-us/graph/api/channel-list-messages):
  the channel's root posts without their replies, 20 a page by default, ``$top`` at most 50; newest created first
  (Graph documents no order for it: the mock picks one);
- ``GET /v1.0/teams/{team-id}/channels/{channel-id}/messages/{message-id}/replies``
  (https://learn.microsoft.com/en-us/graph/api/chatmessage-list-replies): a post's replies, ``$top`` at most 50.

- ``GET /v1.0/users/{user-id}/teamwork/installedApps`` (https://learn.microsoft.com/en-us/graph/api/userteamwork-list-installedapps)
  and ``…/installedApps/{installation-id}/chat``
  (https://learn.microsoft.com/en-us/graph/api/userscopeteamsappinstallation-get-chat): a personal chat's person
  (:func:`person_of`, the ``aadObjectId`` the Connector's member list gives) has the calling app installed; its
  chat is ``19:{user}_{app}@unq.gbl.spaces`` (:func:`personal_chat_id`), whose messages are the ``a:…``
  conversation's.

A message (https://learn.microsoft.com/en-us/graph/api/resources/chatmessage): ``id`` (the activity id), ``replyToId``,
``messageType`` ``message``, ``createdDateTime`` / ``lastModifiedDateTime`` (ISO 8601, UTC, milliseconds),
``deletedDateTime`` for a deleted one (its body empty), ``from`` (``application`` with the bot's app id for a bot's
message, https://learn.microsoft.com/en-us/graph/api/resources/chatmessagefromidentityset; ``user`` for a person's),
``body`` ``{"contentType": "html", "content"}`` and ``attachments``. The HTML body is the activity's text escaped, its
line breaks as ``<br>``, in one ``<p>``, a Markdown link as an ``<a>``
(Teams' own rendering of Markdown to HTML is richer: a reader must compare on a
normalized form); a card is an ``<attachment id="…"></attachment>`` in the body and the card's JSON as a string in
``attachments[].content``.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import re
import uuid
from typing import Any
from urllib.parse import urlencode

DEFAULT_TOP = 20
"""Messages per page when ``$top`` is not given (Graph's default for channel messages)."""
MAX_TOP = 50
"""The largest ``$top`` Graph allows for these lists."""


ONENOTE_APP = "0d820ecd-def2-4297-adad-78056cde7c78"
"""Another app every person has installed (Graph's example's OneNote): a reader must pick the bot's by its bot id."""
_PERSONAL_RE = re.compile(r"^19:([0-9a-f-]{36})_([0-9a-f-]{36})@unq\.gbl\.spaces$")


def person_of(conversation: str) -> str:
    """The Entra object id (a GUID) of the person of mock conversation ``conversation``: derived from its id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "streamrelay-mock-teams:" + conversation.split(";", 1)[0]))


def installation_id(user: str, app: str) -> str:
    """A user-scope installation's id, as Graph's examples show it: base64 of ``{user}##{app}``."""
    return base64.b64encode(f"{user}##{app}".encode()).decode()


def installed_app(installation: str, user: str) -> str | None:
    """The app an installation id of ``user`` names, None when it is no such id."""
    try:
        owner, sep, app = base64.b64decode(installation.encode(), validate=True).decode().partition("##")
    except ValueError:
        return None
    return app.lower() if sep and owner == user else None


def personal_chat_id(user: str, app: str) -> str:
    """The Graph id of the one-on-one chat of ``user`` and ``app`` (Graph's example's form)."""
    return f"19:{user}_{app}@unq.gbl.spaces"


def personal_parts(chat: str) -> tuple[str, str] | None:
    """``(user, app)`` of a one-on-one chat's Graph id, None for another chat."""
    match = _PERSONAL_RE.match(chat.lower())
    return (match.group(1), match.group(2)) if match else None


def iso(ms: int) -> str:
    """Unix milliseconds as Graph writes a date: ``2026-12-07T10:34:26.123Z``."""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_MD_LINK_RE = re.compile(r"\[([^\]\n]*)\]\(([^()\s]*)\)")


def html_body(text: str, *, markdown: bool = False) -> str:
    """A text as the mock's HTML body: escaped, line breaks as ``<br>``, in one paragraph; with ``markdown`` (the
    activity's ``textFormat``) a link ``[label](url)`` becomes ``<a href="url">label</a>``, as Teams shows it."""
    body = html.escape(text, quote=False)
    if markdown:
        body = _MD_LINK_RE.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', body)
    return "<p>" + body.replace("\n", "<br>") + "</p>"


def chat_message(
    *,
    activity_id: str,
    payload: dict[str, Any],
    reply_to: str | None,
    created_ms: int,
    modified_ms: int,
    deleted: bool,
    app_id: str | None,
    chat_id: str | None,
) -> dict[str, Any]:
    """One stored activity as a Graph ``chatMessage`` (module docstring). ``app_id`` None: a person's message."""
    sender: dict[str, Any]
    if app_id is not None:
        sender = {
            "application": {
                "@odata.type": "#microsoft.graph.teamworkApplicationIdentity",
                "id": app_id,
                "displayName": "streamrelay (mock)",
                "applicationIdentityType": "bot",
            },
            "device": None,
            "user": None,
        }
    else:
        sender = {"application": None, "device": None, "user": {"id": "mock-person", "displayName": "A person"}}
    attachments: list[dict[str, Any]] = []
    content = ""
    if not deleted:
        text = payload.get("text")
        if isinstance(text, str) and text:
            content = html_body(text, markdown=payload.get("textFormat") == "markdown")
        for attachment in payload.get("attachments") or []:
            if not isinstance(attachment, dict):
                continue
            attachment_id = f"{activity_id}-{len(attachments)}"
            content += f'<attachment id="{attachment_id}"></attachment>'
            attachments.append(
                {
                    "id": attachment_id,
                    "contentType": attachment.get("contentType"),
                    "content": json.dumps(attachment.get("content"), ensure_ascii=False),
                    "contentUrl": None,
                    "name": None,
                }
            )
    return {
        "id": activity_id,
        "replyToId": reply_to,
        "messageType": "message",
        "createdDateTime": iso(created_ms),
        "lastModifiedDateTime": iso(modified_ms),
        "deletedDateTime": iso(modified_ms) if deleted else None,
        "chatId": chat_id,
        "from": sender,
        "body": {"contentType": "html", "content": content},
        "attachments": attachments,
    }


def skiptoken(offset: int) -> str:
    """The opaque ``$skiptoken`` of the page starting at ``offset``."""
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def offset_of(token: str | None) -> int | None:
    """The offset a ``$skiptoken`` names (0 for none), None when it is not one of the mock's."""
    if not token:
        return 0
    try:
        kind, _, number = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        return int(number) if kind == "offset" and int(number) >= 0 else None
    except ValueError:
        return None


def page(messages: list[dict[str, Any]], *, url: str, query: dict[str, str], top: int, offset: int) -> dict[str, Any]:
    """One page of ``messages`` from ``offset``: ``value``, and ``@odata.nextLink`` (``url`` with the same query and
    the next ``$skiptoken``) while more remain."""
    answer: dict[str, Any] = {
        "@odata.count": len(messages[offset : offset + top]),
        "value": messages[offset : offset + top],
    }
    if offset + top < len(messages):
        answer["@odata.nextLink"] = url + "?" + urlencode({**query, "$skiptoken": skiptoken(offset + top)})
    return answer
