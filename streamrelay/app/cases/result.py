"""The outcome of one case, as the runner reports it and the CLI writes it (``DIR/<id>.json``).

A transcript's ``calls`` entries are :func:`call_record` and its ``chat`` entries :func:`chat_record` (one
definition each, in :mod:`mocks.calls`, shared with the mock control API's ``GET /_mock/state``): a media
message (photo, file...) is listed with its caption as its text, ``""`` without one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from streamrelay.mocks.calls import call_record, chat_record

__all__ = ["CaseResult", "call_record", "chat_record", "chat_records"]


@dataclass
class CaseResult:
    """The outcome of one case: ``passed``, the failures, and the transcript (README shapes)."""

    id: str
    type: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    transcript: dict[str, Any] = field(default_factory=dict)
    unsupported: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.transcript)
        out["id"], out["passed"], out["failures"] = self.id, self.passed, self.failures
        if self.unsupported:
            out["unsupported"] = self.unsupported
        return out


def chat_records(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """A transcript's ``chat`` from what the conversation shows, in order: ``(message id, text)`` pairs (a mock's
    ``visible``, where a media message's text is already its caption) or mappings with ``message_id`` and
    ``text``, a media part also ``media`` (truthy, e.g. its kind or URL) and ``caption``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, tuple):
            message_id, text = message
            out.append(chat_record(message_id, text))
        else:
            media = bool(message.get("media") or message.get("media_kind"))
            out.append(
                chat_record(message.get("message_id"), message.get("text"), media=media, caption=message.get("caption"))
            )
    return out
