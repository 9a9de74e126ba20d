"""Attacks on the send path's pre-checks: ``strip_invisible``'s character class (:data:`_RULED`) must hold every
character the rule can remove, in any neighbourhood; the redactor's one combined search must find every value one of
its shapes would change (secrets at string edges, split, in nested structures, bytes, exceptions' reprs)."""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.adapters.invisible import _RULED, INVISIBLE, strip_invisible
from streamrelay.adapters.ops.redact import _SHAPES, REDACTED, Redactor

NEIGHBOURS = ["", "a", "😀", "中", "\u2801", "\u1100", "\u1161", "ب", "#", "1", "\u094d", "\u1820", "\U0001f3f4"]


def test_no_character_outside_the_class_is_removed_in_any_neighbourhood() -> None:
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        if _RULED.match(c) is not None or 0xD800 <= cp <= 0xDFFF:
            continue
        for text in (c, f"a{c}a", f"😀{c}😀", f"\u2801{c}\u2801", f"ب{c}ب"):
            assert INVISIBLE.search(text) is None, hex(cp)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from([*NEIGHBOURS[1:], "\u200d", "\u200c", "\ufe0f", "\u2800", "\U000e0067", " "])))
def test_the_pre_check_changes_nothing(text: str) -> None:
    reference = text
    while (stripped := INVISIBLE.sub(lambda m: m.group() if m.group("flag") else "", reference)) != reference:
        reference = stripped
    if _RULED.search(text) is None:
        assert strip_invisible(text) == text == reference


def _reference(redactor: Redactor, text: str) -> str:
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return redactor.known_only(text)


FRAGMENTS = [
    "/bot123456:AAHsecretsecret/getMe",
    "123456789:" + "A" * 35,
    "Authorization: Bearer abc.def",
    "AUTHORIZATION='Bot xyz'",
    "bearer\tzzz",
    "?token=abc",
    "&ACCESS_TOKEN=q",
    "https://user:pw@host/x",
    "xoxb-123-abc",
    "xapp-1-A",
    "M" * 24 + "." + "G" * 6 + "." + "h" * 27,
    "known-secret-value",
    " ",
    "'",
    '"',
    "\n",
    "word",
    "é",
    ":",
    "=",
]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join), st.integers(0, 40), st.integers(0, 40))
def test_the_combined_search_redacts_as_every_substitution(text: str, cut_start: int, cut_end: int) -> None:
    redactor = Redactor(["known-secret-value"])
    for piece in (text, text[cut_start:], text[: len(text) - cut_end], text.upper(), text.lower()):
        assert redactor.text(piece) == _reference(redactor, piece)


def test_secrets_in_nested_values_bytes_and_exception_reprs_are_redacted() -> None:
    redactor = Redactor(["known-secret-value"])
    token = "xoxb-123-abc"
    value = {
        "a": [("x", {"b": f"Bearer {token}"})],
        "c": token.encode(),
        "d": bytearray(b"https://api.telegram.org/bot123456:AAHsecretsecret/getMe"),
        "e": repr(ValueError(f"failed with token={token}&x")),
        "f": ["known-secret-value"],
    }
    out = repr(redactor.value(value))
    assert token not in out and "AAHsecretsecret" not in out and "known-secret-value" not in out
    assert out.count(REDACTED) >= 5
