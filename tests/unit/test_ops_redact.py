"""The log redactor: known secret values and secret shapes become ``<redacted>``; ordinary text stays as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamrelay.adapters.ops.redact import REDACTED, Redactor

TELEGRAM = "123456789:AAE-mock_Secret-Token_0123456789abcdef"
SLACK = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
DISCORD = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GmOcKz.mock_Secret-Hmac_0123456789abcdefgh"


def test_a_known_value_is_replaced_wherever_it_appears_and_a_telegram_secret_alone_too() -> None:
    redactor = Redactor(["ingest-secret-for-tests", "123:short-part-of-a-token"])
    line = "token ingest-secret-for-tests then short-part-of-a-token alone, and 123:short-part-of-a-token whole"
    assert redactor.text(line) == f"token {REDACTED} then {REDACTED} alone, and {REDACTED} whole"


def test_short_values_are_not_registered_since_they_would_garble_every_line() -> None:
    assert Redactor(["abc", "1:ab"]).text("abc 1:ab cab") == "abc 1:ab cab"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"POST https://api.telegram.org/bot{TELEGRAM}/sendMessage failed",
            f"POST https://api.telegram.org/bot{REDACTED}/sendMessage failed",
        ),
        (f"token {TELEGRAM} leaked", f"token {REDACTED} leaked"),
        ("{'Authorization': 'Bearer abc.DEF-123'}", f"{{'Authorization': '{REDACTED}'}}"),
        (f"Authorization: Bot {DISCORD}", f"Authorization: {REDACTED}"),
        ("curl -H 'authorization: Bearer sekrit-value'", f"curl -H 'authorization: {REDACTED}'"),
        ("sent Bearer abcdefgh12345 along", f"sent Bearer {REDACTED} along"),
        ("GET /runs/r1?token=3f9c0a1b2c&x=1", f"GET /runs/r1?token={REDACTED}&x=1"),
        ("GET /v1/runs/r1/live?after=3&token=3f9c0a1b2c", f"GET /v1/runs/r1/live?after=3&token={REDACTED}"),
        (f"slack said invalid_auth for {SLACK}", f"slack said invalid_auth for {REDACTED}"),
        (f"discord token {DISCORD} rejected", f"discord token {REDACTED} rejected"),
    ],
)
def test_secret_shapes_are_redacted_without_a_registered_value(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "https://core.telegram.org/bots/api#editmessagetext",
        "the bot answered 429 after 12:30",
        "run r1 part 2: edit retry (PlatformUnavailableError: 502)",
        "GET /v1/runs/r1?wait_s=10",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor(["ingest-secret-for-tests"]).text(text) == text


def test_the_processor_redacts_nested_values_and_leaves_structlogs_own_keys() -> None:
    record = object()
    event: dict[str, Any] = {
        "event": f"calling /bot{TELEGRAM}/getMe",
        "headers": {"Authorization": "Bearer ingest-secret-for-tests"},
        "urls": [f"/bot{TELEGRAM}/x", ("?token=abcdefgh",)],
        "status": 200,
        "_record": record,
    }
    out = Redactor(["ingest-secret-for-tests"])(None, "info", event)
    assert out["event"] == f"calling /bot{REDACTED}/getMe"
    assert out["headers"] == {"Authorization": REDACTED}
    assert out["urls"] == [f"/bot{REDACTED}/x", (f"?token={REDACTED}",)]
    assert out["status"] == 200 and out["_record"] is record


def test_a_rendered_json_line_stays_valid_json() -> None:
    line = json.dumps({"event": "sent Authorization: Bearer abc.def", "url": f"/bot{TELEGRAM}/sendMessage"})
    assert json.loads(Redactor().text(line)) == {
        "event": f"sent Authorization: {REDACTED}",
        "url": f"/bot{REDACTED}/sendMessage",
    }


def test_the_repr_never_shows_a_value() -> None:
    assert "ingest-secret" not in repr(Redactor(["ingest-secret-for-tests"]))
