"""The text store's search for characters outside the BMP (``astral_positions``): the UTF-16 code units a position
is counted in depend on it (``TextStore.cum_at``). Checked against a regular expression for the range on texts of
ASCII, Latin-1 and BMP characters whose UTF-16 bytes hold 0xD8..0xDB (``Ø``, ``Û``, ``Ә``, ``ඊ``) and characters of
planes 1, 13 and 16."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from streamrelay.core.chunking.store import astral_positions

_RANGE = re.compile("[\U00010000-\U0010ffff]")
_ALPHABET = ["a", "\n", "\u00d8", "\u00db", "\u04d8", "\u0d8a", "\ud7ff", "\uffff", "\u2764", "\U0001f600",
             "\U00010000", "\U000db000", "\U0010ffff"]  # fmt: skip


@given(st.lists(st.sampled_from(_ALPHABET), max_size=60).map("".join), st.integers(0, 10_000))
def test_astral_positions_are_where_the_range_matches(text: str, pos: int) -> None:
    assert astral_positions(text, pos) == [pos + m.start() for m in _RANGE.finditer(text)]


def test_astral_positions_of_a_recorded_kind_of_text() -> None:
    text = "Ø ok \U0001f600\n\u04d8\U0001f680x\U0010ffff"
    assert astral_positions(text, 100) == [105, 108, 110]
