"""Visible text: separates what a person may see (the answer) from reasoning, per (source, message).

text events ─▶ surrogate carry ─▶ inline ``<think>`` split ─▶ answer texts   (TextAssembler)
                                                         └▶ reasoning texts (another TextAssembler)

- ``visibility = "reasoning"`` text is reasoning; ``answer`` text is split by :class:`core.think.ThinkSplitter`,
  so inline ``<think>…</think>`` reasoning never reaches the answer, even when a tag is cut across deltas (a
  possible partial tag is held back until it can be classified, and released at ``message_end`` / ``end``).
- A delta that ends in the first half of a surrogate pair keeps it for the next delta; a lone surrogate
  becomes U+FFFD.
- A ``snapshot`` / ``replace`` is split whole (the splitter's state then continues from that text).

Each source's texts stay its own: a sub-agent's text never enters the root's answer (DESIGN §6).
Cost: a delta costs O(len(delta)); a snapshot or replace O(len(text)).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.assembler import TextAssembler, TextChange
from core.events import TextEvent, TextMode, Visibility, fix_surrogates
from core.think import ThinkSplitter

_Key = tuple[str | None, int]


@dataclass(frozen=True)
class Split:
    """What one text event changed: the answer and the reasoning of ``(source_key, message)`` (None: no change)."""

    source_key: str | None
    message: int
    answer: TextChange | None = None
    reasoning: TextChange | None = None


def visible_final(text: str, opened: bool = False) -> str:
    """The answer part of a whole text given at once (a ``commit`` or ``end``'s text, a child's ``final_text``):
    inline reasoning removed by the same rules as streamed text (:mod:`core.think`; ``opened`` as there).
    O(len(text))."""
    splitter = ThinkSplitter(opened)
    answer, _ = splitter.feed(text)
    rest, _ = splitter.flush()
    return answer + rest


class VisibleText:
    """Answer and reasoning texts of every source of a run.

    Args:
        opened: every message starts inside a reasoning block opened by the prompt (:class:`ThinkSplitter`).
    """

    def __init__(self, opened: bool = False) -> None:
        self.opened = opened
        self.answers = TextAssembler()
        self.reasoning = TextAssembler()
        self._splitters: dict[_Key, ThinkSplitter] = {}
        self._carry: dict[_Key, str] = {}

    def apply(self, event: TextEvent) -> Split:
        """Apply one ``answer`` or ``reasoning`` text event (``status`` text is not text of a message)."""
        key = event.source.key if event.source is not None else None
        slot = (key, event.message)
        text = event.text
        if event.mode is TextMode.DELTA:
            text = self._carry.pop(slot, "") + text
            if text and "\ud800" <= text[-1] <= "\udbff":
                self._carry[slot], text = text[-1], text[:-1]
        text = fix_surrogates(text)
        if event.visibility is Visibility.REASONING:
            return Split(key, event.message, reasoning=self._change(self.reasoning, slot, event.mode, text))
        if event.mode is TextMode.DELTA:
            splitter = self._splitters.get(slot)
            if splitter is None:
                splitter = self._splitters[slot] = ThinkSplitter(self.opened)
            answer, reasoning = splitter.feed(text)
            mode = TextMode.DELTA
        else:
            splitter = self._splitters[slot] = ThinkSplitter(self.opened)
            answer, reasoning = splitter.feed(text)
            mode = event.mode
            if reasoning or self.reasoning.text(key, event.message):
                return Split(
                    key,
                    event.message,
                    answer=self._change(self.answers, slot, mode, answer),
                    reasoning=self._change(self.reasoning, slot, mode, reasoning),
                )
        return Split(
            key,
            event.message,
            answer=self._change(self.answers, slot, mode, answer) if answer or mode is not TextMode.DELTA else None,
            reasoning=self._change(self.reasoning, slot, TextMode.DELTA, reasoning) if reasoning else None,
        )

    def flush(self, source_key: str | None, message: int | None = None) -> list[Split]:
        """Release what is held back for a source's messages (all of them when ``message`` is None):
        the end of a message or of the source."""
        out = []
        for slot in [s for s in self._splitters if s[0] == source_key and (message is None or s[1] == message)]:
            answer, reasoning = self._splitters[slot].flush()
            if answer or reasoning:
                out.append(
                    Split(
                        source_key,
                        slot[1],
                        answer=self._change(self.answers, slot, TextMode.DELTA, answer) if answer else None,
                        reasoning=self._change(self.reasoning, slot, TextMode.DELTA, reasoning) if reasoning else None,
                    )
                )
        return out

    @staticmethod
    def _change(assembler: TextAssembler, slot: _Key, mode: TextMode, text: str) -> TextChange | None:
        change = assembler.apply(slot[0], slot[1], mode, text)
        return change if change.kind != "none" else None
