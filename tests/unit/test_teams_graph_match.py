"""The rule that takes a Graph chatMessage for an uncertain Teams create (adapters/teams/graph.py): sender, time,
deletion, ids already held, and the content compared on a normalized form (Graph's HTML against what was sent)."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.adapters.teams.graph import html_text, is_match, normalize, sent_form, shown_form

APP = "11111111-2222-4333-8444-555555555555"
T0 = 1_700_000_000_000


def message(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "1700000000123",
        "messageType": "message",
        "createdDateTime": "2023-11-14T22:13:20.500Z",  # T0 + 500 ms
        "deletedDateTime": None,
        "from": {"application": {"id": APP, "applicationIdentityType": "bot"}, "user": None},
        "body": {"contentType": "html", "content": "<p>Hello <strong>world</strong> &amp; more</p>"},
        "attachments": [],
    }
    return {**base, **over}


@pytest.mark.parametrize(
    ("raw", "form"),
    [
        ("<p>Hello <strong>world</strong> &amp; more</p>", "helloworldmore"),
        ("Hello **world** & more", "helloworldmore"),
        ("1. one\n2. two", "onetwo"),
        ("<ol><li>one</li><li>two</li></ol>", "onetwo"),
        ("- a\n* b\n+ c", "abc"),
        ("<p>traditions<br>1. the lantern</p>", "traditionsthelantern"),  # a marker after <br> starts a line
        ("traditions\n1. the lantern", "traditionsthelantern"),
        ("Ünïcode   Straße", "ünïcodestrasse"),
        ("", ""),
        ("<p>**</p>", "**"),  # no letter: the marks themselves (a preview's first chunk)
        ("** ", "**"),
    ],
)
def test_normalize(raw: str, form: str) -> None:
    assert normalize(html_text(raw) if raw.startswith("<") else raw) == form


@pytest.mark.parametrize(
    ("sent", "fmt", "body"),
    [
        ("a < b > c and List<int>", "plain", "<p>a &lt; b &gt; c and List&lt;int&gt;</p>"),  # never read as HTML
        (
            "see [the docs](https://example.com/x_y)",
            "markdown",
            '<p>see <a href="https://example.com/x_y">the docs</a></p>',
        ),
        ("1. one\n2. two", "markdown", "<ol><li>one</li><li>two</li></ol>"),
        ("**", "markdown", "<p>**</p>"),
    ],
)
def test_what_was_sent_matches_what_graph_shows(sent: str, fmt: str, body: str) -> None:
    graph = message(body={"contentType": "html", "content": body})
    assert sent_form({"type": "message", "text": sent, "textFormat": fmt}) == shown_form(graph)


def test_a_link_in_plain_text_keeps_its_url() -> None:
    plain = sent_form({"type": "message", "text": "[a](https://x.org)", "textFormat": "plain"})
    assert plain != sent_form({"type": "message", "text": "a", "textFormat": "plain"})


WANT = sent_form({"type": "message", "text": "Hello **world** & more", "textFormat": "markdown"})


@pytest.mark.parametrize(
    ("over", "not_before", "taken", "matches"),
    [
        ({}, T0, frozenset(), True),
        ({}, None, frozenset(), True),  # made before a restart: no time bound, the after_id bound only
        ({"from": {"application": {"id": APP.upper()}}}, T0, frozenset(), True),  # GUIDs compare in any case
        ({"from": {"application": {"id": "00000000-0000-0000-0000-000000000001"}}}, T0, frozenset(), False),
        ({"from": {"application": None, "user": {"id": "u1"}}}, T0, frozenset(), False),  # a person's
        ({"from": None}, T0, frozenset(), False),  # the system's
        ({"createdDateTime": "2023-11-14T22:13:19.000Z"}, T0, frozenset(), False),  # before the create (skew incl.)
        ({"createdDateTime": "not a date"}, T0, frozenset(), False),
        ({"deletedDateTime": "2023-11-14T22:14:00.000Z"}, T0, frozenset(), False),
        ({"messageType": "systemEventMessage"}, T0, frozenset(), False),
        ({}, T0, frozenset({"1700000000123"}), False),  # another part's message
        ({"body": {"contentType": "html", "content": "<p>Hello world</p>"}}, T0, frozenset(), False),
        ({"body": {"contentType": "html", "content": "<p>Hello world &amp; more!</p>"}}, T0, frozenset(), True),
    ],
)
def test_is_match(over: dict[str, Any], not_before: int | None, taken: frozenset[str], matches: bool) -> None:
    assert is_match(message(**over), app_id=APP, want=WANT, not_before_ms=not_before, taken=taken) is matches


def test_a_card_is_compared_on_its_json() -> None:
    card = {"type": "AdaptiveCard", "body": [{"type": "TextBlock", "text": "| a | b |"}]}
    fields = {"type": "message", "text": "", "attachments": [{"contentType": "x", "content": card}]}
    graph = message(
        body={"contentType": "html", "content": '<attachment id="1"></attachment>'},
        attachments=[
            {
                "id": "1",
                "contentType": "x",
                "content": '{"type":"AdaptiveCard","body":[{"type":"TextBlock","text":"| a | b |"}]}',
            }
        ],
    )
    assert shown_form(graph) == sent_form(fields) != ""
    assert is_match(graph, app_id=APP, want=sent_form(fields), not_before_ms=None, taken=frozenset())


def test_an_empty_text_never_matches() -> None:
    empty = message(body={"contentType": "html", "content": ""})
    assert not is_match(empty, app_id=APP, want="", not_before_ms=None, taken=frozenset())
