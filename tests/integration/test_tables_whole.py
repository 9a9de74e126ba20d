"""Markdown tables reach chats whole (issue 25, item 6), through the real HTTP sidecar into mock chats, each through its
real SDK: a table that fits one message is never cut between its rows (block mode emitting at line breaks, the
coalescer joining blocks with a blank line), and a longer one is cut between rows with its header repeated."""

from __future__ import annotations

import pytest

from tests.integration.test_agent_text_inert import Chat

pytestmark = pytest.mark.timeout(90)

HEAD = "| city | temp |\n|---|---|"
ROWS = [f"| city{i} | {i * 7} |" for i in range(8)]
TABLE = "\n".join([HEAD, *ROWS])


def deltas(text: str, size: int = 7) -> list[dict[str, object]]:
    return [{"kind": "text", "mode": "delta", "text": text[i : i + size]} for i in range(0, len(text), size)]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_table_that_fits_is_one_message_in_block_mode(platform: str) -> None:
    chat = Chat(
        platform,
        delivery="block",
        format="plain",
        chunk={"min_chars": 10, "max_chars": 1000, "break_preference": "newline"},
        coalesce={"min_chars": 10, "max_chars": 1000, "idle_ms": 0},
    )
    await chat.deliver([*deltas(f"The week:\n{TABLE}\n\nThat is all."), {"kind": "end", "status": "ok"}])
    shown = [text for _mid, text in chat.mock.visible(chat.target.chat_id)]
    assert any(TABLE in text for text in shown), shown  # every row, in one message, no blank line between rows
    assert chat.report["status"] == "delivered"


@pytest.mark.parametrize("platform", ["telegram", "discord"])
async def test_a_longer_table_is_cut_between_rows_with_its_header_again(platform: str) -> None:
    chat = Chat(platform, delivery="final", format="plain", limit=100)
    await chat.deliver([*deltas(TABLE), {"kind": "end", "status": "ok"}])
    shown = [text for _mid, text in chat.mock.visible(chat.target.chat_id)]
    assert len(shown) > 1 and all(text.startswith(HEAD + "\n| city") for text in shown), shown
    assert [line for text in shown for line in text.split("\n")[2:]] == ROWS
