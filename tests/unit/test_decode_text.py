"""HTTP ingest decodes and validates a ``text`` line in one step (:func:`adapters.ingest_http.lines.decode_text`) only
when the event is the one the general path makes of it (:func:`~adapters.ingest_http.lines.decode`, the run filled in
from the URL, :func:`core.events.parse_event`): a key twice, an escaped ``:``, a lone surrogate, NaN, a huge integer,
a ``run`` in the line, no ``kind`` or another kind are left to the general path, whose value or error the client gets
as before."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.adapters.ingest_http.lines import decode, decode_delta, decode_deltas, decode_text
from streamrelay.core.errors import IngestError
from streamrelay.core.events import Event, TextDelta, TextEvent, parse_event
from streamrelay.core.ingest.admission import _delta_of

RUN = "client/r:1"
RUN_JSON = json.dumps(RUN).encode()

KEYS = st.sampled_from(
    ["kind", "text", "mode", "seq", "message", "visibility", "lane", "source", "run", "te\\u0078t", "x", "a:b"]
)
SOURCE_KEYS = st.sampled_from(["agent_id", "session_id", "parent_session_id", "depth", "path", "x"])
STRINGS = st.sampled_from(
    ["text", "delta", "snapshot", "answer", "reasoning", "ui", "pipeline", "a:b", "::", "\\u003a", "\\ud83d", "😀", ""]
)
NUMBERS = st.sampled_from(
    ["0", "1", "-1", "1.0", "1.5", "1e2", "NaN", "Infinity", "true", "null", str(2**64), "9" * 5000, '"3"']
)


@st.composite
def source_text(draw: st.DrawFn) -> str:
    members = draw(st.lists(st.tuples(SOURCE_KEYS, STRINGS.map(lambda s: f'"{s}"') | NUMBERS), max_size=4))
    return "{" + ",".join(f'"{key}":{value}' for key, value in members) + "}"


@st.composite
def text_lines(draw: st.DrawFn) -> bytes:
    """A line like an agent's ``text`` event, or one slightly wrong: repeated or unknown keys, odd values."""
    members = [("kind", '"text"'), ("text", f'"{draw(STRINGS)}"')]
    for key in draw(st.lists(KEYS, max_size=5)):
        value = draw(STRINGS.map(lambda s: f'"{s}"') | NUMBERS | source_text() | st.just("[1]"))
        members.append((key, value))
    order = draw(st.permutations(members))
    space = draw(st.sampled_from(["", " "]))
    body = ("," + space).join(f'"{key}":{space}{value}' for key, value in order)
    return ("{" + body + "}" + draw(st.sampled_from(["", " ", "\r", " x", "}"]))).encode()


def _general(raw: bytes) -> Event | IngestError:
    """What the general path makes of ``raw`` posted to run ``RUN`` (when it names none)."""
    try:
        obj, _ = decode(raw, 1 << 20)
        if not isinstance(obj, dict) or "run" in obj:
            return IngestError("not a line the fast decoder may take")
        return parse_event({**obj, "run": RUN})
    except IngestError as exc:
        return exc


def _same(fast: TextEvent, slow: Event | IngestError) -> None:
    assert not isinstance(slow, IngestError), (fast, slow)
    assert type(slow) is type(fast)
    assert slow.__dict__ == fast.__dict__
    assert slow.model_fields_set == fast.model_fields_set
    if fast.source is not None:
        assert slow.source is not None and slow.source.model_fields_set == fast.source.model_fields_set


@settings(max_examples=600, deadline=None)
@given(text_lines())
def test_a_line_decoded_in_one_step_is_the_event_the_general_path_makes(raw: bytes) -> None:
    fast = decode_text(raw, RUN_JSON)
    if fast is not None:
        _same(fast, _general(raw))


