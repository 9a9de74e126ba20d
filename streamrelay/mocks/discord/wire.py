"""Discord's wire shapes for the mock: ids, tokens, error bodies, message objects, request validation.

Error bodies are ``{"code": N, "message": "…"}`` (plus ``errors`` for form errors), with the JSON error codes
of https://discord.com/developers/docs/topics/opcodes-and-status-codes#json.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

MAX_CONTENT_CHARS = 2000
"""``content`` limit in characters (code points): https://discord.com/developers/docs/resources/message#create-message."""

DISCORD_EPOCH_MS = 1_420_070_400_000
"""First millisecond of 2015: the epoch of snowflake ids (https://discord.com/developers/docs/reference#snowflakes)."""

PERSON_USER_ID = "80351110224678912"
"""The author of messages seeded with :meth:`~mocks.discord.MockDiscord.post_user_message`."""

TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
"""A bot token: three dot-separated base64url parts; the first is the bot's user id in base64."""

_KNOWN_MESSAGES = {
    "Unknown Channel": 10003,
    "Unknown Message": 10008,
    "Unknown Webhook": 10015,
    "Missing Access": 50001,
    "Cannot edit a message authored by another user": 50005,
    "Cannot send an empty message": 50006,
    "Cannot send messages to this user": 50007,
    "Missing Permissions": 50013,
    "Invalid Webhook Token": 50027,
    "Invalid Form Body": 50035,
}
_DEFAULT_ERROR = {
    400: (50035, "Invalid Form Body"),
    401: (0, "401: Unauthorized"),
    403: (50013, "Missing Permissions"),
    404: (10003, "Unknown Channel"),
    405: (0, "405: Method Not Allowed"),
}


class ApiError(Exception):
    """An error answer: HTTP ``status``, JSON ``body``, extra ``headers``; ``retry_after_s`` on a 429."""

    def __init__(
        self,
        status: int,
        body: dict[str, Any],
        *,
        retry_after_s: float | None = None,
        is_global: bool = False,
        scope: str = "user",
    ) -> None:
        super().__init__(str(body.get("message")))
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s
        self.is_global = is_global
        self.scope = scope


def error(status: int, code: int, message: str) -> ApiError:
    """A plain Discord error ``{"code", "message"}``."""
    return ApiError(status, {"code": code, "message": message})


def form_error(field_name: str, code: str, message: str) -> ApiError:
    """400 code 50035 ``Invalid Form Body`` naming the field and the validation code."""
    errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
    return ApiError(400, {"code": 50035, "message": "Invalid Form Body", "errors": errors})


def rate_limited(retry_after_s: float, *, is_global: bool, scope: str) -> ApiError:
    """A 429: ``{"message", "retry_after": float seconds, "global"}``
    (https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit)."""
    retry_after_s = max(0.001, round(retry_after_s, 3))
    body = {"message": "You are being rate limited.", "retry_after": retry_after_s, "global": is_global}
    return ApiError(429, body, retry_after_s=retry_after_s, is_global=is_global, scope=scope)


UNAUTHORIZED = (401, 0, "401: Unauthorized")
NOT_FOUND = (404, 0, "404: Not Found")
METHOD_NOT_ALLOWED = (405, 0, "405: Method Not Allowed")
UNKNOWN_CHANNEL = (404, 10003, "Unknown Channel")
UNKNOWN_MESSAGE = (404, 10008, "Unknown Message")
UNKNOWN_WEBHOOK = (404, 10015, "Unknown Webhook")
INVALID_WEBHOOK_TOKEN = (401, 50027, "Invalid Webhook Token")
UNKNOWN_INTERACTION = (404, 10062, "Unknown interaction")
ALREADY_ACKNOWLEDGED = (400, 40060, "Interaction has already been acknowledged.")
EMPTY = (400, 50006, "Cannot send an empty message")
NOT_AUTHOR = (403, 50005, "Cannot edit a message authored by another user")
MISSING_PERMISSIONS = (403, 50013, "Missing Permissions")
INVALID_JSON = (400, 50109, "The request body contains invalid JSON.")


def fail(shape: tuple[int, int, str]) -> ApiError:
    """One of the module's ``(status, code, message)`` shapes as an :class:`ApiError`."""
    return error(*shape)


def fault_error(status: int, description: str | None, retry_after_s: float | None, *, message_route: bool) -> ApiError:
    """A scripted fault in Discord's shapes.

    429 → the rate-limit body (``global`` false, scope ``user``); >= 500 → that status with
    ``{"code": 0, "message": description or the status phrase}``; another 4xx → ``{"code", "message"}`` with
    the description as message and the code Discord uses for it (e.g. ``Missing Access`` → 50001), or the
    status's usual error when there is no description (404 on a message route → 10008 ``Unknown Message``).
    """
    if status == 429:
        return rate_limited(retry_after_s or 1.0, is_global=False, scope="user")
    if status >= 500:
        return error(status, 0, description or _phrase(status))
    if status == 404 and message_route and description is None:
        return fail(UNKNOWN_MESSAGE)
    code, default = _DEFAULT_ERROR.get(status, (0, f"{status}: {_phrase(status)}"))
    if description is not None:
        code = _KNOWN_MESSAGES.get(description, code)
    return error(status, code, description or default)


