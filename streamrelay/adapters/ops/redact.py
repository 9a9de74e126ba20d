"""Secrets out of every log line: the redaction the logging setup (:mod:`adapters.ops.logs`) runs last.

Two layers, because either alone misses something:

- **Known values**: the secrets this process holds (the ingest token ``STREAMRELAY_TOKEN``, the metrics token, each
  channel's bot token and the secret part of a Telegram token) are registered at start-up and replaced wherever
  they appear, whatever printed them (an SDK's debug line, an exception's text, a URL in a traceback).
- **Shapes**: what a secret looks like where no value was registered (another process's token, a run's read token,
  which is derived per run): Telegram Bot API URLs ``/bot<id>:<secret>/``, ``Authorization`` headers and
  ``Bearer`` / ``Bot`` credentials, ``token=`` / ``access_token=`` query parameters, Slack ``xox?-`` / ``xapp-``
  tokens, Discord bot tokens (three base64url parts joined by dots), a URL's ``user:password@``; and the whole
  value of a mapping key that names a secret (``Authorization``, ``Cookie``, ``*token``, ``*secret``, ``password``,
  ``api_key``).

Every match becomes ``<redacted>``. A log line never carries a secret in any form this module knows; a value
shorter than :data:`MIN_SECRET_CHARS` is not registered (replacing so short a string would garble every line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

REDACTED = "<redacted>"
"""What a secret becomes."""

MIN_SECRET_CHARS = 8
"""Known values shorter than this are not registered."""

_TOKEN_CHARS = r"[A-Za-z0-9._~+/=:\-]"
"""Characters of a credential (RFC 6750 b64token plus ``:``); never a quote, a comma or a space, so a JSON line
stays well-formed after redaction."""

_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Telegram Bot API URLs: https://api.telegram.org/bot<token>/METHOD (https://core.telegram.org/bots/api#making-requests)
    (re.compile(r"/bot\d+:[^/\s\"']+"), f"/bot{REDACTED}"),
    # A Telegram token on its own: <bot id>:<35 characters> (https://core.telegram.org/bots/api#authorizing-your-bot)
    (re.compile(r"\b\d{5,}:[A-Za-z0-9_-]{30,}"), REDACTED),
    # Authorization headers as dicts, reprs or raw headers print them
    (
        re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|bot|basic)\s+)?" + _TOKEN_CHARS + "+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)" + _TOKEN_CHARS + "+"), rf"\1{REDACTED}"),
    # Query parameters: the live page's read token, OAuth-style access tokens
    (re.compile(r"(?i)([?&](?:token|access_token|api_key|key)=)[^&\s\"'#]+"), rf"\1{REDACTED}"),
    # Credentials in a URL's authority: scheme://user:password@host (RFC 3986 §3.2.1), whatever printed the URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#@\s\"'<>]+@"), rf"\1{REDACTED}@"),
    # Slack tokens (https://docs.slack.dev/authentication/tokens)
    (re.compile(r"\bx(?:ox[abposre]|app)-[A-Za-z0-9-]+"), REDACTED),
    # Discord bot tokens: base64url(user id).timestamp.hmac
    (re.compile(r"\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}"), REDACTED),
)


def _scoped(pattern: re.Pattern[str]) -> str:
    """``pattern`` as a group that keeps its own flags inside a larger pattern (``(?i:...)``)."""
    flags = "".join(c for flag, c in ((re.I, "i"), (re.M, "m"), (re.S, "s"), (re.X, "x")) if pattern.flags & flag)
    return f"(?{flags}:{re.sub(r'^[(][?][aiLmsux]+[)]', '', pattern.pattern)})"


_ANY_SHAPE = re.compile("|".join(_scoped(pattern) for pattern, _ in _SHAPES))
"""Matches where any of :data:`_SHAPES` matches: one search tells a value with no secret shape (nearly every one: a
channel's name, a method, an outcome) from one the substitutions must run on."""


_SECRET_KEYS = re.compile(
    r"(?i)(?:proxy-)?authorization|x-api-key|api[_-]?key|[a-z_-]*token|[a-z_-]*secret|password|(?:set-)?cookie"
)
"""Mapping keys whose value is a secret whatever it looks like (a headers dict, a ``token`` field)."""


class Redactor:
    """Replaces secrets in text and in log event dicts (a structlog processor).

    Args:
        secrets: known secret values to replace wherever they appear (shorter than :data:`MIN_SECRET_CHARS`:
            ignored).
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._known: list[str] = []
        for secret in secrets:
            self.add(secret)

    def __repr__(self) -> str:
        return f"Redactor({len(self._known)} known secrets)"  # never the values

    def add(self, secret: str) -> None:
        """Register one more secret value (e.g. a token read from the environment); a Telegram token's secret part
        (after the ``:``) is registered with it."""
        candidates = [secret]
        bot_id, colon, rest = secret.partition(":")
        if colon and bot_id.isdigit():
            candidates.append(rest)
        for value in candidates:
            if len(value) >= MIN_SECRET_CHARS and value not in self._known:
                self._known.append(value)
        self._known.sort(key=len, reverse=True)  # a token before its own secret part

    def known_only(self, text: str) -> str:
        """``text`` with the registered values replaced (a rendered line: shapes were handled before rendering)."""
        for secret in self._known:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def text(self, text: str) -> str:
        """``text`` with every known value and every secret shape replaced by ``<redacted>``."""
        if _ANY_SHAPE.search(text) is not None:
            for pattern, replacement in _SHAPES:  # shapes first: "Bearer <value>" goes whole
                text = pattern.sub(replacement, text)
        return self.known_only(text)

    def value(self, value: Any) -> Any:
        """``value`` redacted: strings, and the strings inside mappings, lists and tuples (other values as they
        are: a number or a bool carries no secret)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self._item(key, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(item) for item in value)
        if isinstance(value, bytes | bytearray):
            return self.text(bytes(value).decode("utf-8", "replace"))
        return value

    def _item(self, key: object, item: Any) -> Any:
        if isinstance(key, str) and _SECRET_KEYS.fullmatch(key) and isinstance(item, str | bytes) and item:
            return REDACTED
        return self.value(item)

    def __call__(self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        """The structlog processor: every value of the event dict redacted (keys starting with ``_`` are structlog's
        own bookkeeping, e.g. the stdlib ``_record``, and are left alone). Run it after ``format_exc_info`` so a
        traceback is redacted too."""
        for key, item in list(event_dict.items()):
            if not key.startswith("_"):
                event_dict[key] = self._item(key, item)
        return event_dict
