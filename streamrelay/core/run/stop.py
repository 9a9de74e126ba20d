"""Stop: a person ends a run from the chat (a Stop control) or from its live page.

The bot that owns the platform's updates forwards the click to ``POST /v1/runs/{run}/stop``; the live page posts its
own stop with the run's stop token. Either way :func:`stop_run` does the same:

1. the run is marked stopped at once: the agent's later lines of the run are refused with a 409
   (:data:`STOPPED_ERROR`), never acknowledged and dropped;
2. a :class:`core.events.Stop` line is journaled like every accepted line (durable: a restarted sidecar replays
   it and stops the run again, shared/DESIGN.md §8), then handed to the run's worker;
3. the worker puts a ``stop`` unit on the run's pipeline lane (:func:`stop_unit`: the parent loop reads it and
   stops its agent), and ends the run ``cancelled`` (:meth:`core.run.controller.RunController.stop`): what the
   answer shows is finalized as it is, a short notice ("⏹ Stopped.") follows, the Stop control is taken off
   (:mod:`core.run.stop_controls`), and the report says ``end_status: cancelled`` with :func:`stop_note` among its
   errors.

Answers (:class:`StopState`): a second stop of the same run answers the same state (idempotent); an unknown run
is a 404, a run that ended otherwise (its agent's ``end``, an error) a 409 saying so.

Pipeline unit shape (JSON)::

    {"index": 7, "kind": "stop", "run": "r1", "by": "telegram:user:123", "reason": "pressed Stop", "source": null}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamrelay.core.errors import IngestError
from streamrelay.core.events import Stop, event_to_json
from streamrelay.core.ingest.clients import split_key
from streamrelay.core.lanes.pipeline import StopAsked
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.run.stop_controls import is_short_id, short_id

if TYPE_CHECKING:
    from streamrelay.core.ingest.admission import Admission

STOPPED_ERROR = "run stopped by the reader; stop streaming"
"""The 409 an agent's line gets once its run was stopped."""
STOP_PREFIX = "stopped by the reader"
"""How a stopped run's report names the stop among its errors (:func:`stop_note`); the ledger keeps it with the
run's end, so a stopped run is known as such after a restart."""
MAX_BY_CHARS = 200
BY_PATTERN = re.compile(r"[A-Za-z0-9:_.@#+-]{1,200}")
"""Who stopped a run: an id like ``telegram:user:123`` (letters, digits and ``:_.@#+-``)."""
MAX_REASON_CHARS = 500
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
"""What a stop's ``reason`` may not hold: control characters (newlines too), the Unicode line separators, bidi
embeddings / overrides / isolates, U+FEFF (:mod:`core.text.safe_text`'s list) and lone surrogates. The reason is read
back in the report, the logs and the ops page as one line: a newline would forge a log line, an override would
reorder what an operator reads, a lone surrogate cannot be encoded as UTF-8 at all."""


def check_reason(reason: Any) -> str | None:
    """A stop's ``reason``: ``None`` (or ``""``: none), else one line of printable text.

    Raises:
        IngestError: 400, it is not a string, is longer than :data:`MAX_REASON_CHARS` characters, or holds a
            character of :data:`_UNPRINTABLE` (the message names its code point).
    """
    if reason is None:
        return None
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise IngestError(f"reason must be a string of at most {MAX_REASON_CHARS} characters")
    if (bad := _UNPRINTABLE.search(reason)) is not None:
        raise IngestError(
            f"reason must be one line of printable text: U+{ord(bad.group()):04X} at character {bad.start()} is a "
            "control, bidi or lone surrogate character"
        )
    return reason or None


def stop_note(stop: Stop) -> str:
    """The line a stopped run's report carries: ``stopped by the reader (telegram:user:1): too long``."""
    who = f" ({stop.by})" if stop.by else ""
    why = f": {stop.reason}" if stop.reason else ""
    return f"{STOP_PREFIX}{who}{why}"


def stop_unit(stop: Stop) -> StopAsked:
    """What the pipeline lane makes the ``stop`` unit of (``{"kind": "stop", "by", "reason", "source": null}``)."""
    return StopAsked(by=stop.by, reason=stop.reason)


def is_stop_note(error: str) -> bool:
    """True when a report's error line says the run was stopped by its reader."""
    return error.startswith(STOP_PREFIX)


