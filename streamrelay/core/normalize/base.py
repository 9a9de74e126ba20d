"""What every provider normalizer shares: the :class:`Normalizer` role and small helpers.

A normalizer turns raw provider stream events (one decoded JSON object per line, SSE framing removed)
into normalized events (:mod:`core.events`, shared/DESIGN.md §3) with ``run`` set and ``seq`` left
``None`` (the ingest stage numbers them). It never parses tool-call arguments: the pipeline lane does
that strictly once the call has ended.

A raw event is a :data:`core.json_types.JsonObject`: its fields are the provider's and nothing about their values is
known until checked, so every read is narrowed (by :func:`as_dict`, :func:`as_str`, :func:`require_str`,
:func:`text_field`, :func:`int_field` or ``isinstance``). It is read, never written.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    APPROVAL_ID,
    CITATION_TITLE_MAX_CHARS,
    CITATION_URL_MAX_CHARS,
    ApprovalRequest,
    Citation,
    Event,
    Media,
    Source,
    Status,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    Visibility,
)
from streamrelay.core.json_types import JsonObject as JsonObject  # a raw provider event: what every normalizer reads
from streamrelay.core.media import MediaKind, check_media_url, has_credentials


class Normalizer(Protocol):
    """Turns one provider's raw stream events into normalized events, in order.

    One instance per provider stream of a run; it keeps the stream's state (open blocks, open tool
    calls, the current assistant message index).
    """

    def feed(self, raw: JsonObject) -> list[Event]:
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


def require_object(raw: Any, provider: str) -> JsonObject:
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


def as_dict(value: Any) -> JsonObject:
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


_DELTA = TextMode.DELTA
"""Looked up once: on CPython 3.11 an enum member's lookup on its class goes through ``EnumType.__getattr__``'s hook
(a call), and :func:`text_event` makes every delta of every format."""
_validate_text = TextEvent.__pydantic_validator__.validate_python
"""What ``TextEvent(**fields)`` runs, without the model's Python ``__init__`` around it (one per delta)."""


def text_event(run_id: str, message: int, text: str, visibility: Visibility, source: Source | None = None) -> TextEvent:
    """A ``text`` delta event of one assistant message (of the root, or of the sub-agent ``source``).

    Raises:
        pydantic.ValidationError: a field no event can hold (the normalizers turn it into an ``IngestError``).
    """
    fields = {
        "run": run_id,
        "mode": _DELTA,
        "text": text,
        "message": message,
        "visibility": visibility,
        "source": source,
    }
    return _validate_text(fields)  # type: ignore[no-any-return]


def require_str(raw: JsonObject, key: str, provider: str, what: str) -> str:
    """``raw[key]`` when it is a non-empty string: an id or name a known event cannot do without.

    Args:
        raw: the raw event object.
        key: the field's wire name (``messageId``, ``toolCallId``).
        provider: the format's name for the message (``AG-UI``).
        what: the event's name for the message (``TEXT_MESSAGE_START``).

    Raises:
        IngestError: the field is missing, empty or not a string (the message names the event and the field).
    """
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise IngestError(f"a raw {provider} {what} event needs a non-empty string {key!r}, got {value!r}")
    return value


def text_field(raw: JsonObject, key: str, provider: str, what: str) -> str:
    """``raw[key]`` as text: ``""`` when missing or null, the string when given.

    Raises:
        IngestError: the field is present but not a string (a number or object where text belongs).
    """
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise IngestError(f"a raw {provider} {what} event's {key!r} must be a string, got {type(value).__name__}")
    return value


def int_field(raw: JsonObject, key: str, provider: str, what: str) -> int | None:
    """``raw[key]`` when it is a JSON integer, None when missing or null: an index a format numbers its choices,
    blocks or calls by. Strict: a ``true``, ``1.0`` or ``"1"`` is never read as 1 (Python's ``True == 1`` and
    ``1.0 == 1`` would take it for that index silently).

    Args:
        raw: the raw event object (or the part of it that holds the field).
        key: the field's wire name (``index``).
        provider: the format's name for the message (``anthropic``).
        what: what holds the field, for the message (``content_block_delta event``, ``chunk's choice``).

    Raises:
        IngestError: the field is present and not an integer (a 400 naming the field, what was expected and what came).
    """
    value = raw.get(key)
    if value is None or type(value) is int:
        return value
    raise IngestError(f"a raw {provider} {what}'s {key!r} must be an integer, got {type(value).__name__}")


def whole_tool_call(run_id: str, call_id: str, name: str | None, args: Any, source: Source | None) -> list[Event]:
    """A tool call whose arguments arrived whole (not streamed): ``start``, one ``args_delta`` holding the
    arguments as JSON text, ``end`` — the same three states a streamed call goes through, so the pipeline lane
    parses the arguments strictly once, at ``end``. ``args`` ``None`` sends no fragment (the lane then reads an
    empty argument text, which it reports as malformed rather than guessing ``{}``)."""
    events: list[Event] = [ToolCall(run=run_id, id=call_id, name=name, state=ToolCallState.START, source=source)]
    if args is not None:
        fragment = json.dumps(args, ensure_ascii=False)
        events.append(
            ToolCall(
                run=run_id, id=call_id, name=name, state=ToolCallState.ARGS_DELTA, args_delta=fragment, source=source
            )
        )
    events.append(ToolCall(run=run_id, id=call_id, name=name, state=ToolCallState.END, source=source))
    return events


