"""Reading an NDJSON request body: its lines in batches, each line decoded, and a tally of what became of them.

A rejected line costs constant memory: the tally keeps the first :data:`MAX_REJECTED_SHOWN` rejections and counts
the rest, and a request stops being read after :data:`MAX_REJECTED_PER_REQUEST` of them (a client that sends
that many bad lines is broken: reading on would only cost time).
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import msgspec
import orjson
from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from streamrelay.core.errors import IngestError
from streamrelay.core.events import MAX_SEQ, TextDelta, TextEvent
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.lanes.pipeline import JsonTooDeepError, check_json_depth, strict_loads

MAX_REJECTED_SHOWN = 20
"""At most this many rejected lines are listed in one answer (``rejected_total`` counts them all) and logged."""

MAX_REJECTED_PER_REQUEST = 1000
"""After this many rejected lines a request is not read further (the answer says where it stopped)."""


YIELD_EVERY_BYTES = 64 * 1024
"""A body read without a pause (its pieces already received) lets the other tasks run after this many bytes; a small
request (a batch of a live run) costs no extra turn of the event loop."""


def _line_of(rejected: dict[str, Any]) -> int:
    line: int = rejected["line"]
    return line


class BodyTooLargeError(Exception):
    """The body or one of its lines is over its size limit (413)."""


class TooManyRejectedError(Exception):
    """The request carried :data:`MAX_REJECTED_PER_REQUEST` rejected lines: it is not read further."""


class Tally:
    """What became of a request's lines: events accepted, lines dropped as repeats (the first one's reason kept:
    a client that reused a finished run's id learns that the run ended), lines rejected (the first few kept in line
    order, all counted: a batch's lines refused when decoded are told before those refused when submitted, yet
    listed in their place), the first rejected line's status, and the longest ``Retry-After`` a rejection asked
    for."""

    def __init__(self) -> None:
        self.accepted = 0
        self.dropped = 0
        self.dropped_reason: str | None = None
        """``line N: why`` for the first line dropped (the lowest number), e.g. the run already ended."""
        self._first_dropped: int | None = None
        self.rejected: list[dict[str, Any]] = []
        self.rejected_total = 0
        self.status = 200
        """The status of the first line rejected (by line number)."""
        self._first_line: int | None = None
        self.retry_after_s: float | None = None

    def add(self, line: int, result: LineResult | IngestError, public: str | None = None) -> None:
        """Count one line's outcome (``public``: the rejection's or the drop's reason as the client may see it).

        Raises:
            TooManyRejectedError: this was the request's :data:`MAX_REJECTED_PER_REQUEST`-th rejected line.
        """
        if isinstance(result, IngestError):
            self.rejected_total += 1
            shown = self.rejected
            if len(shown) < MAX_REJECTED_SHOWN or line < shown[-1]["line"]:  # the first lines, in line order
                if len(shown) == MAX_REJECTED_SHOWN:
                    shown.pop()
                rejected = {"line": line, "error": public if public is not None else str(result)}
                bisect.insort(shown, rejected, key=_line_of)  # a line refused when decoded comes before others
            if self._first_line is None or line < self._first_line:
                self.status, self._first_line = result.status, line
            if result.retry_after_s is not None:
                self.retry_after_s = max(self.retry_after_s or 0.0, result.retry_after_s)
            if self.rejected_total >= MAX_REJECTED_PER_REQUEST:
                raise TooManyRejectedError(f"{self.rejected_total} lines were rejected: stopped reading at line {line}")
        elif result.dropped is not None:
            self.dropped += 1
            if self._first_dropped is None or line < self._first_dropped:
                reason = public if public is not None else result.dropped
                self._first_dropped, self.dropped_reason = line, f"line {line}: {reason}"
        else:
            self.accepted += result.events

    def counts(self) -> dict[str, int | str]:
        """``{"accepted": n}``, with ``"dropped": k`` and ``"dropped_reason": "line N: why"`` (the first line
        dropped) when k > 0."""
        if not self.dropped:
            return {"accepted": self.accepted}
        return {"accepted": self.accepted, "dropped": self.dropped, "dropped_reason": self.dropped_reason or ""}

    def answer(self, error: str | None = None, status: int | None = None) -> JSONResponse:
        """The request's answer: 200 with the counts, else the first failure's status (or ``status``) with the
        first rejected lines; ``error`` replaces the first failure's text (a body that could not be read on)."""
        if not self.rejected and error is None:
            return CountsResponse(self.counts())
        first = self.rejected[0] if self.rejected else None
        text = error if error is not None else f"line {first['line']}: {first['error']}" if first else ""
        body: dict[str, Any] = {"error": text, **self.counts()}
        if self.rejected:
            body["rejected"] = self.rejected
        if self.rejected_total > len(self.rejected):
            body["rejected_total"] = self.rejected_total
        headers = {"Retry-After": str(max(1, round(self.retry_after_s)))} if self.retry_after_s is not None else None
        return JSONResponse(body, status_code=status or self.status, headers=headers)


