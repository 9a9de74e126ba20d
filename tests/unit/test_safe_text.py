"""Safe text (issue 12, item 5): control characters and bidi overrides never reach a person.

Each class of character, what is kept on purpose, and the properties the run stage relies on: idempotent, and
character-local (sanitizing each delta gives the sanitized whole, so snapshot prefixes still line up).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, ChunkParams
from streamrelay.core.contracts.units import ToolCallUnit
from streamrelay.core.delivery.status import redacted_args
from streamrelay.core.events import (
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    Media,
    Phase,
    Source,
    Status,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.media import MediaKind
from streamrelay.core.policy import ChannelPolicy, SubagentPolicy
from streamrelay.core.ports import TextFormat
from streamrelay.core.run.live import AnswerLive, DecisionLive
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.stage import RunStage
from streamrelay.core.text.coalescer import CoalesceParams
from streamrelay.core.text.safe_text import UNSAFE, safe_event, safe_text
from streamrelay.core.units import LengthUnit
from tests.unit.test_run_stage import replay, stage_of

SETTINGS = settings(max_examples=300, deadline=None)

C0_REMOVED = [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
C1_REMOVED = [chr(c) for c in range(0x80, 0xA0) if c != 0x85]
BIDI_REMOVED = [chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]]
REMOVED = [*C0_REMOVED, "\x7f", *C1_REMOVED, *BIDI_REMOVED, "\ufeff"]
LINE_BREAKS = {"\x85": "\n", "\u2028": "\n", "\u2029": "\n\n"}
KEPT = [
    "\t",
    "\n",
    "\u200e",  # LRM: an implicit mark, one strong letter
    "\u200f",  # RLM
    "\u061c",  # ALM
    "\u200d",  # ZWJ (emoji sequences)
    "\u200c",  # ZWNJ (Persian)
    "\ufe0f",  # VS16 (emoji presentation)
    "\u2060",  # WORD JOINER
    "שלום",  # Hebrew
    "مرحبا",  # Arabic
    "👨\u200d👩\u200d👧",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland: emoji tag characters
    "e\u0301",
    "中文",
    " ",
    "\xa0",
    "[31m",
]


def reference(text: str) -> str:
    """The rule written the slow way, one character at a time (what the compiled pattern must equal)."""
    return "".join(LINE_BREAKS.get(ch, "" if ch in REMOVED else ch) for ch in text)


@pytest.mark.parametrize("ch", REMOVED, ids=lambda ch: f"U+{ord(ch):04X}")
def test_each_control_bidi_and_bom_character_is_removed(ch: str) -> None:
    assert safe_text(f"a{ch}b") == "ab"
    assert safe_text(ch * 3) == ""


@pytest.mark.parametrize(("ch", "becomes"), list(LINE_BREAKS.items()), ids=lambda v: repr(v))
def test_unicode_line_breaks_become_newlines(ch: str, becomes: str) -> None:
    assert safe_text(f"one{ch}two") == f"one{becomes}two"


def test_carriage_returns_go_so_crlf_becomes_lf() -> None:
    assert safe_text("one\r\ntwo\rthree") == "one\ntwothree"


def test_an_ansi_escape_sequence_loses_its_escape_and_keeps_its_printable_tail() -> None:
    assert safe_text("\x1b[31mred\x1b[0m \x1b]0;title\x07") == "[31mred[0m ]0;title"


def test_trojan_source_overrides_and_isolates_are_removed() -> None:
    # The Trojan Source "stretched string" shape: an RLO ... PDI pair hides reordered text.
    text = 'access = "user\u202e \u2066// Check if admin\u2069 \u2066"'
    assert safe_text(text) == 'access = "user // Check if admin "'


@pytest.mark.parametrize("text", KEPT)
def test_what_is_kept_is_returned_unchanged(text: str) -> None:
    assert safe_text(text) is text or safe_text(text) == text
    sentence = f"x{text}y"
    assert safe_text(sentence) is sentence  # a safe text is returned as it is: no copy


def test_surrogates_are_left_for_the_text_assembler() -> None:
    # A delta may end in half a surrogate pair that the next one completes (core.text.visible keeps it).
    assert safe_text("a\ud83d") == "a\ud83d"
    assert safe_text("\ude00b") == "\ude00b"


unsafe_heavy = st.lists(
    st.one_of(
        st.sampled_from([*REMOVED, *LINE_BREAKS, *KEPT, "\ud83d", "\ude00", "\r", "\r\n"]),
        st.characters(),
    ),
    max_size=40,
).map("".join)
"""Text dense with every class of character (half surrogate pairs too), among any other code points."""


@SETTINGS
@given(unsafe_heavy)
def test_it_equals_the_character_by_character_rule(text: str) -> None:
    assert safe_text(text) == reference(text)


@SETTINGS
@given(unsafe_heavy)
def test_it_is_idempotent_and_leaves_nothing_unsafe(text: str) -> None:
    once = safe_text(text)
    assert safe_text(once) == once
    assert UNSAFE.search(once) is None


@SETTINGS
@given(st.lists(unsafe_heavy, max_size=12))
def test_sanitizing_each_delta_equals_sanitizing_the_joined_text(deltas: list[str]) -> None:
    whole = "".join(deltas)
    assert "".join(safe_text(d) for d in deltas) == safe_text(whole)
    for cut in range(len(whole) + 1):  # every prefix of the text stays a prefix of it, sanitized
        assert safe_text(whole).startswith(safe_text(whole[:cut]))


# --- events -----------------------------------------------------------------------------------------------

DIRTY = "a\x00b\u202ec"
SOURCE = Source(agent_id="res\u202eearcher", session_id="s\x001", path="root/res\u202eearcher")


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        (TextEvent(run="r", text=DIRTY), ["text"]),
        (TextEvent(run="r", text=DIRTY, visibility=Visibility.STATUS), ["text"]),
        (Status(run="r", text=DIRTY), ["text"]),
        (ToolResult(run="r", id="c1", name=DIRTY, summary=DIRTY), ["name", "summary"]),
        (Phase(run="r", name=DIRTY), ["name"]),
        (Commit(run="r", text=DIRTY), ["text"]),
        (End(run="r", final_text=DIRTY), ["final_text"]),
        (ErrorEvent(run="r", message=DIRTY), ["message"]),
        (Media(run="r", url="https://x/y.png", media_kind=MediaKind.IMAGE, caption=DIRTY), ["caption"]),
    ],
    ids=lambda v: v.kind if hasattr(v, "kind") else "",
)
def test_safe_event_cleans_every_text_a_person_reads(event: Event, fields: list[str]) -> None:
    clean = safe_event(event)
    for name in fields:
        assert getattr(clean, name) == "abc"
    assert safe_event(clean) is clean  # nothing left: the same object back


def test_safe_event_cleans_the_shown_identifiers_of_a_source_and_keeps_its_key_one_key() -> None:
    clean = safe_event(TextEvent(run="r", text="hi", source=SOURCE))
    assert clean.source == Source(agent_id="researcher", session_id="s1", path="root/researcher")
    again = safe_event(Status(run="r", text="x", source=SOURCE))
    assert again.source is not None and clean.source is not None and again.source.key == clean.source.key


def test_a_tool_calls_name_and_arguments_stay_as_they_came() -> None:
    call = ToolCall(run="r", id="c\x001", name="se\u202earch", state=ToolCallState.END, args={"q": "a\x00b"})
    assert safe_event(call) is call


def test_a_clean_event_is_not_copied() -> None:
    event = TextEvent(run="r", text="Hello, שלום 👋\n\tok", source=Source(agent_id="a"))
    assert safe_event(event) is event


def test_the_tool_argument_preview_people_see_is_clean() -> None:
    assert redacted_args({"q\u202e": "x\u2066y", "n": 1}) == 'q: "xy", n: 1'


# --- the run stage: the one point where text enters what people see --------------------------------------

RUN = "r1"
TOOL = "sea\u202erch"


def stage(delivery: DeliveryMode = DeliveryMode.PREVIEW, subagents: SubagentPolicy = SubagentPolicy.HIDDEN) -> RunStage:
    pol = ChannelPolicy(
        name="fake",
        delivery=delivery,
        max_units=700,
        unit=LengthUnit.UTF16,
        fmt=TextFormat.PLAIN,
        throttle_s=1.0,
        block_chunk=ChunkParams(min_chars=200, max_chars=700, break_preference=BreakKind.PARAGRAPH),
        coalesce=CoalesceParams(min_chars=200, max_chars=700, idle_ms=1000, joiner="\n\n"),
        subagents=subagents,
    )
    return stage_of(pol)


def shown(run: RunStage) -> list[str]:
    return [s.live.text(run.book.measure) if s.live is not None else s.desired for s in run.book.slots]


def monitor_strings(run: RunStage) -> list[str]:
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk([event.wire() for event in run.monitor.since(0)])
    walk(run.monitor.state)
    return out


def test_a_snapshot_with_unsafe_characters_still_extends_the_deltas_before_it() -> None:
    run = stage()
    run.handle(TextEvent(run=RUN, text="Hel\x00"))
    run.handle(TextEvent(run=RUN, text="lo \u202e"))
    run.handle(TextEvent(run=RUN, mode=TextMode.SNAPSHOT, text="Hel\x00lo \u202ewor\x07ld"))
    answers = [e.wire() for e in run.monitor.since(0) if isinstance(e, AnswerLive)]
    # appended, never a reset (deltas no watcher read yet are one event: core.run.monitor.RunMonitor.answer_delta)
    assert [e.get("delta") for e in answers] == ["Hello world"] and not any(e.get("reset") for e in answers)
    run.end(End(run=RUN, status=EndStatus.OK))
    assert shown(run) == ["Hello world"]


def test_every_text_the_stage_shows_or_tells_watchers_is_clean() -> None:
    run = stage(DeliveryMode.PROGRESS, SubagentPolicy.STATUS)
    run.opened("fake")
    child = Source(agent_id="help\u202eer", session_id="s\x001")
    events: list[Event] = [
        Phase(run=RUN, name="plan\x1b[1m"),
        Status(run=RUN, text="searching\u2066 the web\x07"),
        TextEvent(run=RUN, text="looking\x00", visibility=Visibility.STATUS),
        ToolCall(run=RUN, id="c1", name="sea\u202erch", state=ToolCallState.START),
        ToolCall(run=RUN, id="c1", name=TOOL, state=ToolCallState.END, args={"q\u202e": "refund\u2067 policy"}),
        ToolResult(run=RUN, id="c1", name="sea\u202erch", summary="3 hits\x1b"),
        TextEvent(run=RUN, text="child\u202e text", source=child),
        End(run=RUN, status=EndStatus.OK, final_text="child\x00 done", source=child),
        ErrorEvent(run=RUN, message="not\u202e fatal"),
        Commit(run=RUN, text="The \u202eanswer\x00"),
    ]
    for event in events:
        run.handle(event)
    run.end(End(run=RUN, status=EndStatus.OK, final_text="The \u202eanswer\x00 שלום\t👋\n"))
    texts = shown(run) + monitor_strings(run)
    assert all(UNSAFE.search(t) is None for t in texts), [t for t in texts if UNSAFE.search(t)]
    assert "The answer שלום\t👋" in shown(run)
    status = next(t for t in shown(run) if t.startswith("Done."))
    assert '• using search (q: "refund policy")' in status and "• search: 3 hits" in status
    assert "• searching the web" in status and "↳ helper: done" in status
    # The pipeline lane keeps the tool call as it came: its arguments are the parent loop's, not a person's.
    call = next(u for u in run.pipeline if isinstance(u, ToolCallUnit))
    assert call.name == "sea\u202erch" and call.args == {"q\u202e": "refund\u2067 policy"}


def test_a_failure_notice_shows_clean_error_messages() -> None:
    run = stage()
    run.handle(ErrorEvent(run=RUN, message="boom\x00\u202e!"))
    run.end(End(run=RUN, status=EndStatus.ERROR))
    notice = shown(run)[-1]
    assert notice.endswith("• boom!") and UNSAFE.search(notice) is None


def test_the_monitor_cleans_what_it_did_not_get_from_the_stage() -> None:
    monitor = RunMonitor(RUN)
    event = monitor.publish("decision", what="gate", call_id="c1", name="pay\u202e", reason="no\x00", verdict="deny")
    assert isinstance(event, DecisionLive) and (event.name, event.reason) == ("pay", "no")


@pytest.mark.parametrize("delivery", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK])
def test_a_journal_replay_of_the_raw_events_gives_the_same_safe_state_however_it_is_batched(
    delivery: DeliveryMode,
) -> None:
    """The journal keeps raw lines; a replay sanitizes them again. Joined deltas (a replay's backlog) give what
    the deltas one by one gave, and both what safe deltas give, because the sanitizer is character-local."""
    pieces = ["Hel\x00", "lo\u202e", " wor", "\x1b[1mld\r", "\n\u2066sh", "\u2069alom 👋\x07", "\ud83d", "\ude00!"]
    raw: list[Event] = [TextEvent(run=RUN, text=p) for p in pieces * 40]
    live = replay(delivery, raw, batch=1)
    assert replay(delivery, raw, batch=len(raw)) == live
    assert all(UNSAFE.search(text) is None for _role, text in live["parts"])
    clean: list[Event] = [TextEvent(run=RUN, text=safe_text(p)) for p in pieces * 40]
    assert replay(delivery, clean, batch=1) == live  # as if the runtime had sent safe text
