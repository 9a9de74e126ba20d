"""Visible text: separates what a person may see (the answer) from reasoning, per (source, message).

text events ─▶ received text (delta / snapshot / replace, replay guard) ─▶ surrogate carry ─▶
    answer visibility:    inline ``<think>`` / ``<final>`` split ─▶ answer texts   (TextAssembler)
                                                                └▶ reasoning texts (another TextAssembler)
    reasoning visibility: ─────────────────────────────────────────▶ reasoning texts

- Each event is first resolved against the text of its visibility *as received*
(:class:`core.text.assembler.TextAssembler`
  with the replay guard): a delta or an extending snapshot adds a suffix, which is fed on; a diverging snapshot or a
  replace gives a whole new text, which is split again from the start. So a bare delta that replays the whole
  received text (DESIGN §4) is recognised on the text the runtime sent, tags included, before any split. Deltas
  joined for a batch (:class:`core.events.JoinedDeltas`): the guard reads each joined delta that may be a replay
  alone, as the agent sent it, never the joined text; the rest is appended.
- ``visibility = "reasoning"`` text is reasoning; ``answer`` text is split by :class:`core.text.think.ThinkSplitter`,
  so inline ``<think>…</think>`` reasoning never reaches the answer and only the inside of ``<final>…</final>`` does
  once a message has one, even when a tag is cut across deltas (a possible partial tag is held back until it can be
  classified, and released at ``message_end`` / ``end``).
- A piece that ends in the first half of a surrogate pair keeps it for the next piece of that text (one left at the
  end of a message is dropped); any other lone surrogate becomes U+FFFD.
- A whole new text (diverging ``snapshot``, ``replace``) is split whole; its answer and reasoning are then applied in
  the event's mode, so a snapshot whose answer still extends the shown answer only appends.

Each source's texts stay its own: a sub-agent's text never enters the root's answer (DESIGN §6).
Cost: a delta costs O(len(delta)); a snapshot or replace O(len(text)). One copy: the replay guard compares with what
was received, so the received texts are kept; while a message's answer is its received text (no tag, no reasoning, no
held back ``<``, no lone surrogate replaced: the common case), both are one buffer, appended once. When they part
(a tag arrives), the answer gets its own copy; when they are alike again (held text released), one buffer again.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from streamrelay.core.events import JoinedDeltas, TextEvent, TextMode, Visibility, fix_surrogates
from streamrelay.core.text.assembler import REPLAY_MIN_CHARS, TextAssembler, TextChange
from streamrelay.core.text.buffer import TextBuffer
from streamrelay.core.text.think import ThinkSplitter

_Key = tuple[str | None, int]


@dataclass(slots=True)
class Split:
    """What one text event changed: the answer and the reasoning of ``(source_key, message)`` (None: no change)."""

    source_key: str | None
    message: int
    answer: TextChange | None = None
    reasoning: TextChange | None = None


def visible_final(text: str, opened: bool = False) -> str:
    """The answer part of a whole text given at once (a ``commit`` or ``end``'s text, a child's ``final_text``):
    inline reasoning removed and ``<final>`` honoured by the same rules as streamed text (:mod:`core.text.think`;
    ``opened`` as there). O(len(text))."""
    splitter = ThinkSplitter(opened)
    answer, _ = splitter.feed(text)
    rest, _ = splitter.flush()
    return answer + rest


class _Received:
    """The texts of one visibility as the runtime sent them, and the half surrogate pair each one ends in.

    Args:
        delta_replay_guard: the :class:`TextAssembler` replay guard, applied to the received text.
    """

    __slots__ = ("_carry", "texts")

    def __init__(self, delta_replay_guard: bool) -> None:
        self.texts = TextAssembler(delta_replay_guard)
        self._carry: dict[_Key, str] = {}

    def take(
        self, slot: _Key, mode: TextMode, text: str, joined: tuple[tuple[int, int], ...] | None = None
    ) -> tuple[str, bool, str, bool] | None:
        """Apply one event; return what it changed: ``(piece, whole, grown, mended)``: the new text to pass on
        (surrogates fixed); whether it is a whole new text (else a suffix); what the received text grew by (``""``
        when whole); whether a lone surrogate in ``piece`` was replaced. None: nothing changed. O(len(text)).

        ``joined``: ``text`` is deltas joined for a batch (:class:`core.events.JoinedDeltas`), given with its
        ``replay_candidates``: the guard reads each of those parts alone, as the agent sent it, never the joined text
        (DESIGN §4); the other parts are appended."""
        if not text and mode is TextMode.DELTA:
            return None
        if mode is TextMode.DELTA and (joined is not None or not self._may_replay(text)):
            if joined and self.texts.delta_replay_guard:
                grown = self._joined(slot, text, joined)
                if not grown:
                    return None
            else:
                self.texts.append(slot[0], slot[1], text)  # the common line: appended, no TextChange to build
                grown = text
            piece, whole = (self._carry.pop(slot) + grown if slot in self._carry else grown), False
        else:
            change = self.texts.apply(slot[0], slot[1], mode, text)
            if change.kind == "none":
                return None
            whole = change.kind == "replace"
            grown = "" if whole else change.appended
            piece = change.text if whole else self._carry.pop(slot, "") + grown
            if whole:
                self._carry.pop(slot, None)
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            self._carry[slot], piece = piece[-1], piece[:-1]
        fixed = fix_surrogates(piece)
        return fixed, whole, grown, fixed is not piece

    def _joined(self, slot: _Key, text: str, candidates: tuple[tuple[int, int], ...]) -> str:
        """Apply joined deltas: each part of ``candidates`` (``(offset, length)``) as one delta under the guard, the
        text between them appended; return what the received text grew by (a replay only ever extends it).
        O(len(text)), plus the guard's comparison for a candidate at least as long as the text so far."""
        before = self.texts.buffer(slot[0], slot[1])
        start = before.length if before is not None else 0
        if all(length < start + offset or start + offset < REPLAY_MIN_CHARS for offset, length in candidates):
            # None can be a replay: each is shorter than the text before it (or that text under 16), as the guard
            # reads it (:func:`core.text.assembler._replayed_by`) when every part before it was appended as it is.
            self.texts.append(slot[0], slot[1], text)
            return text
        done = 0
        appended = True  # every candidate appended as it is (none was a replay): the text grew by exactly ``text``
        for offset, length in candidates:
            if offset > done:
                self.texts.append(slot[0], slot[1], text[done:offset])
            change = self.texts.apply(slot[0], slot[1], TextMode.DELTA, text[offset : offset + length])
            appended = appended and len(change.appended) == length
            done = offset + length
        if done < len(text):
            self.texts.append(slot[0], slot[1], text[done:])
        if appended:
            return text
        after = self.texts.buffer(slot[0], slot[1])
        assert after is not None
        return after.slice(start, after.length)

    def carrying(self, slot: _Key) -> bool:
        """Whether half a surrogate pair is kept for ``slot``'s next piece."""
        return slot in self._carry

    def _may_replay(self, text: str) -> bool:
        """Whether the replay guard must look at the delta ``text`` (it needs :data:`REPLAY_MIN_CHARS`)."""
        return self.texts.delta_replay_guard and len(text) >= REPLAY_MIN_CHARS

    def end(self, source_key: str | None, message: int | None) -> None:
        """The end of a source's message (all of them when ``message`` is None): a half surrogate pair still kept
        is dropped (no character can complete it)."""
        for slot in [s for s in self._carry if s[0] == source_key and (message is None or s[1] == message)]:
            del self._carry[slot]


