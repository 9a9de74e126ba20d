"""The way out of a closed customer service window: a configured message template (:class:`WindowTemplate`).

WhatsApp lets a business send free-form messages (text, media, interactive) only within 24 hours of the person's
last message; outside it a send is refused with 131047 "Re-engagement message", and only an approved *template*
may be sent (https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows,
https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates). A channel that configures
``[channels.NAME.window_template]`` gets, at the first 131047 in a chat, that template sent instead
(``type: template``, ``template: {"name", "language": {"code"}, "components": [{"type": "body", "parameters":
[{"type": "text", "text"}]}]}``), filled with the answer's first line or a fixed text, so the person is told an answer
waits; its approved text says what to do (reply to reopen the window). The part itself is still refused (the
report says so, and which template went, as which ``wamid``): the answer reaches the person when they write again
(the desk's resend, docs/deliveries.md).

One template per chat until a send there succeeds again (the window reopened): later parts refused in the same
closed window report the template sent already, never a second one. Kept in memory: a restarted sidecar may send it
once more. A template send has no idempotency key either: one whose answer was lost is reported unknown, never sent
again. The template must be approved in WhatsApp Manager: an unknown name or language is 132001, a wrong number of
parameters 132000 (https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes/);
the report then says the template failed and why.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

PARAM_CHARS = 60
"""The most characters of the answer's first line put in the template (ours: a notice, not the answer)."""
MAX_CHATS = 10_000
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class WindowTemplate:
    """The configured template: ``name``, ``language`` (code), what fills ``{{1}}`` (``parameter``) and the fixed
    ``text``."""

    name: str
    language: str
    parameter: Literal["first_line", "fixed", "none"] = "first_line"
    text: str | None = None

    def params(self, answer: str) -> list[dict[str, object]] | None:
        """The template's ``components`` for ``answer`` (None: a template without variables).

        A text parameter may not hold newlines, tabs or more than four spaces in a row (132018): the first line's
        whitespace is collapsed, and it is cut to :data:`PARAM_CHARS` with an ellipsis."""
        if self.parameter == "none":
            return None
        if self.parameter == "fixed":
            value = self.text or ""
        else:
            first = next((line for line in answer.splitlines() if line.strip()), "")
            value = _SPACES.sub(" ", first).strip().lstrip("#>*-_ ").strip() or "…"
            if len(value) > PARAM_CHARS:
                value = value[: PARAM_CHARS - 1].rstrip() + "…"
        return [{"type": "body", "parameters": [{"type": "text", "text": value}]}]


class SentTemplates:
    """Which chats were sent the template in their current closed window, and what came of it (a sentence)."""

    def __init__(self) -> None:
        self._notes: OrderedDict[str, str] = OrderedDict()

    def note(self, chat: str) -> str | None:
        """What was done for ``chat`` in this closed window, or None (nothing yet)."""
        return self._notes.get(chat)

    def done(self, chat: str, note: str) -> None:
        """``chat`` was sent the template (or tried): later refusals there say ``note``."""
        self._notes[chat] = note
        while len(self._notes) > MAX_CHATS:
            self._notes.popitem(last=False)

    def reopened(self, chat: str) -> None:
        """A send to ``chat`` succeeded: its window is open; a later closing gets the template again."""
        self._notes.pop(chat, None)
