"""Text rendering for Discord: the ``content`` a message carries for a text, and its length.

``plain`` is sent as is. ``markdown`` goes in Discord's own Markdown subset
(https://support.discord.com/hc/en-us/articles/210298617): what it does not render (``####`` headings, thematic
breaks, tables) is rewritten (:func:`adapters.discord.markdown.discord_markdown`), unless that would take the content
past the message limit (then it goes as typed: never refused for its length). ``stripped`` is the text with its markup
removed (:func:`adapters.markdown_strip.strip_markdown`: a link keeps its target after its text, ``text (url)``,
since plain text hides nothing). Invisible characters are removed first, in every format
(:func:`adapters.invisible.strip_invisible`); mentions are made inert by the adapter's ``allowed_mentions``, not here.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamrelay.adapters.discord.markdown import discord_markdown
from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.ports import TextFormat
from streamrelay.core.units import LengthUnit, text_units


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a create or an edit carries for one text: ``content``, and ``units``, its length in UTF-16 units (Discord
    allows 2000 characters, https://discord.com/developers/docs/resources/message#create-message; counting UTF-16
    units is the safe side)."""

    content: str
    units: int


def render(text: str, fmt: TextFormat, max_units: int | None = None) -> Rendered:
    """The ``content`` Discord receives for ``text`` in ``fmt`` (module docstring); pure (the adapter keeps the
    renderings of the texts in flight, :class:`adapters.rendering.RenderCache`).

    Args:
        text: the text as the agent wrote it.
        fmt: ``plain``, ``markdown`` or ``stripped``.
        max_units: the message limit in UTF-16 units: a Markdown rewrite past it is not used (None: no limit).
    """
    text = strip_invisible(text)
    if fmt is TextFormat.STRIPPED:
        content = strip_markdown(text)
        return Rendered(content, text_units(content, LengthUnit.UTF16))
    if fmt is TextFormat.MARKDOWN:
        shown = discord_markdown(text)
        if shown is not text:
            units = text_units(shown, LengthUnit.UTF16)
            if max_units is None or units <= max_units:
                return Rendered(shown, units)
    return Rendered(text, text_units(text, LengthUnit.UTF16))
