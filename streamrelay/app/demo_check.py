"""The demo's own checks of what a chat shows, made on the text a person reads.

With ``format = "markdown"`` a chat does not show the Markdown the model wrote: Telegram shows the text of
text + entities (``**bold**`` is "bold" in bold, a list item starts with ``⦁``), Slack, Discord and the live page
render the Markdown they get. So "the answer shown once, whole" compares the rendered text on both sides: what
the messages show, each rendered as the platform renders it, against the recording's answer rendered the same
way, all whitespace removed (a cut between messages and the line breaks around blocks may move whitespace;
words, their order and their count may not change). With ``format = "plain"`` both sides are the raw text, fence
marker lines dropped (a fence cut across messages is closed and reopened).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamrelay.adapters.discord.markdown import REWRITTEN
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.ports import TextFormat
from streamrelay.core.text.chunk_checks import content_key, fences_balanced
from streamrelay.core.units import LengthUnit, text_units

WHATSAPP_MARKS = re.compile(r"[*_~`>]|^-+(\\+-+)*$", re.M)
"""WhatsApp's formatting marks, and a rendered table's rule line."""


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _discord_key(text: str) -> str:
    return _squeezed(REWRITTEN.sub("", strip_markdown(text)))


def _whatsapp_key(text: str) -> str:
    """WhatsApp's text without its marks (``*`` ``_`` ``~`` backticks, ``>``) and whitespace: a block rendered alone
    and the whole answer rendered at once differ only in where the marks close and reopen."""
    return _squeezed(WHATSAPP_MARKS.sub("", text))


def shown_key(texts: list[str], platform: str, fmt: TextFormat) -> str:
    """What the messages ``texts`` show a person, rendered and without whitespace.

    Args:
        texts: the messages' texts as the platform stores them (Telegram: the text of text + entities, already
            rendered by the sidecar; Slack, Discord, web: the Markdown the sidecar sent).
        platform: ``telegram``, ``slack``, ``discord`` or ``web``.
        fmt: the channel's format.
    """
    if fmt is TextFormat.PLAIN:
        return content_key("\n".join(texts))
    if platform == "telegram":
        return _squeezed("".join(texts))
    if platform == "discord":
        return "".join(_discord_key(text) for text in texts)
    if platform == "whatsapp":
        return "".join(_whatsapp_key(text) for text in texts)
    return _squeezed("".join(strip_markdown(text) for text in texts))


def expected_key(answer: str, platform: str, fmt: TextFormat) -> str:
    """The recording's ``answer`` rendered as ``platform`` renders it, without whitespace (compare with
    :func:`shown_key`)."""
    if fmt is TextFormat.PLAIN:
        return content_key(answer)
    if platform == "telegram":
        from streamrelay.adapters.telegram.render import render  # aiogram: only when the demo runs on Telegram

        return _squeezed(render(answer, TextFormat.MARKDOWN)[0])
    if platform == "discord":
        return _discord_key(answer)
    if platform == "whatsapp":
        from streamrelay.adapters.whatsapp.render import markdown_to_whatsapp  # pure: imports no SDK

        return _whatsapp_key(markdown_to_whatsapp(answer))
    return _squeezed(strip_markdown(answer))


@dataclass(frozen=True)
class Check:
    """One of the demo's checks: its name, whether it holds, and a note for the person reading."""

    name: str
    ok: bool
    note: str = ""


def demo_checks(
    texts: list[str], answer: str, *, platform: str, fmt: TextFormat, limit: int, status_first: bool = False
) -> list[Check]:
    """The demo's checks of the messages ``texts`` against the recording's ``answer``.

    Args:
        texts: what the chat shows, message by message.
        answer: the recording's answer (the raw text the model wrote).
        platform: where it was shown.
        fmt: the channel's format.
        limit: the most UTF-16 units one message may hold.
        status_first: the chat also shows a status message before the answer (``progress`` mode): the answer
            is the end of what is shown.
    """
    shown, expected = shown_key(texts, platform, fmt), expected_key(answer, platform, fmt)
    same = shown.endswith(expected) if status_first else shown == expected
    rendered = "" if fmt is TextFormat.PLAIN else ", both rendered"
    return [
        Check("every message fits", all(text_units(t, LengthUnit.UTF16) <= limit for t in texts)),
        Check("fences balanced", all(fences_balanced(t) for t in texts)),
        Check("answer shown once, whole", same, f"against the recording's {len(answer)} chars{rendered}"),
    ]
