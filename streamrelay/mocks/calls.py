"""What a mock received and what a person sees, in the shapes of a case transcript (tests/cases/README.md).

One definition for the case runner (``app.cases.result`` re-exports these), the web channel's calls and the
mock control API (``GET /_mock/state``, :mod:`mocks.control`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ChatId = int | str


@dataclass
class RecordedCall:
    """One call a mock received (failed ones too), in arrival order.

    ``method`` is the platform's method name (Telegram ``sendMessage``, Slack ``chat.postMessage``,
    Discord ``createMessage``). ``status`` is the HTTP status answered; ``None`` while unanswered, for a
    scripted hang (the client gave up first) and for a scripted reset (the connection was closed). A call
    stored and then answered with a scripted ``after_commit`` fault keeps the fault's status (and
    ``ok = False``) and the new ``message_id``. ``retry_after_s`` is set on a 429. ``message_id`` is the new
    id for a stored send, the requested id for edits and deletes. ``text`` is the text as requested.
    ``t`` is ``time.monotonic()`` seconds (the mock's clock) when it arrived. ``description`` is the
    error's description, or the scripted hang's name (``timeout_after_commit``, ``reset``...).
    """

    method: str
    chat_id: ChatId | None
    message_id: int | str | None
    text: str | None
    t: float
    status: int | None = None
    ok: bool = False
    retry_after_s: float | None = None
    description: str | None = None


def call_record(call: Any, t0: float) -> dict[str, Any]:
    """One platform call as a transcript lists it: ``{"method", "chat_id", "message_id", "text", "t_ms",
    "status", "ok"}`` plus ``"retry_after_s"`` on a 429.

    Args:
        call: a :class:`RecordedCall`, or anything with its attributes (the web channel's ``WebCall``).
        t0: monotonic seconds ``t_ms`` counts from (the run's start, or the mock's start or last reset).
    """
    record = {
        "method": call.method,
        "chat_id": call.chat_id,
        "message_id": call.message_id,
        "text": call.text,
        "t_ms": round((call.t - t0) * 1000, 1),
        "status": call.status,
        "ok": call.ok,
    }
    if getattr(call, "retry_after_s", None) is not None:
        record["retry_after_s"] = call.retry_after_s
    return record


def chat_record(
    message_id: Any, text: str | None, *, media: bool = False, caption: str | None = None
) -> dict[str, Any]:
    """One visible message as a transcript's ``chat`` lists it: ``{"message_id", "text"}``.

    A media message (photo, file...) shows its caption as its text, ``""`` without one; a text message its
    text (``""`` for ``None``).
    """
    shown = (caption or "") if media else (text or "")
    return {"message_id": message_id, "text": shown}
