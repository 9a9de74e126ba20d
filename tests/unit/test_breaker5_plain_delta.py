"""Attacks on the plain delta line carried past admission as a :class:`TextDelta`: over generated line objects with
every field at times of a surprising type (bool, float, huge int, str subclass, enum member, lone surrogates, null,
mode variants, another run, extra keys), the fast path (``_delta_of``) takes exactly the lines the ``text`` event's
validator takes as they are, and a TextDelta stands for the very event the validator makes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.events import MAX_SEQ, TextDelta, TextEvent, TextMode, Visibility
from streamrelay.core.ingest.admission import _delta_of, _text_event

MISSING = object()


class Sub(str):
    """A str subclass (an in-process caller's value, never JSON's)."""


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.sampled_from(["text", "text", "text", Sub("text"), "Text", None]),
    "text": st.one_of(
        st.text(max_size=4),
        st.sampled_from(["\ud800", "a\udfff", "😀", "", Sub("x"), 3, None, True]),
    ),
    "run": st.sampled_from([MISSING, MISSING, "r", Sub("r"), "other", "", None, 5]),
    "seq": st.one_of(
        st.just(MISSING),
        st.integers(-3, 20),
        st.sampled_from([MAX_SEQ, MAX_SEQ + 1, 2**64, -(2**64), True, False, 1.0, 2.5, "3", None, float("nan")]),
    ),
    "mode": st.sampled_from(
        [MISSING, MISSING, "delta", TextMode.DELTA, Sub("delta"), "Delta", "delta ", None, "snapshot", 0]
    ),
    "message": st.one_of(
        st.just(MISSING),
        st.integers(-2, 3),
        st.sampled_from([2**63, 2**64, 10**30, True, False, 1.0, "1", None, -(2**70)]),
    ),
    "visibility": st.sampled_from([MISSING, MISSING, "answer", Visibility.ANSWER, "reasoning"]),
    "lane": st.sampled_from([MISSING, MISSING, "ui", "pipeline"]),
    "source": st.sampled_from([MISSING, MISSING, None, {"agent_id": "a"}]),
    "extra": st.sampled_from([MISSING, MISSING, MISSING, 1, None]),
}


@st.composite
def line(draw: st.DrawFn) -> dict[str, Any]:
    fields = {name: draw(values) for name, values in VALUES.items()}
    return {k: v for k, v in fields.items() if v is not MISSING}


def _reference(obj: dict[str, Any], run_id: str, run_hint: str | None) -> TextEvent | None:
    """``_delta_of`` as it was before the TextDelta: the same checks, then the validator."""
    if obj.get("kind") != "text" or obj.get("mode", "delta") != "delta":
        return None
    if obj.get("run", run_hint) != run_id:
        return None
    return _text_event(obj, run_id)


def _values(event: TextEvent | TextDelta) -> tuple[object, ...]:
    return (
        type(event.run),
        event.run,
        type(event.text),
        event.text,
        event.seq,
        event.message,
        event.mode,
        event.visibility,
        event.lane,
        event.source,
        event.kind,
    )


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line(), st.sampled_from(["r", None, "other"]))
def test_the_fast_path_takes_a_line_as_the_validator_does(obj: dict[str, Any], hint: str | None) -> None:
    want = _reference(obj, "r", hint)
    got = _delta_of(obj, "r", hint)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert _values(got) == _values(want)
    if isinstance(got, TextDelta):
        assert got.event() == want
        assert _values(got.event()) == _values(want)


LINES: list[dict[str, Any]] = [
    {"kind": "text", "seq": 2, "text": "Hello \ud83d"},  # out of order: held until seq 1; half a surrogate pair
    {"kind": "text", "seq": 1, "text": "Oh. "},
    {"kind": "text", "seq": 3, "text": "\ude00 wor"},
    {"kind": "text", "seq": 3, "text": "\ude00 wor"},  # a repeat: dropped
    {"kind": "text", "seq": 4, "text": "ld\x07\u202e!", "message": 0},  # control and bidi characters: not plain
    {"kind": "text", "seq": 5, "text": "", "mode": "delta"},
    {"kind": "text", "seq": 6, "text": "\n\nSecond message", "message": 1},
    {"kind": "text", "seq": 7, "text": " goes on.", "message": 1, "run": "r"},
]


async def _chat(*, restart_after: int | None, typed: bool, batched: bool) -> list[str]:
    import asyncio

    from streamrelay.core.channel import ChannelRuntime
    from streamrelay.core.clock import MonotonicClock
    from streamrelay.core.events import parse_event
    from streamrelay.core.policy import ChannelPolicy
    from streamrelay.core.records.journal import MemoryJournal
    from streamrelay.core.records.ledger import MemoryLedger
    from streamrelay.core.run.relay import Relay
    from tests.unit.fakes import MemoryChat

    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()

    def relay() -> Relay:
        runtime = ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)
        return Relay({"c": runtime}, ledger, MonotonicClock(), journal=journal)

    current = relay()
    lines: list[Any] = [{"kind": "run.start", "channel": "c", "target": {"chat_id": 5}, "seq": 0}, *LINES]
    lines.append({"kind": "end", "seq": 8})
    if typed:
        lines = [parse_event({"run": "r", **line}) if line["kind"] == "text" else line for line in lines]
    cut = len(lines) if restart_after is None else restart_after
    if batched:
        await current.submit_lines([(line, None) for line in lines[:cut]], "r")
    else:
        for line in lines[:cut]:
            await current.submit_lines([(line, None)], "r")
            await asyncio.sleep(0)
    if restart_after is not None:
        await asyncio.sleep(0.05)
        await current.close()  # the process stops
        current = relay()
        assert await current.resume() == ["r"]
        for line in lines[cut:]:
            await current.submit_lines([(line, None)], "r")
    report = await current.wait_done("r", 10)
    await current.close()
    assert report is not None and report.done
    return list(chat.messages.values())


@pytest.mark.parametrize("restart_after", [None, 2, 4, 6, 8])
@pytest.mark.parametrize("batched", [False, True])
async def test_a_run_of_plain_deltas_shows_the_same_chat_typed_and_after_a_restart(
    restart_after: int | None, batched: bool
) -> None:
    want = await _chat(restart_after=None, typed=True, batched=False)
    assert await _chat(restart_after=restart_after, typed=False, batched=batched) == want
