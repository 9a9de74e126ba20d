"""Inline reasoning tags: splits ``<think>…</think>`` and ``<final>…</final>`` out of answer text, one delta at a time.

Where the tags come from: DeepSeek-R1 writes its chain of thought between ``<think>`` and ``</think>`` before the
answer. DeepSeek's own API moves it to a separate ``reasoning_content`` field
(https://api-docs.deepseek.com/guides/reasoning_model), but the same weights (and Qwen3, QwQ and their
distillations) served by an OpenAI-compatible server without a reasoning parser leave the tags inline in the
answer text; vLLM's reasoning parsers do this split on the server when they are enabled
(https://docs.vllm.ai/en/latest/features/reasoning_outputs.html). Other fine-tunes and prompts use
``<thinking>``, ``<thought>`` or ``<reasoning>``. Gemini, prompted to "format every reply as <think>...</think>
then <final>...</final>" (openclaw's tagged reasoning mode), marks its answer with ``<final>…</final>``, and on long
turns often leaves the ``<think>`` block unclosed: ``<think>plan…<final>answer</final>`` (openclaw issue #87712,
https://github.com/openclaw/openclaw/issues/87712). The stream arrives as deltas cut anywhere, tags included:
``"<thi"`` + ``"nk>let me"`` + ``" see</th"`` + ``"ink>The answer"``.

Rules:

- Tags: the reasoning openers ``<think>``, ``<thinking>``, ``<thought>``, ``<reasoning>`` and their closers
  (``</think>`` …), and the answer markers ``<final>`` and ``</final>``; ASCII case-insensitive (``<THINK>``,
  ``</Final>``; a non-ASCII look-alike such as the Kelvin sign is not folded), no attributes, no spaces inside.
  Tags appear in neither output.
- Where (models put tags at these places only; everywhere else the same characters are text):

  - before the answer: while the message has no answer text yet (whitespace aside), a reasoning opener opens a
    reasoning block and ``<final>`` opens the final block;
  - inside a reasoning block: any reasoning closer closes it (tags are not paired by name: ``<think>…</thought>``
    closes), and ``<final>`` closes it *and* opens the final block (an unclosed think block ends at ``<final>``);
    a reasoning opener there is reasoning text;
  - inside the final block: ``</final>`` closes it; every other tag there is answer text;
  - after a final block (once a ``<final>`` was seen in the message): a reasoning opener opens a reasoning
    block and ``<final>`` opens another final block, whose answer text follows the first one's.

  So an answer that explains ``<think>`` or ``<final>`` tags, in prose, an inline code span or a code fence, keeps
  them ("wrap your answer in <final>" loses nothing), and so does a stray ``</think>`` or ``</final>`` in an
  answer. The price: a model that writes answer text (untagged thinking aloud) *before* ``<final>`` shows its
  tags as text, because its answer had started; and an answer inside ``<final>`` that writes ``</final>`` in its
  prose ends its block there (the rest is on the reasoning side, see "Classes").
- Classes: text inside a reasoning block is reasoning; text inside a final block is answer; text outside any block
  is answer until the message's first ``<final>`` and reasoning after it (once the model marked its answer, text
  outside the final blocks is not the answer: openclaw, for Gemini, drops it; here it stays on the reasoning side,
  shown only where reasoning is). A final block left open at the end of the message is answer to the end.
- Look-alikes (``<th>``, ``<thinker>``, ``< think>``, ``<think >``, ``<final/>``, ``<b>``, a lone ``<``) are text of
  the current class, unchanged, released as soon as they can no longer become a tag (``"<thinke"`` at once,
  ``"<think"`` not).
- Unclosed reasoning block: everything after its opener is reasoning (up to a ``<final>``), and stays reasoning at
  :meth:`ThinkSplitter.flush`.
- Whitespace after a closer or ``<final>``: while no answer character has been emitted yet in this message, the
  whitespace (``str.isspace``: newlines, ``"\\r\\n"``, spaces) that starts the answer after a reasoning closer or
  ``<final>`` is dropped, however many deltas it spans; models write ``"</think>\\n\\nAnswer"`` and
  ``"<final>\\nAnswer"``, and the answer should start at ``"Answer"``.
- Held tail: a ``<`` followed by a proper prefix of a tag that could still be one here (see "Where") at the end of
  what was received is held back until the next delta or :meth:`~ThinkSplitter.flush` can classify it; it is at
  most 11 characters (the longest tag, ``</reasoning>``, has 12). Once the answer has started outside any block
  and no ``<final>`` was seen, nothing is ever held.
- Opened by the chat template (:func:`opened_by_template`): DeepSeek-R1 and its distillations (and Qwen3 / QwQ) served
  without a reasoning parser get ``<think>\\n`` from the chat template at the end of the prompt, so they stream their
  reasoning, then ``</think>`` with no opener, then the answer (reports: open-webui#9808
  https://github.com/open-webui/open-webui/issues/9808, deepseek-ai/DeepSeek-R1#352 and #526
  https://github.com/deepseek-ai/DeepSeek-R1/issues/352, llama.cpp#11861
  https://github.com/ggml-org/llama.cpp/issues/11861; the recorded stream in ik_llama.cpp#690 sends ``"\\n</think>"``
  as one delta). The splitter cannot know it while streaming (the answer has started, so a closer is text there, and
  the split of streamed text never depends on what comes later), so the rule is applied when the answer is committed
  (a ``commit``, the ``end``; :meth:`core.run.stage.RunStage._answer_text`): when the first tag of a message (any
  reasoning opener or closer, ``<final>``, ``</final>``) is a reasoning closer that starts a line (at the start of the
  text or right after ``"\\n"``) within its first :data:`OPENED_BY_TEMPLATE_CHARS` characters, the message is committed
  as read opened (``ThinkSplitter(opened=True)``): the text before the closer is reasoning, the answer what follows.
  The channel or run setting ``reasoning_opened`` says so from the first character (nothing of the reasoning shows
  live; without it a preview shows the reasoning until the commit edits it to the answer, and ``block`` mode keeps the
  blocks it sent before the closer).
- Independence of splitting: for every text and every way to cut it into deltas, the concatenated outputs of the
  feeds and the flush are the same as for the whole text fed at once. A ``<`` is classified only from the at most
  12 characters starting at it and the state the text before it left, and only once they are there (or at flush).

Cost: a feed costs O(len(delta) + len(held)) with ``len(held) <= 11``: the delta is scanned for ``<`` with
``str.find``, each ``<`` looks at most 12 characters ahead, earlier text is never rescanned.

Example::

    splitter = ThinkSplitter()
    splitter.feed("<thi")             # ("", ""), held "<thi"
    splitter.feed("nk>let me")        # ("", "let me")
    splitter.feed(" see</th")         # ("", " see"), held "</th"
    splitter.feed("ink>\\n\\nThe answer")  # ("The answer", "")
    splitter.flush()                  # ("", "")
    split_think("<think>hm</think>\\nYes")  # ("Yes", "hm", "")
    split_think("<think>hm<final>Yes</final>")  # ("Yes", "hm", "")
"""