@dataclass(frozen=True)
class StopState:
    """What a stop request answers: ``run`` (the caller's run id), ``state`` (``stopping``: the run is ending now;
    ``stopped``: it ended stopped), ``by`` and ``reason`` of the first stop (a later one changes nothing)."""

    run: str
    state: str
    by: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"run": self.run, "state": self.state, "by": self.by, "reason": self.reason}


def parse_stop_body(body: Any) -> tuple[str | None, str | None]:
    """The ``by`` and ``reason`` of a stop request's JSON body (optional; an empty body is ``{}``).

    Raises:
        IngestError: 400, the body is not an object, ``by`` is not an id like ``telegram:user:1`` or ``reason`` is
            not one short line of printable text (:func:`check_reason`; the message says which).
    """
    if body is None:
        return None, None
    if not isinstance(body, dict):
        raise IngestError('the body must be a JSON object: {"by": "telegram:user:1", "reason": "..."} (both optional)')
    unknown = sorted(set(body) - {"by", "reason"})
    if unknown:
        raise IngestError(f"unknown field {unknown[0]!r}: a stop takes only 'by' and 'reason'")
    by, reason = body.get("by"), body.get("reason")
    if by is not None and (not isinstance(by, str) or BY_PATTERN.fullmatch(by) is None):
        raise IngestError(
            f"by must name who stopped the run like 'telegram:user:123': 1-{MAX_BY_CHARS} letters, digits or :_.@#+-"
        )
    return by or None, check_reason(reason)


async def stop_run(admission: Admission, run_key: str, by: str | None, reason: str | None) -> StopState:
    """Stop the active run ``run_key`` (module docstring); ``StopState.run`` is the key (the route shows the
    caller's own id).

    Raises:
        IngestError: 404 the run is unknown; 409 it already ended otherwise, or already took its agent's ``end``
            (it is being finalized: nothing left to stop).
        Exception: the journal could not be written (the caller answers 503): the run goes on unstopped.
    """
    run_key = resolve(admission, run_key)
    run = admission.runs.get(run_key)
    if run is None:
        note = await admission.stopped_note(run_key)
        if note is not None:
            return StopState(run_key, "stopped", *_who(note))
        if await admission.ended(run_key) is not None:
            raise IngestError(f"run {run_key!r} already ended (not by a stop): there is nothing to stop", status=409)
        raise IngestError(f"unknown run {run_key!r}", status=404)
    if run.stopped is not None:
        return StopState(run_key, "stopping", run.stopped.by, run.stopped.reason)
    if run.ended or run.closing is not None:
        raise IngestError(
            f"run {run_key!r} already took its end and is being finalized: there is nothing to stop", status=409
        )
    event = Stop(run=run_key, by=by, reason=reason)
    admission.take_stop(run, event)
    run.hold()  # not closed by its idle timeout before the stop is handed over
    try:
        try:
            await admission.journal.append([JournalEntry(run_key, json.dumps(event_to_json(event)))])
        except Exception:
            run.stopped = None  # not journaled: not taken (the caller answers 503 and may press again)
            raise
        await run.put_all([event])
    finally:
        run.release()
    return StopState(run_key, "stopping", by, reason)


def resolve(admission: Admission, run_key: str) -> str:
    """The run a stop names: ``run_key`` itself when such a run is known here, else the run of the same client
    whose Stop control id (:func:`core.run.stop_controls.short_id`) is the key's run id (a click forwarded by a bot,
    which knows only the control's id), or whose streamed draft is named so
    (:func:`core.run.stop_controls.draft_control_id`), else ``run_key`` unchanged. O(runs known here) for a control
    id."""
    client, run_id = split_key(run_key)
    if run_key in admission.runs or run_key in admission.finished:
        return run_key
    if run_id.startswith("draft:"):  # a Telegram draft's own stop button (core.run.stop_controls.draft_control_id)
        for key, run in admission.runs.items():
            keeper = run.controller.stop_controls
            if split_key(key)[0] == client and keeper is not None and run_id in keeper.drafts:
                return key
        return run_key
    if not is_short_id(run_id):
        return run_key
    for key in (*admission.runs, *admission.finished):
        if split_key(key)[0] == client and short_id(key) == run_id:
            return key
    return run_key


def _who(note: str) -> tuple[str | None, str | None]:
    """``by`` and ``reason`` back from a :func:`stop_note` line (as the ledger kept it)."""
    rest = note[len(STOP_PREFIX) :]
    by = None
    if rest.startswith(" ("):
        by, _, rest = rest[2:].partition(")")
    reason = rest[2:] if rest.startswith(": ") else None
    return by or None, reason or None