def test_an_agents_text_lines_are_decoded_in_one_step() -> None:
    lines: list[dict[str, Any]] = [
        {"kind": "text", "text": "Hel: lo"},
        {"kind": "text", "mode": "delta", "text": "😀", "seq": 3, "message": 1, "visibility": "reasoning"},
        {"kind": "text", "text": "x", "lane": "ui", "source": {"agent_id": "a:1", "depth": 2, "path": "s/a"}},
        {"kind": "text", "mode": "snapshot", "text": "whole", "source": None},
    ]
    for line in lines:
        raw = json.dumps(line, ensure_ascii=False).encode()
        fast = decode_text(raw, RUN_JSON)
        assert fast is not None, line
        _same(fast, _general(raw))


def test_lines_the_general_path_must_judge_are_left_to_it() -> None:
    for raw in [
        b'{"kind": "text", "text": "a", "text": "b"}',  # a key twice: the strict parser refuses the line
        b'{"kind": "text", "te\\u0078t": "a", "text": "b"}',  # the same key, written otherwise
        b'{"kind": "text", "text": "a\\u003a", "text": "b:"}',  # an escaped ':' would hide the repeat
        b'{"kind": "text", "text": "\\ud83d"}',  # half a surrogate pair: kept raw by the general path
        b'{"kind": "text", "text": "a", "run": "other"}',  # names its run: checked against the URL's
        b'{"text": "a"}',  # no kind: a raw provider line
        b'{"kind": "end"}',
        b'{"kind": "text", "text": "a", "message": ' + b"9" * 5000 + b"}",  # past Python's integer digits
        b'{"kind": "text", "text": "a", "seq": NaN}',
        b' {"kind": "text", "text": "a"}',
        b'{"kind": "text", "text": "a"} {"kind": "text", "text": "b"}',
        b'{"kind": "text", "text": "\xff"}',
    ]:
        assert decode_text(raw, RUN_JSON) is None, raw


@settings(max_examples=800, deadline=None)
@given(text_lines())
def test_a_line_decoded_once_as_a_plain_delta_is_what_the_general_path_makes(raw: bytes) -> None:
    """:func:`decode_delta` (HTTP's common line, carried as a TextDelta) agrees with the general path: the same event
    (the in-process path's TextDelta of the decoded line), never a line the general path refuses."""
    fast = decode_delta(raw, RUN)
    if fast is None:
        return
    slow = _general(raw)
    assert isinstance(slow, TextEvent), (raw, slow)
    assert fast.event().__dict__ == slow.__dict__
    obj, _ = decode(raw, 1 << 20)
    assert _delta_of(obj, RUN, RUN) == fast  # what admission makes of the decoded line: the same TextDelta


def test_plain_delta_lines_are_decoded_once_and_others_left_to_the_one_step_decoder_or_the_general_path() -> None:
    plain = [
        (b'{"kind": "text", "text": "Hel: lo"}', TextDelta(RUN, "Hel: lo")),
        (b'{"kind":"text","mode":"delta","text":"\xf0\x9f\x98\x80","seq":3,"message":1}', TextDelta(RUN, "😀", 3, 1)),
        (b'{"seq": null, "text": "", "kind": "text"}', TextDelta(RUN, "")),
        (b'{"lane": "ui", "kind": "text", "text": "x", "visibility": "answer", "source": null}', TextDelta(RUN, "x")),
        (b'{"kind": "text", "te\\u0078t": "a:b"}', TextDelta(RUN, "a:b")),  # an escaped key is still the key
    ]
    for raw, delta in plain:
        assert decode_delta(raw, RUN) == delta, raw
    for raw in [
        b'{"kind": "text", "text": "a", "text": "b"}',  # a key twice
        b'{"kind": "text", "text": "a:", "text": "b"}',
        b'{"kind": "text", "text": "a\\u003a", "text": "b:"}',  # an escaped ':' would hide the repeat
        b'{"kind": "text", "text": "\\ud83d"}',  # half a surrogate pair: kept raw by the general path
        b'{"kind": "text", "text": "a", "run": "other"}',  # names its run
        b'{"kind": "text", "text": "a", "visibility": "reasoning"}',  # not plain: the one-step decoder takes it
        b'{"kind": "text", "text": "a", "mode": "snapshot"}',
        b'{"kind": "text", "text": "a", "lane": "pipeline"}',
        b'{"kind": "text", "text": "a", "source": {"agent_id": "a"}}',
        b'{"kind": "text", "text": "a", "message": true}',  # strict: refused by the general path
        b'{"kind": "text", "text": "a", "message": 1.0}',
        b'{"kind": "text", "text": "a", "seq": "1"}',
        b'{"kind": "text", "text": "a", "seq": 9007199254740992}',  # past MAX_SEQ
        b'{"kind": "text", "text": "a", "message": 18446744073709551616}',  # a float to orjson
        b'{"kind": "text", "text": 3}',
        b'{"kind": "end"}',
        b'{"kind": "text", "text": "a"} x',
        b'{"kind": "text", "text": "\xff"}',
        b"[]",
    ]:
        assert decode_delta(raw, RUN) is None, raw


