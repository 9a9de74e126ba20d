"""Any text, split into deltas in any way and sent in any batches through the relay (as ``submit_lines`` takes an
HTTP request's lines), shows exactly once (issue 26, item 8; DESIGN §4).

Deltas that arrive together are joined for speed (:func:`core.ingest.sequencer.join_deltas`); the replayed-snapshot
guard reads each delta as the agent sent it (a joined event lists where its deltas of 16 or more lie), and only when
the text so far is at least 16 characters. Before: 3,000
one-character ``"b"`` deltas in one request showed 440 to 1,208 characters (a joined batch began with the whole text so
far, so it was read as a replay); ``"-"`` then ``"-"``, ``"-"``, ``"\\n"``, ``"\\n"``, ``"Hello…"`` showed
``"--\\n\\nHello…"``.

What the person sees is compared with the same text sent as one delta through the same relay: the chunker's output
does not depend on how the text was split (DESIGN §4), so equal chats mean the text showed exactly once.
"""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Event, JoinedDeltas, TextDelta, TextEvent, parse_event
from streamrelay.core.ingest.sequencer import join_deltas
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.assembler import REPLAY_MIN_CHARS
from streamrelay.core.text.safe_text import safe_event, safe_text
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}
Batches = list[tuple[list[str], bool]]
"""Requests in order: the deltas of each, and whether the run's worker takes them before the next one arrives."""


async def _drained(relay: Relay, run: str) -> None:
    """Wait until the run's worker has taken every event handed to it (so the next request is a batch of its own)."""
    active = relay._runs.get(run)  # the worker's inbox: no public view of it, and a test needs one here
    while active is not None and not active.queue.empty():
        await asyncio.sleep(0)
    await asyncio.sleep(0)


