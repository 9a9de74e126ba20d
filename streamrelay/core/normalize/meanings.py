"""What each protocol event type means for a run: the tables of the seven stream formats (issue 26).

Every normalizer module has ``EVENT_TYPES``, a table from each event type of its protocol (the keys of
:func:`event_types` for one raw line: a line's ``type``, and where the protocol nests kinds, the nested one, e.g.
``content_block_delta/text_delta``) to what it means: one or more :class:`Meaning`. No type falls through silently:
a type the normalizer does not read is in its table as :attr:`Meaning.IGNORED` (ignored on purpose, with the reason in
the module docstring), and ``tests/unit/test_event_tables.py`` replays every stream the project has (its recordings,
the protocols' upstream fixtures, the reported cases, shared/streams) and fails on a type that has no row. A type
that reaches the relay at run time without a row (a protocol's next release) is ignored for forward compatibility
and logged once per process (:func:`undeclared`), so it is seen and given a row.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping

_log = logging.getLogger(__name__)


class Meaning(enum.StrEnum):
    """What an event type is to a run."""

    TEXT = "text"
    """Answer text (a delta, a snapshot)."""
    REASONING = "reasoning"
    """Reasoning text: never shown unless the channel says so."""
    TOOL_CALL = "tool call"
    """A tool call or a part of it (start, argument fragments, end): the pipeline lane."""
    TOOL_RESULT = "tool result"
    """A tool's result: a short status line, never the raw output."""
    MEDIA = "media"
    """An image, a file, audio: sent by its URL, or told as not shown."""
    SOURCE = "source"
    """A citation or source (a URL the answer relies on): a ``citation`` event, listed as a link after the committed
    answer (:mod:`core.delivery.sources`)."""
    STATUS = "status"
    """A progress line (a step, a sub-agent started, a working state)."""
    ERROR = "error"
    """The stream's own failure: ends the run ``error``."""
    REFUSAL = "refusal"
    """The model or the provider declined: ends the run ``refused``."""
    CUT = "cut"
    """The answer was cut at the output limit: ends the run ``cut``."""
    BOUNDARY = "boundary"
    """A message, block, step or run starts or ends (structure, no text of its own)."""
    NOT_SHOWN = "not shown"
    """Something no chat can show: a status line and a report line say so."""
    APPROVAL = "approval"
    """A request that a person approve an action: an ``approval.request`` (:mod:`core.run.approvals`)."""
    IGNORED = "ignored"
    """Ignored on purpose (bookkeeping, history already streamed, application data): the reason is in the module."""


EventTable = Mapping[str, frozenset[Meaning]]


def table(rows: Mapping[str, Meaning | tuple[Meaning, ...]]) -> EventTable:
    """An :data:`EventTable` from rows of one meaning or several."""
    return {key: frozenset(value if isinstance(value, tuple) else (value,)) for key, value in rows.items()}


_warned: set[tuple[str, str]] = set()


def undeclared(provider: str, rows: EventTable, types: Iterable[str]) -> list[str]:
    """The ``types`` of a line that have no row in ``rows``; each is logged once per process (a warning naming the
    format and the type) so a protocol's new type is seen. O(len(types))."""
    missing = [t for t in types if t not in rows]
    for kind in missing:
        if (provider, kind) not in _warned and len(_warned) < 1000:
            _warned.add((provider, kind))
            _log.warning("%s stream: event type %r has no row in the format's table: ignored", provider, kind[:80])
    return missing
