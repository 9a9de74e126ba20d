"""The demo's check "answer shown once, whole" on rendered text (what a person reads), and the demo's exit code:
1 whenever a check says NO, even when the report says delivered."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

import streamrelay.app.demo as demo_module
from streamrelay.adapters.telegram.render import render
from streamrelay.app.demo import recorded_answer, run_demo
from streamrelay.app.demo_check import Check, demo_checks
from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.core.ports import TextFormat

pytestmark = pytest.mark.timeout(60)

STREAMS = Path(__file__).parents[1] / "streams"
LONG = STREAMS / "anthropic" / "markdown-long-fences.jsonl"
ANSWER = (
    "## Sorting\n\nUse **merge sort** when `stability` matters:\n\n```python\ndef merge(a, b):\n    return a\n```\n\n"
    "| algo | time |\n|---|---|\n| quick | O(n log n) |\n\n- one\n- two\n"
)
CUT = ANSWER.index("    return")
FIRST, SECOND = ANSWER[:CUT], ANSWER[CUT:]  # cut inside the fence
SECOND_REOPENED = "```python\n" + SECOND  # the chunker reopens a fence it cut
FIRST_CLOSED = FIRST + "\n```"


def verdict(texts: list[str], platform: str, fmt: TextFormat = TextFormat.MARKDOWN, answer: str = ANSWER) -> bool:
    checks = {check.name: check for check in demo_checks(texts, answer, platform=platform, fmt=fmt, limit=4096)}
    return checks["answer shown once, whole"].ok


def test_telegram_shows_the_rendered_text_and_the_check_says_yes() -> None:
    shown = [render(FIRST_CLOSED, TextFormat.MARKDOWN)[0], render(SECOND_REOPENED, TextFormat.MARKDOWN)[0]]
    assert "**" not in "".join(shown) and "merge sort" in shown[0]  # what Telegram shows: no markup
    assert verdict(shown, "telegram")


@pytest.mark.parametrize("platform", ["slack", "discord", "web"])
def test_markdown_platforms_are_compared_rendered(platform: str) -> None:
    assert verdict([FIRST_CLOSED, SECOND_REOPENED], platform)
    assert verdict([ANSWER], platform)


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "web"])
def test_a_doubled_or_missing_part_says_no(platform: str) -> None:
    def shown(text: str) -> str:
        return render(text, TextFormat.MARKDOWN)[0] if platform == "telegram" else text

    doubled = [shown(FIRST_CLOSED), shown(FIRST_CLOSED), shown(SECOND_REOPENED)]
    assert not verdict(doubled, platform)
    assert not verdict([shown(FIRST_CLOSED)], platform)
    assert not verdict([shown(ANSWER.replace("merge sort", "quick sort"))], platform)


def test_telegram_showing_raw_markdown_says_no() -> None:
    """Rendering was asked for: the raw Markdown in the chat is not the answer as it should read."""
    assert not verdict([ANSWER], "telegram")


def test_plain_compares_the_raw_text() -> None:
    assert verdict([FIRST_CLOSED, SECOND_REOPENED], "telegram", TextFormat.PLAIN)
    assert not verdict([render(ANSWER, TextFormat.MARKDOWN)[0]], "telegram", TextFormat.PLAIN)


def test_progress_mode_allows_a_status_message_first() -> None:
    texts = ["✅ done: 2 tool calls", ANSWER]
    checks = demo_checks(texts, ANSWER, platform="slack", fmt=TextFormat.MARKDOWN, limit=4096, status_first=True)
    assert all(check.ok for check in checks)


def test_the_long_recording_cut_in_many_messages_says_yes() -> None:
    """The demo's recording, cut at its blank lines outside fences into messages of ~1,500 characters."""
    answer = recorded_answer(recording_lines(LONG), detect_format(LONG))
    messages, current, in_fence = [], "", False
    for block in answer.split("\n\n"):
        in_fence ^= block.count("```") % 2 == 1
        current = f"{current}\n\n{block}" if current else block
        if len(current) > 1500 and not in_fence:
            messages.append(current)
            current = ""
    messages.append(current)
    assert len(messages) > 3
    assert verdict([render(m, TextFormat.MARKDOWN)[0] for m in messages], "telegram", answer=answer)
    assert verdict(messages, "discord", answer=answer)


async def test_the_demo_exits_1_when_a_check_says_no(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delivered report is not enough: a NO in the checks makes the exit code 1 (and is printed first)."""
    recording = STREAMS / "openai-chat" / "text.jsonl"
    out = io.StringIO()
    console = Console(file=out, width=120)
    assert await run_demo(console, recording=recording, platform="web", pace_ms=0) == 0

    def failing(*args: object, **kwargs: object) -> list[Check]:
        return [Check("answer shown once, whole", False, "broken on purpose")]

    monkeypatch.setattr(demo_module, "demo_checks", failing)
    out.truncate(0)
    assert await run_demo(console, recording=recording, platform="web", pace_ms=0) == 1
    assert "NO (broken on purpose)" in out.getvalue()
    assert "delivered" in out.getvalue()
