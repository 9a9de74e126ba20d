"""Safe text: what reaches a person never carries control characters or bidi overrides.

Model output (and a prompt-injected tool result the model repeats) can hold characters that a person does not
see but that change what they see: a NUL or BEL that some clients drop or beep on, ANSI escape sequences, and the
Unicode bidirectional embedding, override and isolate controls, which reorder the text after them so that what is
displayed differs from what is there ("Trojan Source", CVE-2021-42574, https://trojansource.codes/). The run stage
passes every event through :func:`safe_event` before it builds anything a channel or the live page shows
(:meth:`core.run.stage.RunStage.handle`); the journal keeps the raw lines and a replay sanitizes them again, the same
way.

What :func:`safe_text` does, per character (:data:`UNSAFE` is the one compiled pattern):

- tab and newline: kept.
- the other C0 controls U+0000..U+001F and DEL U+007F: removed. Carriage return too, so CR LF becomes LF and a
  lone CR (old Mac line ends, a progress bar's return) joins its lines. ESC is removed, so an ANSI sequence
  (``ESC [31m``) leaves its harmless printable tail ``[31m``: removing the whole sequence would depend on the
  next delta.
- the C1 controls U+0080..U+009F: removed, except NEL U+0085, a line break (UAX #14), which becomes a newline.
- U+2028 LINE SEPARATOR: a newline; U+2029 PARAGRAPH SEPARATOR: two (a paragraph break as the chunker knows it).
  Platforms and markdown renderers treat them inconsistently (older JavaScript as line terminators), and the
  chunker breaks lines at newlines only.
- the bidi embeddings and overrides LRE U+202A, RLE U+202B, PDF U+202C, LRO U+202D, RLO U+202E and the bidi
  isolates LRI U+2066, RLI U+2067, FSI U+2068, PDI U+2069: removed (Unicode UAX #9 §2.1-2.4, the characters the
  Trojan Source paper uses).
- U+FEFF (byte order mark, ZERO WIDTH NO-BREAK SPACE): removed. Invisible; a byte order mark inside text is a
  producer's artifact, and as a no-break joiner it is deprecated in favour of U+2060 WORD JOINER.

Kept on purpose: the implicit bidi marks LRM U+200E, RLM U+200F and ALM U+061C (Unicode UAX #9,
https://www.unicode.org/reports/tr9/): they act as one strong letter each, so they cannot reorder text beyond
their neighbours, and right-to-left writers need them to place punctuation and numbers; ZWJ U+200D, ZWNJ U+200C
and the variation selectors (emoji sequences, Persian and Indic shaping); emoji tag characters (subdivision flags).
Letters of any script (Hebrew, Arabic) are untouched: only the explicit formatting characters of UAX #9 §2 go.

Each character is replaced on its own, never by looking at its neighbours, so the function is a homomorphism
over concatenation: ``safe_text(a + b) == safe_text(a) + safe_text(b)``. Sanitizing each delta therefore gives
the sanitized whole, and a snapshot's sanitized text still begins with the sanitized text before it (the text
assembler's prefixes line up); surrogates, including half a pair at the end of a delta, are left as they are.
Cost: one C-level scan per text (``re.search``); the substitution runs only when something unsafe is there.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar, cast

from streamrelay.core.events import (
    ApprovalRequest,
    Citation,
    Commit,
    End,
    ErrorEvent,
    Event,
    JoinedDeltas,
    Media,
    Phase,
    Source,
    Status,
    TextEvent,
    ToolResult,
)

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
"""Every character :func:`safe_text` changes (see the module docstring)."""

_REPLACEMENTS = {"\x85": "\n", "\u2028": "\n", "\u2029": "\n\n"}
"""The line breaks among :data:`UNSAFE`: replaced, not removed. Every other match becomes ``""``."""


def _replace(match: re.Match[str]) -> str:
    return _REPLACEMENTS.get(match.group(), "")


def safe_text(text: str) -> str:
    """``text`` with control characters, bidi embeddings / overrides / isolates and U+FEFF removed and the
    Unicode line separators made newlines (the table in the module docstring). Idempotent; character-local
    (``safe_text(a + b) == safe_text(a) + safe_text(b)``); O(len(text)), returns ``text`` itself when it is
    already safe."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(_replace, text)


def _safe_source(source: Source | None) -> Source | None:
    """The source with its shown identifiers sanitized (agent ids and paths appear in status lines, thread titles
    and on the live page). Every event of a source goes through this, so its :attr:`Source.key` stays one key."""
    if source is None:
        return None
    update = {
        name: safe_text(value)
        for name in ("agent_id", "session_id", "parent_session_id", "path")
        if isinstance(value := getattr(source, name), str) and UNSAFE.search(value) is not None
    }
    return source.model_copy(update=update) if update else source


_TEXT_FIELDS: dict[type[Any], tuple[str, ...]] = {
    TextEvent: ("text",),
    JoinedDeltas: ("text",),  # looked up by exact type: the joined deltas are text as much as one delta
    Status: ("text",),
    ToolResult: ("summary", "name"),
    Phase: ("name",),
    Commit: ("text",),
    End: ("final_text",),
    ErrorEvent: ("message",),
    Media: ("caption",),
    Citation: ("title",),
    ApprovalRequest: ("question", "action"),
}
"""The fields of each event kind that people read. Not a tool call's name or arguments: those go to the parent
loop on the pipeline lane as they came (the run stage sanitizes a tool's name where it shows it)."""

_E = TypeVar("_E", bound=Event)


def safe_event(event: _E) -> _E:
    """``event`` with every text a person may read passed through :func:`safe_text`: the fields of
    :data:`_TEXT_FIELDS` and the identifiers of its ``source``. The same object when nothing changes (the
    common case: no copy). Deterministic, so a journal replay gives the same events."""
    update: dict[str, str | Source | tuple[tuple[int, int], ...] | None] = {}
    for name in _TEXT_FIELDS.get(type(event), ()):
        value = getattr(event, name)
        if isinstance(value, str) and UNSAFE.search(value) is not None:
            update[name] = UNSAFE.sub(_replace, value)
    if event.source is not None:
        source = _safe_source(event.source)
        if source is not event.source:
            update["source"] = source
    if "text" in update and isinstance(event, JoinedDeltas) and event.replay_candidates:
        update["replay_candidates"] = _moved(event.text, event.replay_candidates)
    return cast(_E, event.model_copy(update=update)) if update else event


def _moved(text: str, parts: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Where the ``(offset, length)`` parts of ``text`` lie in ``safe_text(text)`` (it is character-local, so each
    part is the safe text of its own characters). O(len(text))."""
    return tuple((len(safe_text(text[:at])), len(safe_text(text[at : at + n]))) for at, n in parts)
