"""Telegram's Markdown render keeps every character the agent wrote (BREAKER finding 3): text that looks like HTML
(``Vec<String>``, ``a<b and c>d``, ``<!-- x -->``, ``<!channel>``) was dropped by the converter; code is unchanged
and entities stay right."""

from __future__ import annotations

import pytest

from streamrelay.adapters.telegram.render import literal_angles, render
from streamrelay.core.ports import TextFormat


def _entities(text: str) -> list[tuple[str, int, int]]:
    rendered = render(text, TextFormat.MARKDOWN)
    return [(e.type, e.offset, e.length) for e in rendered.entities or []]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "<!-- note --> The answer is Vec<String>, and a<b and c>d.\n\nSecond paragraph.",
            "<!-- note --> The answer is Vec<String>, and a<b and c>d.\n\nSecond paragraph.",
        ),
        ("Use Vec<String> or Option<T> here", "Use Vec<String> or Option<T> here"),
        ("if a<b and c>d then", "if a<b and c>d then"),
        ("<!-- x --> visible", "<!-- x --> visible"),
        ("<!channel> look", "<!channel> look"),
        ("<div>\nblock\n</div>", "<div>\nblock\n</div>"),
        ("a \\<b> c", "a <b> c"),  # escaped already: one backslash, not two
        ("a \\\\<b> c", "a \\<b> c"),  # an escaped backslash, then a literal tag
        ("é<ü> and 👍<x>", "é<ü> and 👍<x>"),
    ],
)
def test_text_that_looks_like_html_is_shown_as_written(text: str, shown: str) -> None:
    assert render(text, TextFormat.MARKDOWN).text == shown
    assert render(text, TextFormat.STRIPPED).text == shown


@pytest.mark.parametrize(
    "text",
    [
        "x `a<b` y",
        "``Vec<`T`>``",
        "```rust\nlet v: Vec<u8> = x<y;\n```",
        "> ```\n> <b>\n> ```",
        "- item\n\n  ```\n  a<b\n  ```",
        "para\n\n    indented<code>\n",
        "$a<b$ math",
    ],
)
def test_code_is_left_as_written(text: str) -> None:
    assert literal_angles(text) == text  # every "<" is inside code


def test_code_keeps_its_characters_and_entities() -> None:
    text = "Use `Vec<u8>` here:\n\n```rust\nlet v: Vec<u8>;\n```"
    rendered = render(text, TextFormat.MARKDOWN)
    assert rendered.text == "Use Vec<u8> here:\n\nlet v: Vec<u8>;"
    assert _entities(text) == [("code", 4, 7), ("pre", 19, 15)]


def test_normal_markdown_keeps_its_entities() -> None:
    text = "**bold** Vec<T> _it_ [link](https://a.example) <https://b.example> `c<d`"
    rendered = render(text, TextFormat.MARKDOWN)
    assert rendered.text == "bold Vec<T> it link https://b.example c<d"
    assert _entities(text) == [
        ("bold", 0, 4),
        ("italic", 12, 2),
        ("text_link", 15, 4),
        ("text_link", 20, 17),
        ("code", 38, 3),
    ]
    link = [e for e in rendered.entities or [] if e.type == "text_link"]
    assert [e.url for e in link] == ["https://a.example", "https://b.example"]


def test_a_text_without_angle_brackets_is_not_touched() -> None:
    text = "plain **markdown** with `code`"
    assert literal_angles(text) is text


def test_the_markdown_is_parsed_once_for_references_and_angle_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text with a character reference (inside code: it stays) and a ``<`` is read for its code once, for both the
    invisible-character pass and the escape of ``<`` (the converter's own parse of what it renders is its own), and
    rendered as before."""
    from streamrelay.adapters.telegram import render as module

    text = "`a&#x200B;b` and Vec<String>"
    parses: list[str] = []
    parse = module._code_ranges

    def counted(source: str) -> list[tuple[int, int]]:
        parses.append(source)
        return parse(source)

    monkeypatch.setattr(module, "_code_ranges", counted)
    rendered = render(text, TextFormat.MARKDOWN)
    assert rendered.text == "a&#x200B;b and Vec<String>"
    assert parses == [text]
