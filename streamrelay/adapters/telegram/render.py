"""Text rendering for Telegram: plain text, or Markdown as text + entities (never ``parse_mode``), and its length.

Entities carry UTF-16 offsets and cannot fail to parse, unlike ``parse_mode`` MarkdownV2/HTML
(https://core.telegram.org/bots/api#formatting-options). The conversion is telegramify-markdown's
``convert`` (https://github.com/sudoskys/telegramify-markdown).
"""

from __future__ import annotations

from typing import NamedTuple

import telegramify_markdown
from aiogram.types import MessageEntity
from telegramify_markdown.config import RenderConfig

from streamrelay.core.ports import TextFormat
from streamrelay.core.units import LengthUnit, text_units


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


def render(text: str, fmt: TextFormat) -> Rendered:
    """Render ``text`` for ``sendMessage`` / ``editMessageText`` (pure: the adapter keeps the renderings of the texts
    in flight, :class:`adapters.rendering.RenderCache`).

    Args:
        text: the text as the agent wrote it (Markdown for ``markdown`` / ``stripped``).
        fmt: ``plain`` sends it as is; ``markdown`` converts to text + entities; ``stripped`` converts and
            drops the entities (the fallback after a formatting rejection).

    Returns:
        ``(text, entities, units)``; ``entities`` is ``None`` when there are none to send.
    """
    if fmt is TextFormat.PLAIN:
        return Rendered(text, None, text_units(text, LengthUnit.UTF16))
    plain, entities = telegramify_markdown.convert(text, config=_CONFIG)
    units = text_units(plain, LengthUnit.UTF16)
    if fmt is TextFormat.STRIPPED or not entities:
        return Rendered(plain, None, units)
    return Rendered(plain, [MessageEntity.model_validate(entity.to_dict()) for entity in entities], units)