from __future__ import annotations

import re

__all__ = ["OPENED_BY_TEMPLATE_CHARS", "ThinkSplitter", "opened_by_template", "split_think"]

OPENED_BY_TEMPLATE_CHARS = 32_768
"""How far into a message a line-starting ``</think>`` with no tag before it marks a message whose reasoning block
the chat template opened (:func:`opened_by_template`): R1's reasoning is often thousands of characters long."""

_FIRST_TAG = re.compile(r"<(/?)(think|thinking|thought|reasoning|final)>", re.IGNORECASE | re.ASCII)

_OPENERS = frozenset({"<think>", "<thinking>", "<thought>", "<reasoning>"})
_CLOSERS = frozenset("</" + opener[1:] for opener in _OPENERS)
_FINAL = "<final>"
_FINAL_END = "</final>"
_MAX_TAG_CHARS = max(len(tag) for tag in _OPENERS | _CLOSERS | {_FINAL, _FINAL_END})  # 12: "</reasoning>"

# The block a message's text is in: none, a reasoning block, the final block.
_NONE, _THINK, _ANSWER = 0, 1, 2


def _prefixes(tags: frozenset[str]) -> frozenset[str]:
    return frozenset(tag[:end] for tag in tags for end in range(1, len(tag)))  # proper prefixes, all start "<"


_Tags = tuple[frozenset[str], frozenset[str]]  # the tags that count at a place, and their proper prefixes


def _tags(*tags: str) -> _Tags:
    found = frozenset(tags)
    return found, _prefixes(found)


