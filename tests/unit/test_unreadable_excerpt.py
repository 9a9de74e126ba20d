"""An unreadable answer's excerpt never shows a secret, even one the excerpt's cut would split (the body is scrubbed
whole first; cut first, half a token is no longer recognised and its first half showed)."""

from __future__ import annotations

from streamrelay.adapters.http_failures import EXCERPT_CHARS, unreadable_answer

TOKEN = "123456:AAE-secret-token-of-the-bot-xyz"


def test_a_token_across_the_cut_never_shows() -> None:
    body = "x" * (EXCERPT_CHARS - 10) + TOKEN + " and more"
    error = unreadable_answer(
        "telegram",
        "sendMessage",
        status=200,
        why="ok without a result",
        body=body,
        target="7",
        scrub=lambda text: text.replace(TOKEN, "<token>"),
    )
    assert "123456" not in str(error) and "123456" not in error.excerpt
    assert "<tok" in error.excerpt and str(error).startswith("telegram sendMessage: unreadable answer (HTTP 200)")
