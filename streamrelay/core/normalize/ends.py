"""How a stream's own bad end and what no chat can show become normalized events (issue 26).

A stream that fails, refuses or is cut says so with an ``error`` event whose ``ends`` is ``error``, ``refused`` or
``cut`` (:attr:`core.events.ErrorEvent.ends`): the run then ends with that status even when its runtime sends ``end``
``ok`` (:meth:`core.run.controller.RunController.end`). Something a chat cannot show (an image given inline, an approval
the client answers) is told as a status line and a report line, never dropped unseen. Each normalizer's mapping table
says which of its events these are.
"""

from __future__ import annotations

from streamrelay.core.events import EndStatus, ErrorEvent, Event, Source, Status
from streamrelay.core.normalize.base import one_line


def stream_failed(run_id: str, message: str, source: Source | None = None) -> ErrorEvent:
    """The stream's own failure (a provider's ``error`` event, a failed response, a run error): an ``error`` event
    that ends the root's run as ``error`` (:attr:`core.events.ErrorEvent.ends`); a sub-agent's (``source`` set) is a
    plain error line, since its own ``end`` says how it ended."""
    ends = EndStatus.ERROR if source is None else None
    return ErrorEvent(run=run_id, message=message or "stream error", ends=ends, source=source)


def stream_refused(run_id: str, explanation: str, source: Source | None = None) -> ErrorEvent:
    """The model (or the provider's filter) declined to answer: the run ends ``refused``; ``explanation`` (the
    provider's own words, when it gave any) is what the person reads in the notice."""
    text = one_line(explanation, REFUSAL_MAX_CHARS)
    message = f"refused: {text}" if text else "refused: the model declined to answer"
    return ErrorEvent(run=run_id, message=message, ends=EndStatus.REFUSED if source is None else None, source=source)


def stream_cut(run_id: str, reason: str, source: Source | None = None) -> ErrorEvent:
    """The answer was cut off at the model's output limit (``reason``: the provider's word for it, e.g.
    ``max_tokens``): the run ends ``cut``, what was said is shown with a notice and never committed."""
    message = f"cut off: the model reached its output limit ({one_line(reason)})"
    return ErrorEvent(run=run_id, message=message, ends=EndStatus.CUT if source is None else None, source=source)


REFUSAL_MAX_CHARS = 300
"""The longest refusal explanation the notice keeps (characters): the provider's own sentence, whole."""


def not_shown(run_id: str, what: str, source: Source | None = None) -> list[Event]:
    """Something a stream gave that no chat can show (an image given inline, an approval the client must answer):
    a status line saying so, and the same line among the run's report errors (an ``error`` that does not end the
    run), so nothing is dropped unseen."""
    line = one_line(f"not shown: {what}")
    return [Status(run=run_id, text=line, source=source), ErrorEvent(run=run_id, message=line, source=source)]
