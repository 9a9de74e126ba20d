"""A sub-agent's media with ``subagents = "status"`` is shown and reported, never dropped silently (issue 25, item 6):
through the real HTTP sidecar into the mock chats, each through its real SDK."""

from __future__ import annotations

import pytest

from tests.integration.test_agent_text_inert import Chat

pytestmark = pytest.mark.timeout(60)

CHILD = {"agent_id": "charter", "session_id": "s-charter", "depth": 1, "path": "root/charter"}
CHART = {"kind": "media", "url": "https://example.com/q3.png", "media_kind": "image", "caption": "Q3 by region"}


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_childs_media_with_status_lines_reaches_the_chat_and_the_report(platform: str) -> None:
    chat = Chat(platform, subagents="status")
    await chat.deliver(
        [
            {"kind": "text", "mode": "delta", "text": "Here is what the team found.\n\n"},
            {"kind": "text", "mode": "delta", "text": "plotting", "source": CHILD},
            {**CHART, "source": CHILD},
            {"kind": "end", "status": "ok", "source": CHILD},
            {"kind": "text", "mode": "delta", "text": "That is all."},
            {"kind": "end", "status": "ok"},
        ]
    )
    assert chat.report["status"] == "delivered", chat.report
    assert (chat.report["media"], chat.report["media_parts"]) == (1, 1)
    shown = [text for _mid, text in chat.mock.visible(chat.target.chat_id)]
    assert "Q3 by region" in "\n".join(shown)  # the media message (its caption, as a person reads it)
    assert any("charter" in text for text in shown)  # the child's status line
    assert "plotting" not in "\n".join(shown)  # the child's text stays apart
