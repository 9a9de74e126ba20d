"""Text rendering for Telegram: plain text, or Markdown as text + entities (never ``parse_mode``).

Entities carry UTF-16 offsets and cannot fail to parse, unlike ``parse_mode`` MarkdownV2/HTML
(https://core.telegram.org/bots/api#formatting-options). The conversion is telegramify-markdown's
``convert`` (https://github.com/sudoskys/telegramify-markdown).
"""

from __future__ import annotations

import telegramify_markdown
from aiogram.types import MessageEntity
from telegramify_markdown.config import RenderConfig

from core.ports import TextFormat


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


def render(text: str, fmt: TextFormat) -> tuple[str, list[MessageEntity] | None]:
    """Render ``text`` for ``sendMessage`` / ``editMessageText``.

    Args:
        text: the text as the agent wrote it (Markdown for ``markdown`` / ``stripped``).
        fmt: ``plain`` sends it as is; ``markdown`` converts to text + entities; ``stripped`` converts and
            drops the entities (the fallback after a formatting rejection).

    Returns:
        ``(text, entities)``; ``entities`` is ``None`` when there are none to send.
    """
    if fmt is TextFormat.PLAIN:
        return text, None
    plain, entities = telegramify_markdown.convert(text, config=_CONFIG)
    if fmt is TextFormat.STRIPPED or not entities:
        return plain, None
    return plain, [MessageEntity.model_validate(entity.to_dict()) for entity in entities]