class VisibleText:
    """Answer and reasoning texts of every source of a run.

    Args:
        opened: every message starts inside a reasoning block opened by the prompt (:class:`ThinkSplitter`).
        delta_replay_guard: a bare delta that replays the whole text received so far (at least 16 characters that
            begin with all of it, itself at least 16; each delta as sent, never joined ones) is applied as a
            snapshot (:mod:`core.text.assembler`; DESIGN §4). The channel or run setting ``delta_replay_guard``.
    """

    def __init__(self, opened: bool = False, delta_replay_guard: bool = True) -> None:
        self.opened = opened
        self.delta_replay_guard = delta_replay_guard
        self.answers = TextAssembler(delta_replay_guard=False)  # fed derived text: the guard is applied before
        self.reasoning = TextAssembler(delta_replay_guard=False)
        self._received_answer = _Received(delta_replay_guard)
        self._received = {Visibility.ANSWER: self._received_answer, Visibility.REASONING: _Received(delta_replay_guard)}
        self._splitters: dict[_Key, ThinkSplitter] = {}
        self._shared: set[_Key] = set()
        """Answer slots whose answer is their received text: one buffer for both (module docstring)."""
        self._mended: set[_Key] = set()
        """Answer slots where a lone surrogate was replaced on the way: never shared (same length, other text)."""
        self._plain: tuple[int, TextBuffer] | None = None
        """The root message whose plain deltas go straight to its one buffer (:meth:`plain_delta`), and that buffer:
        kept while nothing else changes the texts (:meth:`apply` and :meth:`flush` forget it)."""
        self._kept: set[_Key] = set()
        """Answer slots that kept text their received text no longer has (a snapshot whose answer is a prefix of the
        one shown adds nothing): not shared until a whole new text is split again (same length may be other text)."""

    def apply(self, event: TextEvent) -> Split:
        """Apply one ``answer`` or ``reasoning`` text event (``status`` text is not text of a message)."""
        self._plain = None
        key = event.source.key if event.source is not None else None
        slot = (key, event.message)
        reasoning_event = event.visibility is Visibility.REASONING
        received = self._received[Visibility.REASONING if reasoning_event else Visibility.ANSWER]
        joined = event.replay_candidates if isinstance(event, JoinedDeltas) else None
        taken = received.take(slot, event.mode, event.text, joined)
        if taken is None:
            return Split(key, event.message)
        text, whole, grown, mended = taken
        mode = event.mode if whole else TextMode.DELTA  # whole: a snapshot or replace (a delta never replaces)
        if reasoning_event:
            return Split(key, event.message, reasoning=self._change(self.reasoning, slot, mode, text))
        if mended:
            self._mended.add(slot)
        if not whole:
            splitter = self._splitters.get(slot)
            if splitter is None:
                splitter = self._splitters[slot] = ThinkSplitter(self.opened)
            answer, reasoning = splitter.feed(text)  # a delta: the common line
            if not reasoning and (answer is grown or answer == grown) and not mended:
                if slot in self._shared:  # the common line: one buffer, grown once
                    return Split(key, event.message, answer=self.answers.grew(key, event.message, answer))
                shared = self._grown_shared(slot, answer)
                if shared is not None:
                    return Split(key, event.message, answer=shared)
            elif slot in self._shared:
                self._unshare(slot, len(grown))
            split = self._split(slot, answer, reasoning)
            self._share_again(slot)
            return split
        self._shared.discard(slot)  # the received text is a new one: the answer's buffer is the old text now
        self._kept.discard(slot)
        splitter = self._splitters[slot] = ThinkSplitter(self.opened)
        answer, reasoning = splitter.feed(text)
        if not reasoning and not self.reasoning.text(key, event.message):
            split = Split(key, event.message, answer=self._change(self.answers, slot, mode, answer))
        else:
            split = Split(
                key,
                event.message,
                answer=self._change(self.answers, slot, mode, answer),
                reasoning=self._change(self.reasoning, slot, mode, reasoning),
            )
        own = self.answers.buffer(key, event.message)
        if own is not None and own.length > len(answer):
            self._kept.add(slot)  # a snapshot whose answer begins the one shown: that one is kept, not the new text's
        self._share_again(slot)
        return split

    def plain_delta(self, message: int, text: str, joined: tuple[tuple[int, int], ...] | None = None) -> bool:
        """Apply a root ``answer`` ``delta`` of ``message`` when it takes the common line, as :meth:`apply` would
        (the message's answer is its received text, one buffer; no half surrogate pair is kept for it; the splitter
        passes ``text`` on unchanged; the replay guard cannot take it for a replay: shorter than
        :data:`REPLAY_MIN_CHARS` or than the text so far): ``text`` is appended once and the answer grew by exactly
        ``text``. False: nothing was done (the caller applies the event with :meth:`apply`).

        ``joined``: ``text`` is deltas joined for a batch (:class:`core.events.JoinedDeltas`), given with its
        ``replay_candidates``: the guard reads each of those parts alone, never the joined text, so it cannot take
        one for a replay when each is shorter than the text before it (what :meth:`_Received._joined` then appends
        whole).

        ``text`` must be non-empty and hold no surrogate (the caller checked). O(1) plus the append (and one step per
        replay candidate): the message's buffer is kept while nothing else changes the texts (:attr:`_plain`)."""
        plain = self._plain
        if plain is not None and plain[0] == message:
            buffer: TextBuffer | None = plain[1]
        else:
            buffer = self._plain_line(message)
        if buffer is None:
            return False
        if self.delta_replay_guard:
            if joined is None:
                if len(text) >= REPLAY_MIN_CHARS and buffer.length <= len(text):
                    return False
            elif joined and not all(length < buffer.length + offset for offset, length in joined):
                return False
        if plain is None or plain[1] is not buffer:
            received = self._received_answer.texts
            received.append(None, message, text)  # the answer's buffer too (shared)
            self.answers.grown(None, message, text)
            if received.last_message(None) == message and self.answers.last_message(None) == message:
                self._plain = (message, buffer)  # no later message: appends change no generation
            return True
        buffer.append(text)
        return True

    def _plain_line(self, message: int) -> TextBuffer | None:
        """The buffer of the root's ``message`` when its deltas can take the common line (:meth:`plain_delta`)."""
        slot = (None, message)
        if slot not in self._shared or self._received_answer.carrying(slot):
            return None
        splitter = self._splitters.get(slot)
        if splitter is None or not splitter.passes:
            return None
        return self.answers.buffer(None, message)

    # --- one buffer for a message's received text and its answer ---------------------------------------------

    def _grown_shared(self, slot: _Key, answer: str) -> TextChange | None:
        """The answer of ``slot`` grew by ``answer``, exactly what its received text grew by: when they share one
        buffer (or the message is new and can), the change without a second copy; None when they cannot share."""
        if slot in self._shared:
            return self.answers.grew(slot[0], slot[1], answer)
        received = self._received[Visibility.ANSWER].texts.buffer(slot[0], slot[1])
        if self.answers.buffer(slot[0], slot[1]) is None and received is not None and received.length == len(answer):
            self.answers.adopt(slot[0], slot[1], received)  # a new message: its first text is the received one
            self._shared.add(slot)
            return self.answers.grew(slot[0], slot[1], answer)
        return None

    def _unshare(self, slot: _Key, grown: int) -> None:
        """The answer of ``slot`` parts from its received text: it gets its own copy of the text before the last
        ``grown`` received characters. O(length), once."""
        received = self._received[Visibility.ANSWER].texts.buffer(slot[0], slot[1])
        assert received is not None
        self.answers.adopt(slot[0], slot[1], TextBuffer(received.slice(0, received.length - grown)))
        self._shared.discard(slot)

    def _share_again(self, slot: _Key) -> None:
        """When the answer of ``slot`` is again as long as its received text, it is that text (only removals make them
        differ: tags, reasoning, held back characters; no lone surrogate was replaced, no text kept past a snapshot):
        one buffer again. O(1)."""
        if slot in self._shared or slot in self._mended or slot in self._kept:
            return
        received = self._received[Visibility.ANSWER].texts.buffer(slot[0], slot[1])
        own = self.answers.buffer(slot[0], slot[1])
        if received is not None and own is not None and own is not received and own.length == received.length:
            self.answers.adopt(slot[0], slot[1], received)
            self._shared.add(slot)

    def flush(self, source_key: str | None, message: int | None = None) -> list[Split]:
        """Release what is held back for a source's messages (all of them when ``message`` is None):
        the end of a message or of the source. A half surrogate pair still kept is dropped."""
        self._plain = None
        out = []
        slots = [s for s in self._splitters if s[0] == source_key and (message is None or s[1] == message)]
        for slot in sorted(slots, key=itemgetter(1)):
            split = self._split(slot, *self._splitters[slot].flush())
            if split.answer is not None or split.reasoning is not None:
                out.append(split)
        for received in self._received.values():
            received.end(source_key, message)
        return out

    def _split(self, slot: _Key, answer: str, reasoning: str) -> Split:
        """The Split of answer and reasoning text appended to one message."""
        return Split(
            slot[0],
            slot[1],
            answer=self._change(self.answers, slot, TextMode.DELTA, answer) if answer else None,
            reasoning=self._change(self.reasoning, slot, TextMode.DELTA, reasoning) if reasoning else None,
        )

    @staticmethod
    def _change(assembler: TextAssembler, slot: _Key, mode: TextMode, text: str) -> TextChange | None:
        change = assembler.apply(slot[0], slot[1], mode, text)
        return change if change.kind != "none" else None