@settings(max_examples=400, deadline=None)
@given(st.lists(text_lines(), min_size=1, max_size=6))
def test_a_batch_decoded_in_one_call_is_each_lines_plain_delta(batch: list[bytes]) -> None:
    """:func:`decode_deltas` (a batch of plain delta lines in one msgspec call) gives, for every batch it takes, what
    :func:`decode_delta` gives line by line (so the general path's event), and the lines as sent; a batch with one
    line that is not plain is left to the line-by-line path whole."""
    got = decode_deltas(batch, RUN)
    one_by_one = [decode_delta(raw, RUN) for raw in batch]
    if got is None:
        assert any(delta is None for delta in one_by_one) or not all(raw.endswith(b"}") for raw in batch), batch
        return
    assert [delta for delta, _ in got] == one_by_one, batch
    assert [text for _, text in got] == [raw.decode() for raw in batch]


def test_a_batch_is_decoded_in_one_call_only_when_each_line_is_one_plain_delta() -> None:
    plain = [
        b'{"kind": "text", "text": "Hel: lo"}',
        b'{"kind":"text","mode":"delta","text":"\xf0\x9f\x98\x80","seq":3,"message":1}',
        b'{"seq": null, "text": "", "kind": "text"}',
        b'{"lane": "ui", "kind": "text", "text": "x}\\n,", "visibility": "answer", "source": null}',
        b'{"kind": "text", "te\\u0078t": "a:b"}',
        b'  {"kind": "text", "text": "\\ud83d\\ude00"}',
    ]
    got = decode_deltas(plain, RUN)
    assert got is not None
    assert [delta for delta, _ in got] == [decode_delta(raw, RUN) for raw in plain]
    assert [text for _, text in got] == [raw.decode() for raw in plain]
    for odd in [
        b'{"kind": "text", "text": "a"},{"kind": "text", "text": "b"}',  # two objects on one line
        b'{"kind": "text", "text": "a", "text": "b"}',  # a key twice
        b'{"kind": "text", "text": "a\\u003a", "text": "b:"}',
        b'{"kind": "text", "text": "\\ud83d"}',  # half a surrogate pair: kept raw by the general path
        b'{"kind": "text", "text": "a", "run": "other"}',
        b'{"kind": "text", "text": "a", "visibility": "reasoning"}',
        b'{"kind": "text", "text": "a", "message": true}',
        b'{"kind": "text", "text": "a", "seq": 9007199254740992}',
        b'{"kind": "text", "text": "a"} ',  # ends otherwise than with "}": line by line
        b'{"kind": "text", "text": "a"}\r',
        b'{"kind": "end"}',
        b"",
    ]:
        assert decode_deltas([*plain[:2], odd, plain[2]], RUN) is None, odd
    # one object cut over two lines, each ending in "}", joined to a line of two: as many elements as lines
    split = [
        b'{"kind": "text", "text": "}',
        b'{"kind": "text", "text": "}',
        b'{"kind":"text","text":"a"},{"kind":"text","text":"b"}',
    ]
    assert decode_deltas(split, RUN) is None
