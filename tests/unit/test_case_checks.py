"""The case runner's expectation checks (tests/cases/README.md) on hand-made transcripts."""

from __future__ import annotations

from typing import Any

from streamrelay.app.cases.expect import check_expectations, contains_phrase
from streamrelay.core.text.chunk_checks import content_key, fences_balanced


def _t(*texts: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    chat = [{"message_id": i + 1, "text": t} for i, t in enumerate(texts)]
    calls = (
        calls
        if calls is not None
        else [{"method": "sendMessage", "chat_id": 1, "text": t, "t_ms": 0, "status": 200} for t in texts]
    )
    return {"chat": chat, "calls": calls, "pipeline": [], "report": {"status": "delivered"}}


CTX = {"limit": 10, "unit": "utf16"}


def test_never_contains_matches_phrases_not_parts_of_longer_numbers() -> None:
    assert contains_phrase("Refunds take 4 days.", "4 days")
    assert not contains_phrase("Refunds take 14 days.", "4 days")
    assert contains_phrase("Reasoning: x", "Reasoning")
    assert not contains_phrase("scratch", "notes")


def test_fence_balance_follows_commonmark_nesting() -> None:
    assert fences_balanced("````md\n```py\nx\n```\n````")
    assert not fences_balanced("```py\nx\n")
    assert fences_balanced("~~~\n```\n~~~")


def test_content_ignores_whitespace_and_fence_lines_across_messages() -> None:
    transcript = _t("See:\n```py\na = 1\n```", "```py\nb = 2\n```\nOK")
    assert check_expectations({"content": "See:\n```py\na = 1\nb = 2\n```\nOK"}, transcript, CTX) == []
    assert content_key("a b\n```x\nc") == "abc"


def test_each_within_limit_counts_utf16_units() -> None:
    assert check_expectations({"each_within_limit": True}, _t("abcdefghi😀"), CTX) != []
    assert check_expectations({"each_within_limit": True}, _t("abcdefgh😀"), CTX) == []


def test_quiet_after_429_flags_a_call_inside_retry_after() -> None:
    calls = [
        {"method": "editMessageText", "chat_id": 1, "text": "a", "t_ms": 0, "status": 429, "retry_after_s": 3},
        {"method": "editMessageText", "chat_id": 1, "text": "ab", "t_ms": 2000, "status": 200},
    ]
    assert check_expectations({"quiet_after_429": True}, _t("ab", calls=calls), CTX) != []
    calls[1]["t_ms"] = 3000
    assert check_expectations({"quiet_after_429": True}, _t("ab", calls=calls), CTX) == []


def test_an_unknown_expect_key_is_a_failure() -> None:
    assert check_expectations({"chatt": []}, _t(), CTX) == [
        "unknown expect key 'chatt': the runner knows chat, content, last_message, max_messages, min_messages, "
        "each_within_limit, fences_balanced, max_calls, min_calls, calls, never_contains, quiet_after_429, max_status, "
        "report, pipeline"
    ]
