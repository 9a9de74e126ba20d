"""What every provider normalizer shares: the :class:`Normalizer` role and small helpers.

A normalizer turns raw provider stream events (one decoded JSON object per line, SSE framing removed)
into normalized events (:mod:`core.events`, shared/DESIGN.md §3) with ``run`` set and ``seq`` left
``None`` (the ingest stage numbers them). It never parses tool-call arguments: the pipeline lane does
that strictly once the call has ended.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import ValidationError

from core.errors import IngestError
from core.events import Event, TextEvent, TextMode, Visibility


class Normalizer(Protocol):
    """Turns one provider's raw stream events into normalized events, in order.

    One instance per provider stream of a run; it keeps the stream's state (open blocks, open tool
    calls, the current assistant message index).
    """

    def feed(self, raw: dict[str, Any]) -> list[Event]:
        """Normalize one raw provider event.

        Args:
            raw: one decoded JSON object from the provider stream.

        Returns:
            The normalized events it stands for, in order; often none (pings, bookkeeping events,
            unknown event types, which are ignored for forward compatibility).

        Raises:
            IngestError: ``raw`` is not a JSON object, lacks the provider's type field, or a field it gives makes
                no valid normalized event (:func:`invalid_event`).
        """
        ...

    def close(self) -> list[Event]:
        """End of stream: end what is still open (text blocks, the current message).

        Tool calls whose arguments the provider never declared complete are left open on purpose:
        partial arguments must never be acted on.
        """
        ...


def require_object(raw: Any, provider: str) -> dict[str, Any]:
    """Check that ``raw`` is a decoded JSON object.

    Raises:
        IngestError: it is not.
    """
    if not isinstance(raw, dict):
        raise IngestError(f"a raw {provider} stream event must be a JSON object, got {type(raw).__name__}")
    return raw


def require_type(raw: Any, provider: str) -> str:
    """The ``type`` field of a raw provider event.

    Raises:
        IngestError: ``raw`` is not a JSON object, or its ``type`` is missing or not a string.
    """
    obj = require_object(raw, provider)
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise IngestError(f"a raw {provider} stream event needs a string 'type' field, got {kind!r}")
    return kind


def invalid_event(provider: str, exc: ValidationError) -> IngestError:
    """The 400 for a raw event whose fields make no valid normalized event (a tool id with a lone surrogate)."""
    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}" for err in exc.errors())
    return IngestError(f"a raw {provider} stream event makes no valid event: {problems}")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty dict (tolerates missing or null sub-objects)."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str:
    """``value`` if it is a string, else ``""`` (tolerates missing or null text fields)."""
    return value if isinstance(value, str) else ""


class MessageCounter:
    """Assistant message indexes of one stream: 0-based, one per assistant message / response."""

    def __init__(self) -> None:
        self._next = 0
        self.current: int | None = None

    def start(self) -> int:
        """Open the next message (ending none: the caller ends the current one first)."""
        self.current = self._next
        self._next += 1
        return self.current

    def ensure(self) -> int:
        """The open message, opening one if content arrived without a message start."""
        return self.current if self.current is not None else self.start()

    def end(self) -> int | None:
        """Close the open message; return its index, or ``None`` if none was open."""
        index, self.current = self.current, None
        return index


def text_event(run_id: str, message: int, text: str, visibility: Visibility) -> TextEvent:
    """A ``text`` delta event of one assistant message."""
    return TextEvent(run=run_id, mode=TextMode.DELTA, text=text, message=message, visibility=visibility)