async def _show(batches: Batches) -> tuple[str, list[str]]:
    """Send a run whose deltas come in ``batches``; return its report status and the chat's messages."""
    chat = MemoryChat()
    relay = Relay({"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, MemoryLedger(), MonotonicClock())
    await relay.submit_line(START, "r")
    await _drained(relay, "r")
    for deltas, taken_apart in batches:
        results = await relay.submit_lines([({"kind": "text", "text": d}, None) for d in deltas], "r")
        assert all(not isinstance(r, Exception) for r in results), results
        if taken_apart:
            await _drained(relay, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 30)
    await relay.close()
    assert report is not None
    return report.status, list(chat.messages.values())


def shown(batches: Batches) -> tuple[str, list[str]]:
    return asyncio.run(_show(batches))


def as_sent(deltas: list[str]) -> str:
    """The text the agent meant, by DESIGN §4 read on each delta as sent: a delta of 16 or more that begins with the
    whole text so far, itself 16 or more, is a replayed snapshot (it adds only its new end); any other is appended."""
    text = ""
    for delta in deltas:
        if len(text) >= REPLAY_MIN_CHARS and len(delta) >= REPLAY_MIN_CHARS and delta.startswith(text):
            text = delta
        else:
            text += delta
    return text


@st.composite
def cut(draw: st.DrawFn, text: str, sizes: st.SearchStrategy[int]) -> list[str]:
    deltas: list[str] = []
    pos = 0
    while pos < len(text):
        size = draw(sizes)
        deltas.append(text[pos : pos + size])
        pos += size
    return deltas


@st.composite
def in_batches(draw: st.DrawFn, deltas: list[str]) -> Batches:
    """``deltas`` cut into consecutive requests, each taken apart from the next or not."""
    bounds = sorted(set(draw(st.lists(st.integers(1, max(1, len(deltas) - 1)), max_size=6))))
    parts = [deltas[a:b] for a, b in itertools.pairwise([0, *bounds, len(deltas)]) if a < b]
    return [(part, draw(st.booleans())) for part in parts]


repetitive = st.one_of(
    st.integers(1, 400).map(lambda n: "b" * n),
    st.text(alphabet="-\n", min_size=1, max_size=12).map(lambda head: head + "Hello, here is the list:\n- one"),
    st.text(alphabet="ab \n-", min_size=1, max_size=300),
    st.text(min_size=1, max_size=200).map(safe_text),  # the guard reads text made safe: controls removed first
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), repetitive)
def test_any_split_in_any_batches_shows_the_text_exactly_once(data: st.DataObject, text: str) -> None:
    deltas = data.draw(cut(text, st.one_of(st.integers(1, 3), st.integers(1, 40))))  # token-sized mostly
    batches = data.draw(in_batches(deltas))
    meant = as_sent(deltas)  # the text itself unless some delta (16+) is by the rule a replay
    if all(len(d) < REPLAY_MIN_CHARS for d in deltas):
        assert meant == text
    status, messages = shown(batches)
    assert (status, messages) == shown([([meant], False)])  # the same chat and report as the text sent whole


def test_three_thousand_one_character_deltas_in_one_request_show_all_three_thousand() -> None:
    status, messages = shown([(["b"] * 3000, False)])
    assert "".join(messages) == "b" * 3000 and status == "delivered"


def test_three_thousand_one_character_deltas_in_many_requests_show_all_three_thousand() -> None:
    batches: Batches = [(["b"] * n, True) for n in (1, 2, 13, 200, 784, 2000)]
    status, messages = shown(batches)
    assert "".join(messages) == "b" * 3000 and status == "delivered"


def test_dashes_then_a_joined_request_beginning_with_them_show_as_sent() -> None:
    status, messages = shown([(["-"], True), (["-", "-", "\n", "\n", "Hello, here is the list"], False)])
    assert messages == ["---\n\nHello, here is the list"] and status == "delivered"


@st.composite
def with_replays(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Token-sized deltas (1 to 15 characters) of a text, and now and then, once the text so far is 16 or more, a
    bare delta replaying all of it (maybe with the next deltas' text too, which the stream then skips): what the
    guard exists for (openclaw #136262)."""
    text = draw(st.one_of(st.text(alphabet="ab \n-", min_size=1, max_size=200), st.text(min_size=1, max_size=120)))
    text = safe_text(text) or "a"  # the guard reads text made safe (controls removed): a replay as the guard sees it
    tokens = draw(cut(text, st.integers(1, REPLAY_MIN_CHARS - 1)))
    sent: list[str] = []
    so_far, index = "", 0
    while index < len(tokens):
        if len(so_far) >= REPLAY_MIN_CHARS and draw(st.booleans()):
            ahead = draw(st.integers(0, len(tokens) - index))
            so_far += "".join(tokens[index : index + ahead])
            index += ahead
            sent.append(so_far)
        if index < len(tokens):
            sent.append(tokens[index])
            so_far += tokens[index]
            index += 1
    return text, sent


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), with_replays())
def test_replayed_snapshots_in_any_batches_are_still_shown_once(
    data: st.DataObject, streamed: tuple[str, list[str]]
) -> None:
    text, sent = streamed
    assert as_sent(sent) == text
    status, messages = shown(data.draw(in_batches(sent)))
    assert (status, messages) == shown([([text], False)])


def test_a_replay_among_joined_deltas_is_still_recognised() -> None:
    order = "Your order #4411 shipped on Monday."
    deltas = ["Your ", "order ", "#4411 ", "shipped ", "on ", "Monday.", order, " Thanks", "!"]
    status, messages = shown([(deltas, False)])  # one request: the short ones joined, the replay alone
    assert messages == [order + " Thanks!"] and status == "delivered"


# --- the join itself -----------------------------------------------------------------------------------------------


def _texts(*texts: str) -> list[Event]:
    return [parse_event({"run": "r", "kind": "text", "text": t}) for t in texts]


def test_joined_deltas_say_where_each_delta_that_may_be_a_replay_lies() -> None:
    long = "x" * REPLAY_MIN_CHARS
    (joined,) = join_deltas(_texts("a", "b", long, "c", "e" * (REPLAY_MIN_CHARS - 1), long + "y"))
    assert isinstance(joined, JoinedDeltas)
    assert joined.text == "ab" + long + "c" + "e" * (REPLAY_MIN_CHARS - 1) + long + "y"
    assert joined.replay_candidates == ((2, REPLAY_MIN_CHARS), (2 + REPLAY_MIN_CHARS + REPLAY_MIN_CHARS, 17))
    alone = join_deltas(_texts("a", long))
    assert isinstance(alone[0], JoinedDeltas) and alone[0].replay_candidates == ((1, REPLAY_MIN_CHARS),)
    assert [type(e) for e in join_deltas(_texts(long))] == [TextEvent]  # a delta alone stays the event it came as


def test_joined_deltas_are_made_safe_like_one_delta() -> None:
    (joined,) = join_deltas(_texts("a\u202e", "b"))
    assert isinstance(joined, JoinedDeltas)
    safe = safe_event(joined)
    assert isinstance(safe, JoinedDeltas) and "\u202e" not in safe.text


def test_a_joined_replay_is_found_in_the_safe_text() -> None:
    """Control characters are removed before the guard reads the text: the joined deltas' parts move with them."""
    (joined,) = join_deltas(_texts("\x1f0", "00000000000000\x1f", "000000000000000\x1f"))
    safe = safe_event(joined)
    assert isinstance(safe, JoinedDeltas)
    assert [safe.text[a : a + n] for a, n in safe.replay_candidates] == ["0" * 15]


@given(
    st.lists(st.text(max_size=20), min_size=2, max_size=6),
    st.none() | st.integers(0, 1000),
    st.integers(0, 3),
)
def test_joined_plain_deltas_are_the_event_their_first_stands_for(
    texts: list[str], seq: int | None, message: int
) -> None:
    """Plain deltas (:class:`TextDelta`, as admission makes them) join into the same event, with the same fields set,
    as the :class:`TextEvent` their first one stands for joined with the rest (made without validating it again)."""
    deltas = [
        TextDelta(run="c/r", text=t, seq=None if seq is None else seq + i, message=message) for i, t in enumerate(texts)
    ]
    (joined,) = join_deltas(deltas)
    events: list[TextEvent | TextDelta] = [deltas[0].event(), *deltas[1:]]
    (reference,) = join_deltas(events)
    assert isinstance(joined, JoinedDeltas) and isinstance(reference, JoinedDeltas)
    assert list(joined.__dict__.items()) == list(reference.__dict__.items())
    assert joined.model_fields_set == reference.model_fields_set
    assert joined.model_dump_json(exclude_unset=True) == reference.model_dump_json(exclude_unset=True)