_OUTSIDE_TAGS = _tags(*_OPENERS, _FINAL)  # before the answer, or after a final block
_THINK_TAGS = _tags(*_CLOSERS, _FINAL)  # inside a reasoning block
_ANSWER_TAGS = _tags(_FINAL_END)  # inside the final block


def _classify(window: str, tags: _Tags) -> str | None:
    """What the ``<`` that starts ``window`` begins, among ``tags`` (the tags that count here).

    Args:
        window: the received text from that ``<`` on, cut to at most ``_MAX_TAG_CHARS`` characters. When it is
            shorter, it reaches the end of what has been received so far.
        tags: the tags that are tags at this point, and their proper prefixes.

    Returns:
        The tag, lower-cased, when a whole tag starts there; ``None`` when it is still undecided (the window is a
        proper prefix of a tag and more text may complete it); ``""`` when the ``<`` is plain text.
    """
    close = window.find(">")
    head = window if close < 0 else window[: close + 1]
    if not head.isascii():  # tags are ASCII; lower() of non-ASCII could even change the length
        return ""
    head = head.lower()
    if head in tags[0]:
        return head
    if close < 0 and head in tags[1]:
        return None
    return ""


class ThinkSplitter:
    """Splits one message's streamed text into answer text and reasoning text, across inline tags.

    Feed each delta of one assistant message with :meth:`feed`, then call :meth:`flush` at the end of the
    message. Each call returns ``(answer, reasoning)``: the text newly classified as each, in stream order within
    each class (how answer and reasoning interleave inside one call is not kept). Rules, the held tail and the
    cost are in the module docstring: ``<think>``-like tags switch to reasoning, ``<final>…</final>`` marks the
    answer, tags count only where models put them and are never shown; a possible partial tag at the end is held
    back; whitespace that starts the answer after a closer or ``<final>`` is dropped while no answer text has been
    emitted; each feed costs O(len(delta) + 11).

    Args:
        opened: each message starts inside a reasoning block whose opener was in the prompt (DeepSeek-R1's chat
            template ends the prompt with ``<think>\\n``, so the model streams its reasoning, then ``</think>``,
            then the answer). A message that never closes the block (nor reaches a ``<final>``) is all reasoning.
    """

    __slots__ = ("_answered", "_block", "_final_seen", "_held", "_opened", "_strip")

    def __init__(self, opened: bool = False) -> None:
        self._opened = opened
        self._reset()

    def _reset(self) -> None:
        self._block = _THINK if self._opened else _NONE
        self._held = ""
        self._answered = False  # a non-whitespace answer character has been emitted in this message
        self._final_seen = False  # a <final> opened the final block in this message
        self._strip = False  # a closer or <final> came while nothing was answered: drop the answer's leading spaces

    @property
    def inside(self) -> bool:
        """Whether the text received so far ends inside a reasoning block (an opener without its closer)."""
        return self._block == _THINK

    @property
    def in_final(self) -> bool:
        """Whether the text received so far ends inside a final block (``<final>`` without ``</final>``)."""
        return self._block == _ANSWER

    @property
    def held(self) -> str:
        """The held-back tail: ``""`` or a ``<`` plus a proper prefix of a tag, at most 11 characters."""
        return self._held

    @property
    def passes(self) -> bool:
        """Whether :meth:`feed` passes any text on as answer, unchanged: the answer started outside any block, no
        ``<final>`` came and nothing is held back, so no tag can come (module docstring, "Where"). O(1)."""
        return not self._held and self._block == _NONE and self._answered and not self._final_seen

    def _tags_here(self) -> _Tags | None:
        """The tags that count at the current place (module docstring, "Where"); None: no tag can come."""
        if self._block == _THINK:
            return _THINK_TAGS
        if self._block == _ANSWER:
            return _ANSWER_TAGS
        return _OUTSIDE_TAGS if self._final_seen or not self._answered else None

    def feed(self, text: str) -> tuple[str, str]:
        """Take the next delta; return ``(answer, reasoning)``: the text newly classified as each, in order.

        A possible partial tag at the end (e.g. ``"<thi"``, ``"</fin"``, or even a lone ``"<"``) is held back
        until the next delta (or :meth:`flush`) can classify it.

        Args:
            text: the next delta of the message, cut anywhere (a tag may span several deltas).

        Returns:
            ``(answer, reasoning)``, either may be ``""``. Cost O(len(text) + len(held)).
        """
        if not self._held and self._block == _NONE and self._answered and not self._final_seen:
            return (
                text,
                "",
            )  # the answer started outside any block and no <final> came: no tag can come (:attr:`passes`)
        buf = self._held + text if self._held else text
        answer: list[str] = []
        reasoning: list[str] = []
        start = 0  # buf[start:] is not yet emitted
        while True:
            lt = -1 if self._tags_here() is None else buf.find("<", start)
            if lt < 0:  # no "<" left, or the answer has started outside any block: no tag can come
                self._held = ""
                self._emit(buf[start:], answer, reasoning)
                break
            self._emit(buf[start:lt], answer, reasoning)  # the state at the "<" is the text's before it
            start = lt
            tags = self._tags_here()
            if tags is None:
                continue
            tag = _classify(buf[lt : lt + _MAX_TAG_CHARS], tags)
            if tag is None:
                self._held = buf[lt:]
                break
            if tag:
                self._switch(tag)
                start = lt + len(tag)
            else:
                self._emit("<", answer, reasoning)  # plain text (it may start the answer)
                start = lt + 1
        return "".join(answer), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        """End of the message: release what is held back; return ``(answer, reasoning)``.

        A partial tag that never completed is plain text of the current class (inside an unclosed reasoning block
        it is reasoning; an unclosed reasoning block is never turned into answer; an unclosed final block is
        answer). The splitter is then as new, ready for the next message.
        """
        answer: list[str] = []
        reasoning: list[str] = []
        self._emit(self._held, answer, reasoning)
        self._reset()
        return "".join(answer), "".join(reasoning)

    def _emit(self, piece: str, answer: list[str], reasoning: list[str]) -> None:
        """Append ``piece`` to the current class, applying the leading-whitespace rule to answer text."""
        if not piece:
            return
        if self._block == _THINK or (self._block == _NONE and self._final_seen):
            reasoning.append(piece)
            return
        if self._strip:
            piece = piece.lstrip()
            if not piece:
                return
            self._strip = False
        if not self._answered and not piece.isspace():
            self._answered = True
        answer.append(piece)

    def _switch(self, tag: str) -> None:
        """Apply a whole tag (lower-cased) that counts here."""
        if tag in _OPENERS:
            self._block = _THINK
            return
        if tag == _FINAL_END:
            self._block = _NONE
            return
        if tag == _FINAL:
            self._block = _ANSWER
            self._final_seen = True
        else:  # a reasoning closer
            self._block = _NONE
        if not self._answered:
            self._strip = True


