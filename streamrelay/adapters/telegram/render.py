"""Text rendering for Telegram: plain text, or Markdown as text + entities (never ``parse_mode``), and its length.

Entities carry UTF-16 offsets and cannot fail to parse, unlike ``parse_mode`` MarkdownV2/HTML
(https://core.telegram.org/bots/api#formatting-options). The conversion is telegramify-markdown's
``convert`` (https://github.com/sudoskys/telegramify-markdown).

Agent text is made inert first: invisible characters are removed (:func:`adapters.invisible.strip_invisible`), and a
link entity keeps only a target a person can safely follow (https://core.telegram.org/bots/api#formatting-options,
``text_link``: "URL that will be opened after user taps on the text"): ``http`` and ``https`` always; ``tg://user?id=``
(a mention: it opens, and in groups notifies, that user) only when the channel allows mentions; other ``tg://`` links
(join a chat, resolve a username) only when it allows platform links (:class:`core.ports.MarkupPermissions`);
``javascript:``, ``data:``, ``file:`` and every other scheme never. A refused link loses its link, never its text.
A ``text_mention`` entity (a user by id) is kept only with mentions allowed.
"""

from __future__ import annotations

from typing import NamedTuple

import telegramify_markdown
from aiogram.types import MessageEntity
from telegramify_markdown.config import RenderConfig

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.core.ports import MarkupPermissions, TextFormat
from streamrelay.core.units import LengthUnit, text_units

INERT = MarkupPermissions()
"""Neither mentions nor platform links: the default of every channel."""


def _render_config() -> RenderConfig:
    """An isolated config (the library's global one is shared mutable state).

    Heading markers are blanked: the library prefixes headings with emoji (📌, ✏, 📚, 🔖), which would add
    text the agent never wrote; headings stay bold + underlined.
    """
    config = RenderConfig.isolated()
    symbols = config.markdown_symbol
    symbols.heading_level_1 = symbols.heading_level_2 = ""
    symbols.heading_level_3 = symbols.heading_level_4 = ""
    return config


_CONFIG = _render_config()


class Rendered(NamedTuple):
    """What a sendMessage / editMessageText (or a caption) carries for one text: ``text`` and ``entities`` (None when
    there are none to send), and ``units``, the length Telegram counts: UTF-16 units of the text after entity
    parsing (the 1-4096 limit, https://core.telegram.org/bots/api#sendmessage)."""

    text: str
    entities: list[MessageEntity] | None
    units: int


def link_allowed(url: str, allowed: MarkupPermissions = INERT) -> bool:
    """Whether a ``text_link`` to ``url`` may stay a link (module docstring)."""
    scheme, colon, rest = url.partition(":")
    scheme = scheme.strip().lower()
    if not colon:
        return False
    if scheme in ("http", "https"):
        return True
    if scheme == "tg":
        if rest.lstrip("/").lower().startswith("user"):
            return allowed.mentions
        return allowed.platform_links
    return False


def _entity_allowed(entity: MessageEntity, allowed: MarkupPermissions) -> bool:
    if entity.type == "text_link":
        return link_allowed(entity.url or "", allowed)
    if entity.type == "text_mention":
        return allowed.mentions
    return True


def render(text: str, fmt: TextFormat, allowed: MarkupPermissions = INERT) -> Rendered:
    """Render ``text`` for ``sendMessage`` / ``editMessageText`` (pure: the adapter keeps the renderings of the texts
    in flight, :class:`adapters.rendering.RenderCache`).

    Args:
        text: the text as the agent wrote it (Markdown for ``markdown`` / ``stripped``).
        fmt: ``plain`` sends it as is; ``markdown`` converts to text + entities; ``stripped`` converts and
            drops the entities (the fallback after a formatting rejection).
        allowed: the mentions and links the channel keeps (module docstring); invisible characters are removed
            in every format.

    Returns:
        ``(text, entities, units)``; ``entities`` is ``None`` when there are none to send.
    """
    text = strip_invisible(text)
    if fmt is TextFormat.PLAIN:
        return Rendered(text, None, text_units(text, LengthUnit.UTF16))
    plain, entities = telegramify_markdown.convert(text, config=_CONFIG)
    units = text_units(plain, LengthUnit.UTF16)
    if fmt is TextFormat.STRIPPED or not entities:
        return Rendered(plain, None, units)
    kept = [MessageEntity.model_validate(entity.to_dict()) for entity in entities]
    kept = [entity for entity in kept if _entity_allowed(entity, allowed)]
    return Rendered(plain, kept or None, units)
