"""A Discord 429's wait is a number of seconds >= 0 (adapters/discord/trace.py): a ``Retry-After`` or JSON
``retry_after`` of NaN or a negative number (a broken proxy; Python's json reads ``NaN``) is not a wait. NaN passed
the ``max_retry_after_s`` cap (``nan > cap`` is False) and would have paused the scope for NaN seconds; a negative one
for none at all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from multidict import CIMultiDict

from streamrelay.adapters.discord.trace import _rate_limit_answer


def answer(headers: dict[str, str], data: dict[str, Any] | str) -> float:
    response: Any = SimpleNamespace(headers=CIMultiDict(headers))
    return float(_rate_limit_answer(response, data).retry_after)


@pytest.mark.parametrize("bad", ["nan", "NaN", "-30"])
def test_a_wait_that_is_no_duration_is_not_taken(bad: str) -> None:
    assert answer({"Via": "1.1 google", "Retry-After": "2"}, {"retry_after": float(bad)}) == 2.0
    assert answer({"Via": "1.1 google", "Retry-After": bad}, {"retry_after": 0.5}) == 0.5
    assert answer({"Via": "1.1 google", "Retry-After": bad}, {}) == 1.0


def test_a_wait_past_any_cap_is_kept_for_the_cap_to_refuse() -> None:
    assert answer({"Via": "1.1 google"}, {"retry_after": float("inf")}) == float("inf")
