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

from streamrelay.adapters.ingest_http.lines import decode, decode_text
from streamrelay.core.errors import IngestError
from streamrelay.core.events import Event, TextEvent, parse_event

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
