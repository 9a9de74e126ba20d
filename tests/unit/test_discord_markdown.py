"""Markdown Discord does not render (#### headings, thematic breaks, setext headings, tables) rewritten into what it
does, outside code only; within the message limit or not at all (adapters/discord/markdown.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamrelay.adapters.discord.markdown import RULE, discord_markdown
from streamrelay.adapters.discord.render import render
from streamrelay.core.ports import TextFormat
from streamrelay.core.text.chunk_checks import fences_balanced

TABLE = "| Model | Battery | Price |\n|---|:---:|--:|\n| X1 | 14 h | 1,299 EUR |\n| Zen 7 | 9 h | 899 EUR |"


def test_a_table_becomes_a_code_block_with_its_columns_lined_up() -> None:
    assert discord_markdown(f"Compared:\n\n{TABLE}\n\nThat is all.") == (
        "Compared:\n\n```\nModel | Battery | Price\n------+---------+----------\nX1    | 14 h    | 1,299 EUR\n"
        "Zen 7 | 9 h     | 899 EUR\n```\n\nThat is all."
    )


def test_headings_discord_lacks_become_bold_and_breaks_a_rule() -> None:
    text = "# Kept\n### Kept too\n#### Setup ##\n###### Tiny\n\n---\n\nText\n---\n\n- item\n***"
    assert discord_markdown(text) == f"# Kept\n### Kept too\n**Setup**\n**Tiny**\n\n{RULE}\n\n## Text\n\n- item\n{RULE}"


def test_nothing_changes_inside_code_or_without_markup() -> None:
    fenced = f"```md\n{TABLE}\n#### not a heading\n---\n```"
    assert discord_markdown(fenced) == fenced
    plain = "A paragraph with a | pipe and - dashes - here.\n\nAnother."
    assert discord_markdown(plain) == plain


def test_a_table_holding_a_fence_marker_stays_as_typed() -> None:
    text = "| a | b |\n|---|---|\n| ``` | x |"
    assert discord_markdown(text) == text


def test_the_rewrite_is_dropped_when_it_would_pass_the_limit() -> None:
    text = f"{TABLE}\n"
    assert render(text, TextFormat.MARKDOWN, 2000).content.startswith("```")
    assert render(text, TextFormat.MARKDOWN, len(text)).content == text  # padded, it would not fit: sent as typed
    assert render(text, TextFormat.PLAIN, 2000).content == text


@given(st.lists(st.sampled_from(["#### H", "---", "Text", "", "| a | b |", "|---|---|", "| 1 | 2 |", "```", "***"])))
def test_every_word_stays_and_fences_stay_balanced(lines: list[str]) -> None:
    text = "\n".join(lines)
    shown = discord_markdown(text)
    words = [w.strip("#-*`") for w in text.replace("|", " ").split() if w.strip("#-*`")]
    assert [w.strip("#-*`─+") for w in shown.replace("|", " ").split() if w.strip("#-*`─+")] == words
    if fences_balanced(text):
        assert fences_balanced(shown)