class CountsResponse(JSONResponse):
    """A request's 200 answer, its counts (``{"accepted": n}``, and ``dropped``): the bytes and headers
    :class:`JSONResponse` gives (compact, UTF-8; ``content-length`` then ``content-type: application/json``), rendered
    by orjson in C and its two headers set at once (every request of an agent gets one)."""

    def __init__(self, content: dict[str, int | str]) -> None:
        self.status_code = 200
        self.background = None
        self.body = body = orjson.dumps(content)
        self.raw_headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def batches(request: Request, max_body_bytes: int, max_line_bytes: int) -> AsyncIterator[list[bytes]]:
    """The body's complete lines, a batch per piece received (linear in the body), so the lines that arrived
    together are journaled in one commit.

    Raises:
        BodyTooLargeError: past the size limits. ClientDisconnect: the client went away before the body's end.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body_bytes:  # refused before a byte of it is waited for
        raise BodyTooLargeError(f"request body over {max_body_bytes} bytes: split the run into several requests")
    total = 0
    unyielded = 0
    buffer = b""
    receive = request.receive  # read as Starlette's ``Request.stream`` reads it, without its generator in between
    more = True
    while more:
        message = await receive()
        kind = message["type"]
        if kind == "http.disconnect":
            raise ClientDisconnect()
        if kind != "http.request":
            continue
        piece = message.get("body", b"")
        more = message.get("more_body", False)
        if not piece:
            continue
        total += len(piece)
        if total > max_body_bytes:
            raise BodyTooLargeError(f"request body over {max_body_bytes} bytes: split the run into several requests")
        *complete, buffer = (buffer + piece).split(b"\n")
        if complete:
            yield complete
        if len(buffer) > max_line_bytes:
            raise BodyTooLargeError(f"a line is over {max_line_bytes} bytes")
        unyielded += len(piece)
        if unyielded >= YIELD_EVERY_BYTES:  # other runs go on while a large body is read
            unyielded = 0
            await asyncio.sleep(0)
    if buffer.strip():
        yield [buffer]


_LONG_DIGITS = re.compile(rb"[0-9]{19}")
"""19 digits in a row: an integer orjson may turn into a float (past 64 bits), or a long number to leave to the
strict parser; digits inside a string match too (it then only costs the strict parser's time)."""


def fast_strict_loads(raw: bytes) -> Any:
    """``raw`` parsed by orjson when the result is certainly what :func:`core.lanes.pipeline.strict_loads` gives, else
    :data:`_UNDECIDED`: the caller then parses with the strict parser (the only one whose errors the client sees,
    so every message stays as it was).

    Why not orjson alone: it takes a key twice in one object (the last wins) where the strict parser refuses the
    line, and it turns integers past 64 bits into floats. Why not the strict parser alone: its pure-Python hooks
    (``object_pairs_hook``, ``parse_constant``) were a fifth of the service's CPU under load; orjson is ~5x faster.

    The duplicate-key check: in the text every object member has one ``:`` outside strings; orjson's own
    serialization of the result has one per member it *kept*, and both have the same ``:`` inside strings unless
    the text wrote one as an escape (``\\u003a``). So when the text has no ``\\u003`` escape, the text has more
    ``:`` than the re-serialization exactly when a key was repeated. orjson refuses ``NaN`` / ``Infinity`` itself
    (as the strict parser does); a lone surrogate escape, a number out of the double range or nesting deeper than
    orjson takes make it fail, and the strict parser then decides (it takes the first and the second, as before).

    Returns:
        The value, or :data:`_UNDECIDED` when the strict parser must decide. O(len(raw)), in C.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _UNDECIDED
    if _LONG_DIGITS.search(raw) is not None or b"\\u003" in raw:
        return _UNDECIDED
    colons = raw.count(b":")
    if colons:
        try:
            again = orjson.dumps(value)
        except orjson.JSONEncodeError:  # nested past orjson.dumps' depth
            return _UNDECIDED
        if again.count(b":") != colons:
            return _UNDECIDED  # a key appears twice: the strict parser says which
    return value


_UNDECIDED: Any = object()
"""What :func:`fast_strict_loads` returns when the strict parser must decide."""


def decode(raw: bytes, max_line_bytes: int) -> tuple[Any, str]:
    """One line's JSON value and its text.

    Raises:
        IngestError: not UTF-8, not JSON (NaN / Infinity, a key twice in one object, nested deeper than
            :data:`core.lanes.pipeline.MAX_JSON_DEPTH`: the sidecar could not write it again): 400.
        BodyTooLargeError: the line is over ``max_line_bytes``.
    """
    if len(raw) > max_line_bytes:
        raise BodyTooLargeError(f"a line is over {max_line_bytes} bytes")
    try:
        value = fast_strict_loads(raw)
        if value is not _UNDECIDED:
            check_json_depth(raw, value)
            return value, raw.decode("utf-8")  # orjson checked it is UTF-8
        text = raw.decode("utf-8")
        return strict_loads(text), text
    except JsonTooDeepError as exc:
        raise IngestError(f"the line is {exc}") from None
    except UnicodeDecodeError as exc:
        raise IngestError(f"line is not UTF-8 (byte {exc.start}): send NDJSON encoded as UTF-8") from None
    except ValueError as exc:
        raise IngestError(f"malformed JSON, the line is {exc}") from None


_PLAIN_KEYS = frozenset(("kind", "text", "seq", "mode", "message", "lane", "visibility", "source"))
"""The keys a plain delta line may write (:func:`decode_delta`; its ``run`` is the URL's)."""


def decode_delta(raw: bytes, run: str) -> TextDelta | None:
    """The line ``raw`` (at most the line size limit; posted to the run keyed ``run``) as the plain delta it is, decoded
    once (orjson, in C) and carried as a :class:`core.events.TextDelta` (no pydantic model, no validation pass: what
    the in-process path makes of the same line, :func:`core.ingest.admission._plain_delta`), when it is certainly what
    :func:`decode` then admission make of it; else None, and the line takes :func:`decode_text` or the general path
    (whose errors are the only ones the client sees: every message stays as it was).

    Plain: one JSON object of ``kind`` ``text`` with a string ``text``, and at most ``mode`` ``delta``, ``seq`` (an
    integer from 0 to :data:`core.events.MAX_SEQ`, or null), ``message`` (an integer >= 0: a ``true``, ``1.0`` or
    ``"1"`` is no integer, the ``text`` event's validator refuses it: strict) and the defaults ``lane`` ``ui``,
    ``visibility`` ``answer`` and ``source`` null (a writer of every field sends them). No ``run`` (the general path
    checks it against the URL's). Certain: orjson refuses what the strict parser refuses (``NaN``, bytes that are not
    UTF-8, content after the object) and a lone surrogate escape the strict parser would keep (the general path then
    takes it); a key written twice (orjson keeps the last where the strict parser refuses the line) is found by counting
    ``:`` as :func:`decode_text` does: without a ``\\u003`` escape the line holds one per member plus those of its text
    (the other values and the keys hold none), more when a key came twice. An integer past 64 bits is a float to orjson:
    not plain.

    Returns:
        The delta (its ``run`` = ``run``), or None. O(len(raw)), in C but for a few field reads.
    """
    if b"\\u003" in raw:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.get("kind") != "text":
        return None
    text = obj.get("text")
    if type(text) is not str:
        return None
    if len(obj) > 2:  # more than kind and text
        if not _PLAIN_KEYS.issuperset(obj) or obj.get("mode", "delta") != "delta" or obj.get("source") is not None:
            return None
        if obj.get("lane", "ui") != "ui" or obj.get("visibility", "answer") != "answer":
            return None
    if raw.count(b":") != len(obj) + text.count(":"):
        return None  # a key twice: the general path refuses the line
    return TextDelta.numbered(run, text, obj)


class _PlainLine(msgspec.Struct, forbid_unknown_fields=True):
    """A plain delta line as msgspec decodes and validates it (:func:`decode_deltas`): the keys and values
    :func:`decode_delta` takes, each field left :data:`msgspec.UNSET` when the line does not write it (so the keys it
    wrote are counted). Strict as the ``text`` event's validator: a ``seq`` or ``message`` is a JSON integer (never
    ``true``, ``1.0`` or ``"1"``), from 0 to :data:`core.events.MAX_SEQ`; ``mode``, ``lane``, ``visibility`` and
    ``source`` only at their plain values; any other key refuses the line."""

    kind: Literal["text"]
    text: str
    seq: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ)] | msgspec.UnsetType | None = msgspec.UNSET
    mode: Literal["delta"] | msgspec.UnsetType = msgspec.UNSET
    message: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ)] | msgspec.UnsetType = msgspec.UNSET
    lane: Literal["ui"] | msgspec.UnsetType = msgspec.UNSET
    visibility: Literal["answer"] | msgspec.UnsetType = msgspec.UNSET
    source: msgspec.UnsetType | None = msgspec.UNSET


