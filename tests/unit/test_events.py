"""The normalized event model: clear errors for bad input, surrogates fixed on the way in."""

from __future__ import annotations

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import End, RunStart, TextEvent, TextMode, event_to_json, parse_event


def test_a_text_delta_parses_with_defaults() -> None:
    event = parse_event({"run": "r", "kind": "text", "text": "hi"})
    assert isinstance(event, TextEvent)
    assert (event.mode, event.message, event.source) == (TextMode.DELTA, 0, None)


def test_run_start_needs_a_channel_and_a_target() -> None:
    with pytest.raises(IngestError, match="target"):
        parse_event({"run": "r", "kind": "run.start", "channel": "telegram"})
    event = parse_event({"run": "r", "kind": "run.start", "channel": "telegram", "target": {"chat_id": 1}})
    assert isinstance(event, RunStart)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"run": "r", "kind": "teleport"}, "unknown event kind 'teleport'"),
        ({"run": "r"}, "unknown event kind None"),
        ({"run": "r", "kind": "text", "text": "x", "mode": "sideways"}, "mode"),
        ({"run": "r", "kind": "text", "text": "x", "colour": "red"}, "colour"),
        ({"kind": "text", "text": "x"}, "run"),
        ({"run": "r", "kind": "text", "text": "x", "seq": -1}, "seq"),
    ],
)
def test_bad_events_name_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        parse_event(data)


def test_final_text_has_its_surrogate_pairs_joined() -> None:
    event = parse_event({"run": "r", "kind": "end", "final_text": "ok \ud83d\ude00 \udc00"})
    assert isinstance(event, End)
    assert event.final_text == "ok 😀 \ufffd"


def test_events_round_trip_through_json() -> None:
    data = {"run": "r", "seq": 3, "kind": "tool_call", "id": "c", "name": "s", "state": "end", "args": {"q": 1}}
    assert event_to_json(parse_event(data)) == {**data, "lane": "ui"}