_CLOUDFLARE_PHRASES = {
    520: "Unknown Error",
    521: "Web Server Is Down",
    522: "Connection Timed Out",
    524: "A Timeout Occurred",
}


def _phrase(status: int) -> str:
    """The reason phrase of ``status`` (Cloudflare's 52x included), or ``Error``."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return _CLOUDFLARE_PHRASES.get(status, "Error")


# ---------------------------------------------------------------- ids and tokens


def is_snowflake(value: str) -> bool:
    """Digits only, a positive 64-bit integer."""
    return value.isascii() and value.isdigit() and 0 < int(value) < 2**64


def check_snowflake(name: str, value: str) -> str:
    """``value`` if it is a snowflake, else 400 50035 ``NUMBER_TYPE_COERCE`` like Discord."""
    if not is_snowflake(value):
        raise form_error(name, "NUMBER_TYPE_COERCE", f'Value "{value}" is not snowflake.')
    return value


def bot_id_from_token(token: str) -> str | None:
    """The bot's user id encoded in the token's first part, or None when the token is not shaped like one."""
    if not TOKEN_RE.match(token):
        return None
    first = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return decoded if is_snowflake(decoded) else None


class Snowflakes:
    """Increasing snowflake ids: milliseconds since the Discord epoch << 22, plus an increment."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> str:
        stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._last = max(self._last + 1, stamp)
        return str(self._last)


# ---------------------------------------------------------------- stored messages and JSON


@dataclass
class StoredMessage:
    """A message as a person sees it: ``content`` exactly as sent (Discord renders its Markdown)."""

    id: str
    channel_id: str
    author_id: str
    content: str
    timestamp: datetime.datetime
    embeds: list[Any] = field(default_factory=list)
    edited_timestamp: datetime.datetime | None = None
    reference: str | None = None
    allowed_mentions: dict[str, Any] | None = None
    mention_everyone: bool = False
    mentions: list[str] = field(default_factory=list)
    webhook_id: str | None = None
    nonce: int | str | None = None
    deleted: bool = False
    components: list[dict[str, Any]] = field(default_factory=list)
    """Its action rows of buttons (:mod:`mocks.discord.components`)."""


def user_json(user_id: str, *, bot: bool = True, name: str | None = None) -> dict[str, Any]:
    """A user object (https://discord.com/developers/docs/resources/user#user-object)."""
    body: dict[str, Any] = {
        "id": user_id,
        "username": name or ("streamrelay-mock" if bot else "person"),
        "discriminator": "0",
        "global_name": None,
        "avatar": None,
    }
    if bot:
        body["bot"] = True
    return body


def current_user_json(bot_id: str) -> dict[str, Any]:
    """``GET /users/@me`` for a bot."""
    return {**user_json(bot_id), "verified": True, "flags": 0, "mfa_enabled": False, "locale": "en-US"}


def application_json(bot_id: str) -> dict[str, Any]:
    """``GET /oauth2/applications/@me`` (https://discord.com/developers/docs/resources/application)."""
    return {
        "id": bot_id,
        "name": "streamrelay mock",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": user_json(PERSON_USER_ID, bot=False),
        "verify_key": "0" * 64,
        "flags": 0,
        "team": None,
    }


def message_json(message: StoredMessage, referenced: StoredMessage | None = None) -> dict[str, Any]:
    """A message object (https://discord.com/developers/docs/resources/message#message-object)."""
    webhook = message.webhook_id is not None
    body: dict[str, Any] = {
        "id": message.id,
        "type": 19 if message.reference is not None else 0,
        "channel_id": message.channel_id,
        "author": user_json(message.author_id, bot=message.author_id != PERSON_USER_ID, name=None),
        "content": message.content,
        "timestamp": message.timestamp.isoformat(),
        "edited_timestamp": message.edited_timestamp.isoformat() if message.edited_timestamp else None,
        "tts": False,
        "mention_everyone": message.mention_everyone,
        "mentions": [user_json(uid, bot=False) for uid in message.mentions],
        "mention_roles": [],
        "attachments": [],
        "embeds": message.embeds,
        "pinned": False,
        "flags": 0,
        "components": message.components,
    }
    if webhook:
        body["webhook_id"] = message.webhook_id
        body["author"]["username"] = "streamrelay webhook"
    if message.nonce is not None:
        body["nonce"] = message.nonce
    if message.reference is not None:
        body["message_reference"] = {"type": 0, "message_id": message.reference, "channel_id": message.channel_id}
        body["referenced_message"] = message_json(referenced) if referenced and not referenced.deleted else None
    return body