_plain_lines = msgspec.json.Decoder(list[_PlainLine]).decode
"""A JSON array of plain delta lines decoded and validated in one call (msgspec, in C)."""

_encode = msgspec.json.Encoder().encode
"""The decoded lines written again (in C): a field left unset is not written, so each line's ``:`` are one per key it
wrote (once) plus those of its ``text`` (:func:`decode_deltas`)."""

_MSGSPEC_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_UNSET = msgspec.UNSET


def decode_deltas(batch: list[bytes], run: str) -> list[tuple[TextDelta, str]] | None:
    """A batch of lines (each non-blank and within the line size limit: the caller checks) posted to the run keyed
    ``run``, every one a plain delta line (:func:`decode_delta` says which), decoded and validated in one call
    (msgspec, in C) into what :func:`decode_delta` makes of each, with each line's text: ``[(delta, text), ...]`` in
    order; else None (one line is not plain, or the decoder cannot be certain), and the caller decodes the batch line
    by line as before (every error message as it was).

    One call for the batch: the lines joined as one JSON array, ``b"[" + b"\\n,".join(batch) + b"]"``. Each element
    comes from exactly one line when every line ends with ``}``: a plain line holds no nested object or array (any
    other key refuses it), so a ``}`` that ends a line either closes its object or sits in a string, which the raw
    newline after it would then break (JSON strings hold no raw control character); so no element spans two lines,
    every joining comma separates two elements, and as many elements as lines means one per line (two objects on one
    line would make one more). A key written twice (msgspec keeps the last, the strict parser refuses the line) is found
    by counting ``:`` as :func:`decode_delta` does, for the batch at once: without a ``\\u003`` escape a line holds one
    outside strings per member it wrote and those of its strings, and the lines written again (:data:`_encode`) one per
    key kept and those of the ``text`` kept (the other values and every key hold none), so the batch has more ``:`` than
    its lines written again exactly when a line wrote a key twice. A lone surrogate escape msgspec refuses (the general
    path then takes it), as it refuses NaN, bytes that are not UTF-8 and control characters in strings.

    Returns:
        Per line, in order, its :class:`core.events.TextDelta` (``run`` = ``run``) and its text, or None.
        O(total length), in C but for a few field reads per line.
    """
    n = len(batch)
    joined = b"\n,".join(batch)
    if not joined.endswith(b"}") or joined.count(b"}\n,") != n - 1 or b"\\u003" in joined:
        return None
    try:
        lines = _plain_lines(b"[" + joined + b"]")
    except _MSGSPEC_ERRORS:
        return None
    if len(lines) != n or _encode(lines).count(b":") != joined.count(b":"):
        return None  # a key twice in a line: the general path refuses the line
    unset = _UNSET
    return [
        (
            TextDelta(
                run, line.text, None if (seq := line.seq) is unset else seq, 0 if (m := line.message) is unset else m
            ),
            text,
        )
        for line, text in zip(lines, joined.decode("utf-8").split("\n,"), strict=True)  # the joints: the only newlines
    ]


