"""``streamrelay replay`` reads a saved stream as the SSE specification says (issue 26, item 6): multi-line ``data``,
comments, ``event`` / ``id`` / ``retry`` fields; and JSON Lines as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamrelay.app.ingest_client import recording_lines

UPSTREAM = Path(__file__).resolve().parents[1] / "streams"


def saved(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stream.sse"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_json_object_over_several_data_lines_is_one_event(tmp_path: Path) -> None:
    text = (
        ": a comment the server sent as a keepalive\n"
        "id: 1\n"
        "event: message\n"
        "retry: 3000\n"
        'data: {"type": "TEXT_MESSAGE_CONTENT",\n'
        'data:  "messageId": "m1",\n'
        'data: "delta": "Hi"}\n'
        "\n"
        'data:{"type": "RUN_FINISHED"}\n'
        "\n"
        "data: [DONE]\n"
        "\n"
    )
    assert recording_lines(saved(tmp_path, text)) == [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"},
        {"type": "RUN_FINISHED"},
    ]


def test_the_sse_framed_fixture_reads_as_its_json_lines(tmp_path: Path) -> None:
    """anthropic-sdk-python's refusal fixture as it is upstream (``event:`` / ``data:`` / blank lines) reads exactly
    as the JSON Lines kept here."""
    kept = UPSTREAM / "anthropic" / "upstream" / "refusal-explained.jsonl"
    lines = kept.read_text(encoding="utf-8").splitlines()
    framed = "".join(f"event: {json.loads(line)['type']}\ndata: {line}\n\n" for line in lines)
    assert recording_lines(saved(tmp_path, framed)) == recording_lines(kept)


def test_data_lines_without_blank_lines_between_are_still_one_event_each(tmp_path: Path) -> None:
    text = 'data: {"a": 1}\ndata: {"b": 2}\n'
    assert recording_lines(saved(tmp_path, text)) == [{"a": 1}, {"b": 2}]


def test_json_lines_and_what_is_not_json(tmp_path: Path) -> None:
    assert recording_lines(saved(tmp_path, '{"a": 1}\n\n{"b": 2}\n')) == [{"a": 1}, {"b": 2}]
    with pytest.raises(ValueError, match=r"stream.sse:2: not JSON"):
        recording_lines(saved(tmp_path, '{"a": 1}\nnot json\n'))
    with pytest.raises(ValueError, match=r"stream.sse:1: not JSON"):
        recording_lines(saved(tmp_path, "data: {broken\n\n"))