SUMMARY_MAX_CHARS = 120
"""The longest error text a ``tool_result`` summary or status line keeps (characters): people read a line, not
a dump."""


def one_line(text: str, max_chars: int = SUMMARY_MAX_CHARS) -> str:
    """The first line of ``text``, stripped and cut to ``max_chars`` characters (``…`` marks a cut)."""
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return first if len(first) <= max_chars else first[: max_chars - 1] + "…"


def media_event(run_id: str, url: str, mime_type: str, source: Source | None) -> Media | Status:
    """A ``media`` event for a file a stream gives by URL (``media_kind`` from its MIME type, :func:`media_kind`).

    A platform fetches a media item itself, so only an absolute http(s) URL can be shown
    (:func:`core.media.check_media_url`). A file given otherwise (a ``data:`` URL, a ``gs://`` or file path) is not
    dropped silently: it becomes a ``status`` line saying that a file was not shown and why.
    """
    kind = media_kind(mime_type)
    if has_credentials(url):
        return Status(run=run_id, text=f"{kind} not shown: its link carries a password", source=source)
    try:
        check_media_url(url)
    except ValueError:
        return Status(run=run_id, text=f"{kind} not shown: not given by an http(s) link", source=source)
    return Media(run=run_id, url=url, media_kind=MediaKind(kind), source=source)


def media_kind(mime_type: str) -> str:
    """The ``media_kind`` of a MIME type: ``image/*`` → ``image``, ``audio/*`` → ``audio``, ``video/*`` →
    ``video``, anything else (or none) → ``file``."""
    major = mime_type.split("/", 1)[0].strip().lower()
    return major if major in ("image", "audio", "video") else "file"


def citation_event(run_id: str, url: Any, title: Any, source: Source | None = None) -> list[Event]:
    """A ``citation`` event for a source a stream names (a URL it cites, a document), or none when it gives neither a
    URL nor a title. Tolerant, like a stream's other optional fields: a value that is not a string counts as absent, a
    title longer than :data:`core.events.CITATION_TITLE_MAX_CHARS` is cut, and a URL longer than
    :data:`core.events.CITATION_URL_MAX_CHARS` or holding credentials before its host (``user:password@``,
    :func:`core.media.has_credentials`) is dropped (the source is then shown by its title, or a title saying so)."""
    link = url.strip() if isinstance(url, str) else ""
    name = title.strip() if isinstance(title, str) else ""
    if has_credentials(link):
        link, name = "", name or "a source (its link carries a password)"
    if len(link) > CITATION_URL_MAX_CHARS:
        link = ""
    if len(name) > CITATION_TITLE_MAX_CHARS:
        name = name[: CITATION_TITLE_MAX_CHARS - 1] + "…"
    if not link and not name:
        return []
    return [Citation(run=run_id, url=link or None, title=name or None, source=source)]


DEFAULT_APPROVAL_TTL_S = 600.0
"""How long a provider's approval request waits for a person when the provider gives no expiry (seconds); then it
is denied (``on_expiry`` ``denied``). An agent that wants another sends its own ``approval.request``."""


def approval_event(
    run_id: str,
    approval_id: str,
    question: str,
    action: str | None,
    expires_at: str | None = None,
    source: Source | None = None,
) -> ApprovalRequest:
    """The ``approval.request`` of a provider's approval request (the AI SDK's ``tool-approval-request``, an AG-UI
    interrupt): who may decide is the channel's (``approvers`` / ``approvals_anyone``), the expiry ``expires_at``
    (an ISO 8601 instant, as the provider gave it) else :data:`DEFAULT_APPROVAL_TTL_S`, denied at expiry. An id the
    decision route could not carry in its path (over 64 characters, or other than letters, digits and ``_.:-``) is
    replaced by ``h-`` and 16 hex characters of its hash; a question or action is cut to 1,000 characters.

    Raises:
        pydantic.ValidationError: ``expires_at`` is no ISO 8601 instant with its offset.
    """
    if APPROVAL_ID.fullmatch(approval_id) is None:
        approval_id = "h-" + hashlib.sha256(approval_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    fields: dict[str, Any] = {
        "run": run_id,
        "id": approval_id,
        "question": question[:1000] or "Approve?",
        "action": action[:1000] if action else None,
        "source": source,
    }
    if expires_at:
        fields["expires_at"] = expires_at
    else:
        fields["ttl_s"] = DEFAULT_APPROVAL_TTL_S
    return ApprovalRequest.model_validate(fields)