_text_from_json = TextEvent.__pydantic_validator__.validate_json
"""The ``text`` event's compiled validator, reading JSON bytes itself (pydantic-core's parser, in Rust): decoded and
validated in one step, with no Python object of the line in between."""


def decode_text(raw: bytes, run_json: bytes) -> TextEvent | None:
    """The line ``raw`` (at most the line size limit; its ``run`` left to the URL) as the ``text`` event of the run
    whose key is the JSON string ``run_json``, decoded and validated in one step, when that event is certainly what
    :func:`decode` then :func:`core.events.parse_event` make of it; else None, and the line takes the general path
    (:func:`decode`, whose errors are the only ones the client sees: every message stays as it was).

    When it is certain: the line is one JSON object whose ``kind`` is ``text``, that names no ``run``, and that
    writes no key twice (pydantic-core's parser keeps the last value of a repeated key, where the strict parser
    refuses the line). The repeat check counts ``:``, as :func:`fast_strict_loads` does: in the text each member has
    one ``:`` outside strings, so without a ``\\u003`` escape the text has as many ``:`` as the event has fields set
    (its source's too) plus those inside its strings exactly when no key came twice (an unknown key, or a colon in a
    key, is refused by the validator; the enum values hold none). Everything the strict parser refuses, pydantic-core
    refuses too (``NaN``, a lone surrogate escape, bytes that are not UTF-8, content after the object), and both
    validate the same values with the same validator (its integer fields strict: a JSON integer only, never ``true``,
    ``1.0`` or ``"1"``, from JSON as from Python; its other fields alike from both).

    Returns:
        The event (``run`` = the key, in its fields set as when the run is filled in from the URL), or None.
        O(len(raw)), in C and Rust but for a few field reads.
    """
    if raw[:1] != b"{" or b"\\u003" in raw:
        return None
    try:
        event = _text_from_json(b'{"run":' + run_json + b"," + raw[1:])
    except ValidationError:
        return None
    return event if _certain(event, raw.count(b":")) else None


def _certain(event: TextEvent, colons: int) -> bool:
    """Whether ``event``, validated from a line whose text holds ``colons`` ``:`` outside its ``run`` (none written
    as an escape), is what the general path makes of the line (:func:`decode_text` says why)."""
    fields = event.model_fields_set
    if "kind" not in fields or event.message > MAX_SEQ:  # no kind: a raw provider line (the default hides it)
        return False  # (a number that long: the strict parser may refuse it, past Python's digits limit)
    expected = len(fields) - 1 + event.text.count(":")  # the run's ':' is not in the line
    source = event.source
    if source is not None:
        if source.depth > MAX_SEQ:
            return False
        expected += len(source.model_fields_set) + source.agent_id.count(":")
        expected += sum(text.count(":") for text in (source.session_id, source.parent_session_id, source.path) if text)
    return colons == expected