# ---------------------------------------------------------------- request bodies


def content_of(body: dict[str, Any], *, required: bool) -> str | None:
    """``content`` validated: a string of at most 2000 code points (``None`` when absent and not required).

    Raises:
        ApiError: 50035 ``BASE_TYPE_BAD_TYPE`` / ``BASE_TYPE_MAX_LENGTH``.
    """
    content = body.get("content")
    if content is None:
        return "" if required else None
    if not isinstance(content, str):
        raise form_error("content", "BASE_TYPE_BAD_TYPE", "Must be a string.")
    if len(content) > MAX_CONTENT_CHARS:
        raise form_error("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT_CHARS} or fewer in length.")
    return content


def embeds_of(body: dict[str, Any]) -> list[Any] | None:
    """``embeds`` (a list, at most 10), or None when absent."""
    embeds = body.get("embeds")
    if embeds is None:
        return None
    if not isinstance(embeds, list) or not all(isinstance(e, dict) for e in embeds):
        raise form_error("embeds", "BASE_TYPE_BAD_TYPE", "Must be an array of embed objects.")
    if len(embeds) > 10:
        raise form_error("embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
    return embeds


def allowed_mentions_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """``allowed_mentions`` validated (https://discord.com/developers/docs/resources/message#allowed-mentions-object):
    ``parse`` only ``everyone`` / ``users`` / ``roles``, and never ``users`` in ``parse`` together with a
    ``users`` list (likewise roles)."""
    value = body.get("allowed_mentions")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise form_error("allowed_mentions", "BASE_TYPE_BAD_TYPE", "Must be an object.")
    parse = value.get("parse", [])
    if not isinstance(parse, list) or not set(parse) <= {"everyone", "users", "roles"}:
        raise form_error("allowed_mentions.parse", "BASE_TYPE_CHOICES", "Value must be one of everyone, users, roles.")
    for kind in ("users", "roles"):
        ids = value.get(kind)
        if ids is not None and not (isinstance(ids, list) and all(is_snowflake(str(i)) for i in ids)):
            raise form_error(f"allowed_mentions.{kind}", "BASE_TYPE_BAD_TYPE", "Must be an array of snowflakes.")
        if ids and kind in parse:
            detail = f"parse:[{kind}] and {kind}: [ids] are mutually exclusive."
            raise form_error("allowed_mentions", "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", detail)
    return value


_USER_MENTION = re.compile(r"<@!?(\d+)>")


def pings(content: str, allowed: dict[str, Any] | None) -> tuple[bool, list[str]]:
    """Who ``content`` notifies under ``allowed`` mentions: ``(@everyone/@here, user ids)``.

    No ``allowed_mentions`` means every mention in the content pings.
    """
    parse = {"everyone", "users", "roles"} if allowed is None else set(allowed.get("parse", []))
    listed = {str(i) for i in (allowed or {}).get("users", [])}
    everyone = "everyone" in parse and ("@everyone" in content or "@here" in content)
    users = [uid for uid in dict.fromkeys(_USER_MENTION.findall(content)) if "users" in parse or uid in listed]
    return everyone, users


def reference_of(body: dict[str, Any]) -> tuple[str, bool] | None:
    """``message_reference`` as ``(message id, fail_if_not_exists)`` (default True), or None.

    Raises:
        ApiError: 50035 when it is not an object with a snowflake ``message_id``.
    """
    value = body.get("message_reference")
    if value is None:
        return None
    if not isinstance(value, dict) or not is_snowflake(str(value.get("message_id", ""))):
        raise form_error("message_reference", "BASE_TYPE_REQUIRED", "This field is required")
    fail_if_missing = value.get("fail_if_not_exists", True)
    return str(value["message_id"]), fail_if_missing is not False


def nonce_of(body: dict[str, Any]) -> int | str | None:
    """``nonce`` as sent (echoed as is in the message object), or None: an integer or a string of at most 25
    characters (https://discord.com/developers/docs/resources/message#create-message).

    Raises:
        ApiError: 400 50035 ``NONCE_TYPE_INVALID_TYPE`` (not an integer or a string), ``NONCE_TYPE_TOO_LONG``
            (more than 25 characters, an integer's digits counted) (codes as Discord names them:
            https://github.com/discord/discord-api-docs/pull/1158).
    """
    nonce = body.get("nonce")
    if nonce is None:
        return None
    if isinstance(nonce, bool) or not isinstance(nonce, int | str):
        raise form_error("nonce", "NONCE_TYPE_INVALID_TYPE", "This field must be a string or integer.")
    if len(str(nonce)) > 25:
        raise form_error("nonce", "NONCE_TYPE_TOO_LONG", "Must be 25 or fewer characters long.")
    return nonce
