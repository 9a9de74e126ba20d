"""WhatsApp rendering: the agent's Markdown in WhatsApp's own forms (adapters/whatsapp/render.py)."""

from __future__ import annotations

from streamrelay.adapters.whatsapp.render import markdown_to_whatsapp, render
from streamrelay.core.ports import TextFormat


def test_emphasis_strike_and_code_use_whatsapps_marks() -> None:
    assert markdown_to_whatsapp("**b** __b2__ *i* _i2_ ~~s~~ `c`") == "*b* *b2* _i_ _i2_ ~s~ `c`"


def test_a_heading_is_a_bold_line_and_a_rule_a_line_of_dashes() -> None:
    assert markdown_to_whatsapp("## Title\n\ntext\n\n---\n\nmore") == "*Title*\n\ntext\n\n———\n\nmore"


def test_links_and_images_keep_their_url_as_text() -> None:
    text = "[docs](https://e.x/d), <https://e.x/a> and ![chart](https://e.x/c.png)"
    assert markdown_to_whatsapp(text) == "docs (https://e.x/d), https://e.x/a and chart (https://e.x/c.png)"


def test_a_code_block_is_fenced_without_its_language() -> None:
    assert markdown_to_whatsapp("```python\nx = 1\n```") == "```\nx = 1\n```"


def test_lists_nest_and_keep_their_numbers_and_quotes_keep_their_marker() -> None:
    text = "3. three\n4. four\n   - sub\n\n> quoted\n> **line**"
    assert markdown_to_whatsapp(text) == "3. three\n4. four\n  - sub\n\n> quoted\n> *line*"


def test_a_table_is_a_monospace_block_with_padded_columns() -> None:
    text = "| name | n |\n|---|---|\n| apples | 3 |\n| figs | 12 |"
    assert markdown_to_whatsapp(text) == "```\nname   | n\n-------+---\napples | 3\nfigs   | 12\n```"


def test_plain_goes_as_written_and_every_format_counts_utf16_units() -> None:
    assert render("**x** 🙂", TextFormat.PLAIN).body == "**x** 🙂"
    assert render("**x** 🙂", TextFormat.PLAIN).units == 8  # the emoji is two UTF-16 units
    assert render("**x**", TextFormat.STRIPPED).body == "x"
