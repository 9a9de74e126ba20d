"""The mock homeserver's rooms: stored events, transaction ids, edits, threads, redactions, typing
(rules: :mod:`mocks.matrix`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamrelay.mocks.matrix.wire import MAX_EVENT_BYTES, ROOM_ID_RE, MatrixError, event_id, pdu_bytes

MESSAGE = "m.room.message"
REACTION = "m.reaction"
REPLACE = "m.replace"
THREAD = "m.thread"
ANNOTATION = "m.annotation"


@dataclass
class StoredEvent:
    """One room event as the homeserver stores it.

    Attributes:
        event_id: ``$`` and 43 base64 characters.
        room_id: its room.
        sender: its sender's user id.
        type: the event type (``m.room.message``, ``m.room.redaction``).
        content: its content as sent (a redaction empties it, keeping only what the redaction algorithm keeps).
        ts_ms: ``origin_server_ts``.
        redacted_by: the redaction event's id once redacted.
    """

    event_id: str
    room_id: str
    sender: str
    type: str
    content: dict[str, Any]
    ts_ms: int
    redacted_by: str | None = None

    @property
    def relation(self) -> dict[str, Any]:
        """Its ``m.relates_to`` (``{}`` without one)."""
        relates = self.content.get("m.relates_to")
        return relates if isinstance(relates, dict) else {}

    @property
    def is_edit(self) -> bool:
        """An ``m.replace`` edit of another event."""
        return self.relation.get("rel_type") == REPLACE


@dataclass
class Room:
    """One room: its events in order, the typing users (user id → until, monotonic seconds)."""

    room_id: str
    events: list[StoredEvent] = field(default_factory=list)
    typing: dict[str, float] = field(default_factory=dict)


class Rooms:
    """Every room of the mock homeserver and the transaction ids of every device.

    Args:
        clock: monotonic seconds (typing timeouts).
        wall_ms: wall-clock milliseconds (``origin_server_ts``).
    """

    def __init__(self, clock: Callable[[], float], wall_ms: Callable[[], int]) -> None:
        self._clock, self._wall_ms = clock, wall_ms
        self.rooms: dict[str, Room] = {}
        self.missing: set[str] = set()
        """Room ids the bot is not joined to: a send there is 403 ``M_FORBIDDEN``."""
        self._by_id: dict[str, StoredEvent] = {}
        self._txns: dict[tuple[str, str], str] = {}
        self._counter = 0

    def reset(self) -> None:
        """Forget every room, event and transaction id (``missing`` is kept)."""
        self.rooms.clear()
        self._by_id.clear()
        self._txns.clear()

    # ------------------------------------------------------------ reading

    def room(self, room_id: str, sender: str) -> Room:
        """The room ``room_id`` for a member ``sender``.

        Raises:
            MatrixError: 400 ``M_INVALID_PARAM`` for a malformed id; 403 ``M_FORBIDDEN`` when ``sender`` is not in it.
        """
        if not ROOM_ID_RE.fullmatch(room_id):  # whole: a "$" would let a trailing newline through
            raise MatrixError(400, "M_INVALID_PARAM", f"{room_id!r} is not a valid room ID")
        if room_id in self.missing:
            raise MatrixError(403, "M_FORBIDDEN", f"User {sender} not in room {room_id}")
        return self.rooms.setdefault(room_id, Room(room_id))

    def event(self, room: Room, event_id: str) -> StoredEvent | None:
        """The event ``event_id`` of ``room``, or None."""
        found = self._by_id.get(event_id)
        return found if found is not None and found.room_id == room.room_id else None

    def shown(self, room_id: str) -> list[tuple[StoredEvent, dict[str, Any]]]:
        """The room's messages as a client shows them: each ``m.room.message`` that is no edit and not redacted, with
        its content as its latest valid edit made it (an edit counts when it has the same sender and type and a
        ``m.new_content``: https://spec.matrix.org/latest/client-server-api/#validity-of-replacement-events)."""
        room = self.rooms.get(room_id)
        if room is None:
            return []
        latest: dict[str, dict[str, Any]] = {}
        for event in room.events:
            if event.is_edit and event.redacted_by is None:
                original = self._by_id.get(str(event.relation.get("event_id")))
                new = event.content.get("m.new_content")
                if (
                    original is not None
                    and original.sender == event.sender
                    and original.type == event.type
                    and not original.is_edit
                    and isinstance(new, dict)
                ):
                    latest[original.event_id] = new
        return [
            (e, latest.get(e.event_id, e.content))
            for e in room.events
            if e.type == MESSAGE and not e.is_edit and e.redacted_by is None
        ]

    # ------------------------------------------------------------ writing

    def txn(self, device: str, txn_id: str) -> str | None:
        """The event id stored earlier under this device's transaction id, or None."""
        return self._txns.get((device, txn_id))

    def check_message(self, room: Room, sender: str, event_type: str, content: Any) -> None:
        """Validate a message event before it is stored.

        Raises:
            MatrixError: 400 ``M_NOT_JSON`` for a body that is no JSON object; 400 ``M_BAD_JSON`` for an
                ``m.room.message`` without a textual ``msgtype`` and ``body`` (homeservers SHOULD reject it,
                https://spec.matrix.org/latest/client-server-api/#server-behaviour-7), or an ``m.replace`` /
                ``m.thread`` relation to an event the room does not have; 413 ``M_TOO_LARGE`` past 65,536 bytes of
                the event's JSON (:func:`mocks.matrix.wire.pdu_bytes`).
        """
        if not isinstance(content, dict):
            raise MatrixError(400, "M_NOT_JSON", "Content not JSON.")
        if event_type == MESSAGE:
            if not isinstance(content.get("msgtype"), str) or not isinstance(content.get("body"), str):
                raise MatrixError(400, "M_BAD_JSON", "'msgtype' and a textual 'body' are required")
            relation = content.get("m.relates_to")
            if isinstance(relation, dict) and relation.get("rel_type") in (REPLACE, THREAD):
                target = self.event(room, str(relation.get("event_id")))
                if target is None:
                    raise MatrixError(400, "M_BAD_JSON", f"unknown event {relation.get('event_id')!r} to relate to")
                if relation.get("rel_type") == THREAD and target.relation.get("rel_type") is not None:
                    raise MatrixError(400, "M_BAD_JSON", "Cannot start threads from an event with a relation")
        if event_type == REACTION:
            self._check_reaction(room, sender, content)
        size = pdu_bytes(room.room_id, sender, event_type, content, self._wall_ms())
        if size > MAX_EVENT_BYTES:
            raise MatrixError(413, "M_TOO_LARGE", f"event too large: {size} bytes > {MAX_EVENT_BYTES}")

    def _check_reaction(self, room: Room, sender: str, content: dict[str, Any]) -> None:
        """An ``m.reaction`` is an ``m.annotation`` of an event the room has, with a ``key``; the same sender
        annotating one event with one key twice is 400 ``M_DUPLICATE_ANNOTATION``, as Synapse answers (a homeserver
        may refuse it: https://spec.matrix.org/latest/client-server-api/#event-annotations-and-reactions)."""
        relation = content.get("m.relates_to")
        if not isinstance(relation, dict) or relation.get("rel_type") != ANNOTATION:
            raise MatrixError(400, "M_BAD_JSON", "m.reaction needs an m.annotation relation")
        key, target_id = relation.get("key"), relation.get("event_id")
        if not isinstance(key, str) or not key or self.event(room, str(target_id)) is None:
            raise MatrixError(400, "M_BAD_JSON", "m.reaction needs a key and an event of the room to annotate")
        for old in self.relations(room.room_id, str(target_id), ANNOTATION):
            if old.sender == sender and old.relation.get("key") == key:
                raise MatrixError(400, "M_DUPLICATE_ANNOTATION", "Can't send same reaction twice")

    def relations(self, room_id: str, event_id: str, rel_type: str | None = None) -> list[StoredEvent]:
        """The events of ``room_id`` that relate to ``event_id`` (of ``rel_type`` when given), not redacted, in
        order."""
        room = self.rooms.get(room_id)
        return [
            e
            for e in (room.events if room is not None else [])
            if e.redacted_by is None
            and e.relation.get("event_id") == event_id
            and (rel_type is None or e.relation.get("rel_type") == rel_type)
        ]

    def store(
        self, room: Room, sender: str, event_type: str, content: dict[str, Any], device: str, txn_id: str | None
    ) -> StoredEvent:
        """Store an event (under ``(device, txn_id)`` when given) and return it."""
        self._counter += 1
        event = StoredEvent(event_id(self._counter), room.room_id, sender, event_type, content, self._wall_ms())
        room.events.append(event)
        self._by_id[event.event_id] = event
        if txn_id is not None:
            self._txns[(device, txn_id)] = event.event_id
        return event

    def event_json(self, room: Room, event_id: str) -> dict[str, Any]:
        """The event as ``GET /rooms/{roomId}/event/{eventId}`` answers it: a redacted one with its content stripped
        and ``unsigned.redacted_because``; an edited one with its latest valid edit bundled in
        ``unsigned["m.relations"]["m.replace"]`` (server-side aggregation,
        https://spec.matrix.org/v1.11/client-server-api/#server-side-aggregation-of-mreplace-relationships).

        Raises:
            MatrixError: 404 ``M_NOT_FOUND`` for an event the room does not have.
        """
        event = self.event(room, event_id)
        if event is None:
            raise MatrixError(404, "M_NOT_FOUND", f"Event {event_id} not found")
        unsigned: dict[str, Any] = {}
        if event.redacted_by is not None:
            unsigned["redacted_because"] = {"event_id": event.redacted_by, "type": "m.room.redaction"}
        else:
            edits = [
                e
                for e in room.events
                if e.is_edit
                and e.redacted_by is None
                and e.relation.get("event_id") == event.event_id
                and e.sender == event.sender
                and isinstance(e.content.get("m.new_content"), dict)
            ]
            if edits:
                latest = edits[-1]
                unsigned["m.relations"] = {"m.replace": _wire(latest)}
        return {**_wire(event), "unsigned": unsigned}

    def check_redaction(self, room: Room, sender: str, target_id: str) -> StoredEvent:
        """The event a redaction by ``sender`` removes.

        Raises:
            MatrixError: 404 ``M_NOT_FOUND`` for an event the room does not have; 403 ``M_FORBIDDEN`` for another
                user's event (the bot has no power level to redact others' events).
        """
        target = self.event(room, target_id)
        if target is None:
            raise MatrixError(404, "M_NOT_FOUND", f"Event {target_id} not found")
        if target.sender != sender:
            raise MatrixError(403, "M_FORBIDDEN", "You don't have permission to redact events")
        return target

    def redact(self, room: Room, sender: str, target: StoredEvent, device: str, txn_id: str) -> StoredEvent:
        """Store the ``m.room.redaction`` of ``target`` and strip its content (an ``m.room.message`` keeps no
        content key, https://spec.matrix.org/latest/rooms/v11/#redactions)."""
        redaction = self.store(room, sender, "m.room.redaction", {"redacts": target.event_id}, device, txn_id)
        target.redacted_by, target.content = redaction.event_id, {}
        return redaction

    def set_typing(self, room: Room, user_id: str, typing: bool, timeout_ms: int | None) -> None:
        """``user_id`` types in ``room`` for ``timeout_ms`` (or stops)."""
        if typing:
            room.typing[user_id] = self._clock() + (timeout_ms or 30_000) / 1000
        else:
            room.typing.pop(user_id, None)

    def typing_users(self, room_id: str) -> list[str]:
        """Who is typing in ``room_id`` now."""
        room = self.rooms.get(room_id)
        now = self._clock()
        return [] if room is None else [u for u, until in room.typing.items() if until > now]


def _wire(event: StoredEvent) -> dict[str, Any]:
    """An event in the Client-Server API's shape (its ``unsigned`` aside)."""
    return {
        "event_id": event.event_id,
        "room_id": event.room_id,
        "sender": event.sender,
        "type": event.type,
        "content": event.content,
        "origin_server_ts": event.ts_ms,
    }
