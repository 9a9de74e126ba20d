"""Markdown stripped to the text a person reads (the fallback after a formatting rejection)."""

from __future__ import annotations

from streamrelay.adapters.markdown_strip import strip_markdown


def test_strip_markdown_keeps_the_words() -> None:
    source = (
        "# Plan\n\n- step **one**\n  - nested\n3. `a`\n\n```py\nx = 1\n```\n\n> _quoted_ <b>\n\n"
        "| a | b |\n|-|-|\n| 1 | 2 |"
    )

    assert strip_markdown(source) == "Plan\n\n• step one\n  • nested\n\n3. a\n\nx = 1\n\nquoted <b>\n\na | b\n1 | 2"


def test_a_link_keeps_its_target_unless_the_label_is_the_target() -> None:
    assert (
        strip_markdown("Read [docs](https://x.org/a) or <https://x.org>")
        == "Read docs (https://x.org/a) or https://x.org"
    )