def split_think(text: str, opened: bool = False) -> tuple[str, str, str]:
    """Stateless split of a full text, for ``snapshot`` / ``replace`` events.

    Args:
        text: the whole text of the message so far.

    Returns:
        ``(answer, reasoning, held)``: exactly what a fresh :class:`ThinkSplitter` gives for ``feed(text)`` in one
        call (answer and reasoning are the full texts so far) plus its held tail (to treat as text of the final
        class if the message ends there, as :meth:`ThinkSplitter.flush` would). Cost O(len(text)).
    """
    splitter = ThinkSplitter(opened)
    answer, reasoning = splitter.feed(text)
    return answer, reasoning, splitter.held


def opened_by_template(text: str) -> bool:
    """Whether ``text``, a message read with ``opened=False``, is one whose reasoning block the chat template
    opened: its first tag is a reasoning closer (``</think>``, ``</thinking>``, ``</thought>``, ``</reasoning>``,
    ASCII case-insensitive) that starts a line, within the first :data:`OPENED_BY_TEMPLATE_CHARS` characters
    (module docstring, "Opened by the chat template"). O(min(len(text), OPENED_BY_TEMPLATE_CHARS)).

    Example: ``opened_by_template("Let me see.\n</think>\n\nYes.")`` is True; ``"Use </think> to close it"``,
    ``"<think>a</think>b"`` and ``"x\n</final>"`` are False.
    """
    match = _FIRST_TAG.search(text, 0, OPENED_BY_TEMPLATE_CHARS)
    if match is None or not match.group(1) or match.group(2).lower() == "final":
        return False
    return match.start() == 0 or text[match.start() - 1] == "\n"
