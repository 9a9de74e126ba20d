"""Embeds as the mock Discord checks them, and what a person reads of a message that shows only embeds.

Rules (https://discord.com/developers/docs/resources/message#embed-object,
https://discord.com/developers/docs/resources/message#embed-object-embed-limits):

- ``title`` at most 256 characters, ``description`` at most 4096, ``footer.text`` 2048, ``author.name`` 256, at
  most 25 ``fields`` (name 256, value 1024); all the text of a message's embeds together at most 6000 characters.
  Past a limit: 400 50035 ``BASE_TYPE_MAX_LENGTH`` on that field.
- ``url``, ``image.url``, ``thumbnail.url``: a string with an ``http``, ``https`` or ``attachment`` scheme, else
  400 50035 ``URL_TYPE_INVALID_URL`` ("Not a well formed URL.").

A message with no content and embeds (a media message, :mod:`adapters.discord.media`) shows its first embed's
``description`` as its text (the caption; ``""`` without one): what ``visible`` and the control API list.
"""

from __future__ import annotations

from typing import Any

from streamrelay.mocks.discord.wire import form_error

MAX_TITLE = 256
MAX_DESCRIPTION = 4096
MAX_FOOTER = 2048
MAX_AUTHOR = 256
MAX_FIELDS = 25
MAX_TOTAL = 6000
URL_SCHEMES = ("http://", "https://", "attachment://")


def check_embeds(embeds: list[dict[str, Any]]) -> None:
    """Check every embed of a create or edit (module docstring).

    Raises:
        ApiError: 400 50035 naming the field (``embeds.0.title``...) and the rule.
    """
    total = 0
    for i, embed in enumerate(embeds):
        total += _text(embed, f"embeds.{i}.title", embed.get("title"), MAX_TITLE)
        total += _text(embed, f"embeds.{i}.description", embed.get("description"), MAX_DESCRIPTION)
        footer, author = embed.get("footer") or {}, embed.get("author") or {}
        total += _text(embed, f"embeds.{i}.footer.text", footer.get("text"), MAX_FOOTER)
        total += _text(embed, f"embeds.{i}.author.name", author.get("name"), MAX_AUTHOR)
        fields = embed.get("fields") or []
        if len(fields) > MAX_FIELDS:
            raise form_error(f"embeds.{i}.fields", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_FIELDS} or fewer in length.")
        for field in fields:
            total += len(str(field.get("name", ""))) + len(str(field.get("value", "")))
        _url(f"embeds.{i}.url", embed.get("url"))
        for part in ("image", "thumbnail"):
            inner = embed.get(part)
            if inner is not None:
                _url(f"embeds.{i}.{part}.url", inner.get("url") if isinstance(inner, dict) else None)
    if total > MAX_TOTAL:
        raise form_error("embeds", "BASE_TYPE_MAX_LENGTH", f"Embed size exceeds maximum size of {MAX_TOTAL}")


def shown_text(content: str, embeds: list[Any]) -> str:
    """What a person reads of a message: its ``content``, or for one with only embeds the first one's
    ``description`` (a media message's caption; ``""`` without one)."""
    if content.strip() or not embeds or not isinstance(embeds[0], dict):
        return content
    description = embeds[0].get("description")
    return description if isinstance(description, str) else ""


def _text(embed: dict[str, Any], name: str, value: Any, limit: int) -> int:
    if value is None:
        return 0
    if not isinstance(value, str):
        raise form_error(name, "BASE_TYPE_BAD_TYPE", "Must be a string.")
    if len(value) > limit:
        raise form_error(name, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")
    return len(value)


def _url(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.startswith(URL_SCHEMES):
        raise form_error(name, "URL_TYPE_INVALID_URL", "Not a well formed URL.")
