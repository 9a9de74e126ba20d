"""What one run has carried, against its client's per-run limits (:class:`core.ingest.clients.ClientLimits`).

Admission charges each line's events before it takes them; a line that would pass a limit is refused alone (422,
naming the limit and its setting) and counts for nothing, so the agent can tell what was taken: the run goes on
with what it had. Counted per run: events, characters of text (a delta's length; a snapshot or replacement counts
only its growth over the longest text its source and message had, so a snapshot stream is not charged its whole
text again at every event; a final text or a commit only what it adds to the run's text so far; a status its
length; tool-call fragments, tool results, phases, errors and media what they carry), and how far a ``seq`` may
run ahead of the highest one taken (a gap wider than ``seq_window`` is refused, not waited for; a run whose
``run.start`` has no ``seq`` counts from 0). A run's ``end`` is always taken, and lines replayed from the journal
are counted, never refused: they were taken once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    Citation,
    Commit,
    End,
    ErrorEvent,
    Event,
    Media,
    Phase,
    Status,
    TextEvent,
    TextMode,
    ToolCall,
    ToolResult,
)
from streamrelay.core.ingest.clients import ClientLimits

_Key = tuple[str | None, int, str]
_DELTA = TextMode.DELTA
"""Looked up once (:meth:`RunUsage.charge` reads it for every line): on CPython 3.11 an enum member's lookup on its
class goes through ``EnumType.__getattr__``'s hook (a call)."""


@dataclass(slots=True)
class RunUsage:
    """One run's counts so far (rebuilt the same way when the run is replayed from the journal)."""

    events: int = 0
    chars: int = 0
    max_seq: int | None = None
    """The highest ``seq`` taken (the ``run.start``'s at first)."""
    _longest: dict[_Key, int] = field(default_factory=dict, repr=False)

    def check_seq(self, seq: int | None, limits: ClientLimits) -> None:
        """Refuse a ``seq`` more than ``seq_window`` ahead of the highest taken.

        Raises:
            IngestError: 422 naming ``clients.NAME.seq_window``.
        """
        base = self.max_seq if self.max_seq is not None else -1  # no seq yet: the run counts from 0
        if seq is not None and seq > base + limits.seq_window:
            raise IngestError(
                f"seq {seq} is {seq - base} ahead of the highest seq taken ({base}), past the window "
                f"of "
                f"{limits.seq_window} ({limits.setting('seq_window')}): send the lines in between first",
                status=422,
            )

    def charge(self, events: Sequence[Event], limits: ClientLimits, *, enforce: bool = True) -> None:
        """Count ``events`` (one line's) against the run's limits, or refuse them all and count nothing (unless not
        ``enforce``d: a journaled line, taken once already, or a run's ``end``, always taken so the run can end).

        Raises:
            IngestError: 422 naming ``clients.NAME.max_events_per_run`` or ``clients.NAME.max_chars_per_run``.
        """
        one = events[0] if len(events) == 1 else None
        if type(one) is TextEvent and one.mode is _DELTA and self._charged_delta(one, limits, enforce):
            return  # the common line, without the general bookkeeping
        n_events = self.events + len(events)
        if enforce and n_events > limits.max_events_per_run:
            raise IngestError(
                f"the run already carries {self.events} events, the most one run may "
                f"({limits.setting('max_events_per_run')} = {limits.max_events_per_run}): start a new run",
                status=422,
            )
        grown: dict[_Key, int] = {}
        chars = self.chars
        for event in events:
            chars += self._chars(event, grown, chars)
        if enforce and chars > limits.max_chars_per_run:
            raise IngestError(
                f"this line would take the run's text to {chars} characters, past "
                f"{limits.setting('max_chars_per_run')} = {limits.max_chars_per_run}: start a new run",
                status=422,
            )
        self.events, self.chars = n_events, chars
        if grown:  # a new dict, never changed in place: a batch's mark keeps the one before (core/run/relay.py)
            self._longest = {**self._longest, **grown}
        for event in events:
            self._note_seq(event.seq)

    def _charged_delta(self, event: TextEvent, limits: ClientLimits, enforce: bool) -> bool:
        """:meth:`charge` of one ``delta`` text event when it passes every limit (the same counts); False, counting
        nothing, when a limit may refuse it (the general path then says which)."""
        chars = self.chars + len(event.text)
        if enforce and (self.events >= limits.max_events_per_run or chars > limits.max_chars_per_run):
            return False
        self.events, self.chars = self.events + 1, chars
        self._note_seq(event.seq)
        return True

    def _note_seq(self, seq: int | None) -> None:
        if seq is not None and (self.max_seq is None or seq > self.max_seq):
            self.max_seq = seq

    def _chars(self, event: Event, grown: dict[_Key, int], so_far: int) -> int:
        if isinstance(event, TextEvent):
            if event.mode is _DELTA:
                return len(event.text)
            key = (event.source.key if event.source else None, event.message, str(event.visibility))
            before = grown.get(key, self._longest.get(key, 0))
            grown[key] = max(before, len(event.text))
            return max(0, len(event.text) - before)
        if isinstance(event, End):  # the whole answer again, usually: only what it adds to the run's text counts
            return max(0, len(event.final_text or "") - so_far)
        if isinstance(event, Commit):
            return max(0, len(event.text or "") - so_far)
        if isinstance(event, Status):
            return len(event.text)
        return _other_chars(event)


def _other_chars(event: Event) -> int:
    """The characters an event other than text, end, commit or status carries (what it keeps in memory)."""
    if isinstance(event, ToolCall):
        args = len(json.dumps(event.args, ensure_ascii=False)) if event.args is not None else 0
        return len(event.args_delta or "") + len(event.name or "") + len(event.id) + args
    if isinstance(event, ToolResult):
        return len(event.summary) + len(event.name or "") + len(event.id)
    if isinstance(event, Phase):
        return len(event.name)
    if isinstance(event, ErrorEvent):
        return len(event.message)
    if isinstance(event, Media):
        return len(event.url) + len(event.caption or "")
    if isinstance(event, Citation):
        return len(event.url or "") + len(event.title or "")
    return 0
