"""Per-run input order: by ``seq`` (a repeated ``seq`` is dropped; a gap is held until filled or timed out), then
deltas that arrived together joined into one.

Events without ``seq`` pass straight through in arrival order. A raw stream line (a provider or agent-protocol
event, normalized at admission) may carry ``seq`` too: admission takes such lines only in order
(:class:`SeqFloor`: a repeat is dropped, one past a gap refused), its events go on without ``seq``, and the gate is
told the number is used (:meth:`SeqGate.consume`), so the lines after it are not held for it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from typing import Any, TypeVar, cast

from streamrelay.core.events import JoinedDeltas, RunEvent, TextDelta, TextEvent, TextMode
from streamrelay.core.text.assembler import REPLAY_MIN_CHARS

_seq_of = attrgetter("seq")
_text_of = attrgetter("text")
_message_of = attrgetter("message")

_E = TypeVar("_E", bound=RunEvent)
"""The events :func:`join_deltas` is given (a run's: :data:`core.events.RunEvent`, or typed events alone)."""


@dataclass(slots=True)
class SeqGate:
    """Orders one run's events.

    ``last`` starts at the ``seq`` of the run's ``run.start`` when it has one; otherwise the first event
    with a ``seq`` sets it.

    Args:
        gap_timeout_s: how long a gap may hold later events before they are released anyway (and the
            gap reported).
    """

    gap_timeout_s: float = 2.0
    last: int | None = None
    _held: list[tuple[int, int, RunEvent]] = field(default_factory=list)
    _held_since: float | None = None
    _n: int = 0
    dropped: int = 0
    gaps: list[str] = field(default_factory=list)
    _skipped: list[tuple[int, int]] = field(default_factory=list)
    _consumed: set[int] = field(default_factory=set)

    def consume(self, seq: int) -> None:
        """``seq`` is used by a raw line taken at admission (its events carry no ``seq``): once the events before it
        are released, it counts as released too."""
        if self.last is None or seq > self.last:
            self._consumed.add(seq)
            self._skip_consumed()

    def _skip_consumed(self) -> None:
        while self._consumed and self.last is not None and self.last + 1 in self._consumed:
            self._consumed.discard(self.last + 1)
            self.last += 1

    def push_all(self, events: Iterable[RunEvent], now: float) -> list[RunEvent]:
        """:meth:`push` each of ``events`` in order; return the events now ready, in order. O(events) when they come
        in order: an event without ``seq``, or with the next one while nothing is held, is ready at once."""
        if type(events) is list and not self._held and not self._consumed and (last := self.last) is not None:
            numbers = list(map(_seq_of, events))  # the common batch, each seq the next one: checked in C, no step each
            if numbers and numbers[0] == last + 1 and numbers == list(range(last + 1, last + 1 + len(numbers))):
                self.last = numbers[-1]
                return list(events)
        ready: list[RunEvent] = []
        for event in events:
            seq = event.seq
            if seq is None:
                ready.append(event)
            elif not self._held and not self._consumed and self.last is not None and seq == self.last + 1:
                self.last = seq  # what push does for the next seq with nothing held, without the heap
                ready.append(event)
            else:
                ready += self.push(event, now)
        return ready

    def push(self, event: RunEvent, now: float) -> list[RunEvent]:
        """Take one event; return the events now ready, in order."""
        if event.seq is None:
            return [event]
        if self.last is not None and event.seq <= self.last:
            self.dropped += 1
            if any(lo <= event.seq <= hi for lo, hi in self._skipped):
                self.gaps.append(f"seq {event.seq} arrived after its gap was given up: dropped")
            return []
        if any(seq == event.seq for seq, _, _ in self._held):
            self.dropped += 1
            return []
        self._n += 1
        heapq.heappush(self._held, (event.seq, self._n, event))
        ready = self._release()
        self._held_since = now if self._held and (ready or self._held_since is None) else self._held_since
        if not self._held:
            self._held_since = None
        return ready

    def _release(self) -> list[RunEvent]:
        out: list[RunEvent] = []
        self._skip_consumed()
        while self._held and (self.last is None or self._held[0][0] == self.last + 1):
            seq, _, event = heapq.heappop(self._held)
            self.last = seq
            out.append(event)
            self._skip_consumed()
        return out

    def deadline(self) -> float | None:
        """When held events must be released despite the gap (clock seconds), or None."""
        return None if self._held_since is None else self._held_since + self.gap_timeout_s

    def expire(self, now: float) -> list[RunEvent]:
        """Release held events past the gap timeout, recording the gap."""
        if self._held_since is None or now < self._held_since + self.gap_timeout_s:
            return []
        return self.release_held()

    def release_held(self) -> list[RunEvent]:
        """Release every held event now, in order, recording the gaps before them (the run closes: what it took is
        shown, never held back for a ``seq`` that did not come)."""
        out: list[RunEvent] = []
        while self._held:
            self._skip_consumed()
            seq, _, event = heapq.heappop(self._held)
            if self.last is not None and seq > self.last + 1:
                self.gaps.append(f"seq {self.last + 1}..{seq - 1} never arrived")
                self._skipped.append((self.last + 1, seq - 1))
            self.last = seq
            out.append(event)
        self._held_since = None
        return out


@dataclass(slots=True)
class SeqFloor:
    """The ``seq`` numbers admission has taken for one run: every number up to ``floor``, and ``above`` it.

    Normalized lines may come out of order (the :class:`SeqGate` orders them); a raw stream line cannot wait (it is
    normalized as it is taken), so it is taken only as the next number after ``floor``.
    """

    floor: int | None = None
    above: set[int] = field(default_factory=set)

    def taken(self, seq: int) -> bool:
        """Whether a line with ``seq`` was taken already."""
        return (self.floor is not None and seq <= self.floor) or seq in self.above

    def next_raw(self) -> int | None:
        """The ``seq`` a raw line must have to be taken now (None: any, nothing numbered was taken yet)."""
        return None if self.floor is None else self.floor + 1

    def take(self, seq: int) -> None:
        """Note ``seq`` taken."""
        if self.floor is None:
            self.floor = seq
        elif seq > self.floor:
            self.above.add(seq)
        while self.floor + 1 in self.above:
            self.above.discard(self.floor + 1)
            self.floor += 1

    def untake(self, floor: int, seqs: list[int]) -> None:
        """Undo the :meth:`take` of each of ``seqs``, taken while the floor was ``floor`` or above, keeping every other
        number taken since (another request's). O(len(seqs) + how far the floor moved since)."""
        undone = set(seqs)
        if self.floor is not None and self.floor > floor:
            passed = (n for n in range(floor + 1, self.floor + 1) if n not in undone)
            self.above = self.above.difference(undone).union(passed)
            self.floor = floor
        else:
            # At or below ``floor`` already: another request's undo lowered it (its numbers below ours were untaken
            # and every other one moved to ``above``). It stays: raised back to ``floor``, it took those numbers
            # again, and that request's lines sent again were dropped as repeats (answered, never journaled).
            self.above = self.above.difference(undone)
            if self.floor is None:
                return
        while self.floor + 1 in self.above:
            self.above.discard(self.floor + 1)
            self.floor += 1


def join_deltas(events: list[_E]) -> list[_E | JoinedDeltas]:
    """Join adjacent text deltas of the same source, message, visibility and lane into one
    :class:`~core.events.JoinedDeltas`.

    Deltas that arrive together become one append (DESIGN §4: the chunker's output does not depend on
    how text is split, so this changes nothing a person sees, and per-event work is paid once). The replayed-snapshot
    guard reads each delta as the agent sent it (DESIGN §4): a joined event is a :class:`JoinedDeltas` that lists
    where each joined delta of :data:`REPLAY_MIN_CHARS` or more (one that may be a replay) lies in its text, and the
    guard reads those alone, never the joined text.
    O(events): each event is compared with the delta being joined by its fields, not copied (one copy per joined
    run).
    """
    if len(events) < 2:
        return cast("list[_E | JoinedDeltas]", events)  # (read only: nothing is added to it)
    if set(map(type, events)) == {TextDelta} and len(set(map(_message_of, events))) == 1:
        # the common batch, plain deltas of one message: one join, checked and gathered in C (what the loop gives)
        texts = list(map(_text_of, events))
        out: list[_E | JoinedDeltas] = [events[0]]
        del texts[0]
        _flush_joined(out, texts)
        return out
    out = []
    parts: list[str] = []
    head: TextEvent | TextDelta | None = None  # the delta the next ones may join
    delta = TextMode.DELTA
    for event in events:
        if type(event) is TextDelta or (isinstance(event, TextEvent) and event.mode is delta):
            text = cast("TextEvent | TextDelta", event)  # (what the line above says)
            if (
                head is not None
                and text.message == head.message
                and text.visibility is head.visibility
                and text.lane is head.lane
                and text.source == head.source
            ):
                parts.append(text.text)
                continue
            if parts:
                _flush_joined(out, parts)
            out.append(event)
            head = text
            continue
        if parts:
            _flush_joined(out, parts)
        out.append(event)
        head = None
    _flush_joined(out, parts)
    return out


_JOINED_DEFAULTS: dict[str, Any] = dict(JoinedDeltas.model_construct(run="", text="").__dict__)
"""Every field of a :class:`JoinedDeltas` at its default (all immutable), in the fields' order: given whole to
:func:`_construct`, which then looks up no default (that lookup costs 4x the rest of ``model_construct``)."""

_new_joined = JoinedDeltas.__new__
_set = object.__setattr__
_PLAIN_CONSTRUCT = (
    not JoinedDeltas.__pydantic_post_init__
    and not JoinedDeltas.__pydantic_root_model__
    and JoinedDeltas.model_config.get("extra") != "allow"
    and all(f.alias is None and f.validation_alias is None for f in JoinedDeltas.__pydantic_fields__.values())
)
"""Whether ``JoinedDeltas.model_construct`` of every field is the four steps of :func:`_construct` (no alias, no
post-init hook, no extra field kept: checked once, against the pydantic installed)."""


def _construct(fields_set: set[str], fields: dict[str, Any]) -> JoinedDeltas:
    """``JoinedDeltas.model_construct(fields_set, **fields)`` for ``fields`` holding every field in the fields' order
    (as :data:`_JOINED_DEFAULTS` does): the same instance (its ``__dict__``, fields set, no extra, no private
    attributes) without ``model_construct``'s walk over the fields (a loop of Python steps per field, per batch)."""
    if not _PLAIN_CONSTRUCT:  # (a pydantic whose construct does more: its own way)
        return JoinedDeltas.model_construct(fields_set, **fields)
    joined = _new_joined(JoinedDeltas)
    _set(joined, "__dict__", fields)
    _set(joined, "__pydantic_fields_set__", fields_set)
    _set(joined, "__pydantic_extra__", None)
    _set(joined, "__pydantic_private__", None)
    return joined


def _flush_joined(out: list[_E | JoinedDeltas], parts: list[str]) -> None:
    if parts:
        last = out[-1]
        assert isinstance(last, TextEvent | TextDelta)
        candidates: list[tuple[int, int]] = []
        sizes = [len(last.text), *map(len, parts)]
        if max(sizes) >= REPLAY_MIN_CHARS:  # (else none is: the common batch of small deltas, no Python step each)
            # where each delta that may be a replay lies (its offset: the sizes before it): the guard reads it alone
            candidates = [
                (at, size)
                for at, size in zip(accumulate(sizes, initial=0), sizes, strict=False)  # (the offsets: one more)
                if size >= REPLAY_MIN_CHARS
            ]
        text, replay = last.text + "".join(parts), tuple(candidates)
        if isinstance(last, TextDelta):
            # The event it stands for, built as :meth:`TextDelta.event` validates it (its fields are of a type and
            # range the validator takes unchanged; the others are the defaults): no validation per join.
            given = {"kind", "run", "text"} | ({"seq"} if last.seq is not None else set())
            given |= {"message"} if last.message else set()
            fields = dict(_JOINED_DEFAULTS, run=last.run, seq=last.seq, text=text, message=last.message)
        else:
            fields, given = dict(last.__dict__), last.model_fields_set | {"text"}  # valid: not validated again
            fields["text"] = text
        fields["replay_candidates"] = replay
        out[-1] = _construct(given, fields)  # every field given, in the fields' order
        parts.clear()
