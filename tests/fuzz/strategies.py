"""Hypothesis strategies over the ingest contract (shared/DESIGN.md §3, core/events.py): valid events of every kind,
broken lines (wrong types, bad JSON, bad bytes) and hostile ones (control characters, markup, bad run ids, bad
run.start), as NDJSON lines (``bytes`` without their line end) and whole bodies.

Lines name their run with the placeholders :data:`RUN` and :data:`OTHER`: a test replaces them with fresh run ids
(:func:`with_runs`), so every example starts runs of its own however hypothesis repeats or shrinks its choices.
Raw provider streams are in :mod:`tests.fuzz.provider_strategies`.
"""

from __future__ import annotations

import itertools
import json
import string
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.samples import (
    BAD_BYTES,
    BAD_OVERRIDES,
    BAD_SEQS,
    BAD_TARGETS,
    BLANK_LINES,
    HOSTILE_RUN_IDS,
    HOSTILE_SNIPPETS,
    NOT_OBJECTS,
    ODD_TARGETS,
    WRONG_VALUES,
)

RUN = "@run@"
"""Placeholder of the run a body is about (replaced by :func:`with_runs`)."""
OTHER = "@other@"
"""Placeholder of a second run in the same body."""
VICTIM_CHAT = 900_000_000_001
"""The mock chat of the victim run: no fuzzed run.start may target it."""

Line = bytes
JsonObj = dict[str, Any]


# --- values ---------------------------------------------------------------------------------------------------

LONE_SURROGATES = ("\ud800", "\udfff", "\ud83d")
"""Half a UTF-16 pair: a text field takes it (repaired, or completed by the next delta); an id or a name refuses it."""

ids = st.text(string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=12)
plain_text = st.text(max_size=40)
names = st.lists(st.one_of(plain_text, st.sampled_from(HOSTILE_SNIPPETS)), max_size=4).map("".join)
"""Hostile but valid Unicode: control characters, bidi overrides, markup, mentions (ids, names, urls)."""
texts = st.lists(st.one_of(names, st.sampled_from(LONE_SURROGATES)), max_size=3).map("".join)
"""Text fields: as :data:`names`, and lone surrogates."""
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
sources = st.fixed_dictionaries(
    {"agent_id": ids},
    optional={
        "session_id": ids,
        "parent_session_id": ids,
        "depth": st.integers(1, 8),
        "path": st.lists(ids, min_size=1, max_size=4).map("/".join),
    },
)
TG_PRIVATE = 770_000_000_001
TG_GROUP = -TG_PRIVATE
TG_CHANNEL = "@fz_channel_slot"
"""Placeholders of Telegram chats, replaced by :func:`with_runs` with chats no other example used: runs in one chat
share its budget (a message a second; 19 a minute in a group), so fuzzed runs sharing chats would wait on each
other (the placeholders never name the victim's chat)."""
telegram_chats = st.sampled_from([TG_PRIVATE, TG_PRIVATE, TG_PRIVATE, TG_GROUP, TG_CHANNEL])
messages = st.integers(0, 3)


def _event(
    kind: str, required: dict[str, st.SearchStrategy[Any]], **optional: st.SearchStrategy[Any]
) -> st.SearchStrategy[JsonObj]:
    common: dict[str, st.SearchStrategy[Any]] = {
        "run": st.just(RUN),
        "seq": st.integers(0, 50),
        "source": sources,
        "lane": st.sampled_from(["ui", "pipeline"]),
    }
    optional = {**{k: v for k, v in common.items() if k not in required}, **optional}
    return st.fixed_dictionaries({"kind": st.just(kind), **required}, optional=optional)


# --- valid events -----------------------------------------------------------------------------------------------


def run_start(fmt: str | None = None, run: str = RUN) -> st.SearchStrategy[JsonObj]:
    """A valid ``run.start`` of :data:`RUN` on the ``telegram`` or ``web`` channel (``format`` when given)."""
    telegram_target: st.SearchStrategy[dict[str, Any]] = st.builds(dict, chat_id=telegram_chats)
    telegram = st.fixed_dictionaries({"channel": st.just("telegram"), "target": telegram_target})
    web = st.fixed_dictionaries({"channel": st.just("web"), "target": st.builds(dict, chat_id=ids | st.integers())})
    optional: dict[str, st.SearchStrategy[Any]] = {
        "mode": st.sampled_from(["preview", "block", "native", "final", "progress"]),
        "overrides": st.fixed_dictionaries(
            {},
            optional={
                "throttle_ms": st.integers(0, 50),
                "format": st.sampled_from(["plain", "markdown"]),
                "reasoning_opened": st.booleans(),
                "delta_replay_guard": st.booleans(),
            },
        ),
    }
    base = st.fixed_dictionaries({"kind": st.just("run.start"), "run": st.just(run)}, optional=optional)
    fmt_part: dict[str, Any] = {} if fmt is None else {"format": fmt}
    channel = st.one_of(web, web, web, telegram)  # most on the web channel: the bot's budget of 25/s is shared
    return st.tuples(base, channel).map(lambda parts: {**parts[0], **parts[1], **fmt_part})


tool_call = st.one_of(
    _event("tool_call", {"id": names, "state": st.just("start")}, name=names),
    _event("tool_call", {"id": names, "state": st.just("args_delta"), "args_delta": texts}, name=names),
    _event("tool_call", {"id": names, "state": st.just("end")}, name=names, args=st.dictionaries(texts, json_values)),
)
media = _event(
    "media",
    {
        "url": ids.map(lambda name: "https://example.com/" + name),
        "media_kind": st.sampled_from(["image", "file", "audio", "video"]),
    },
    caption=texts,
)
"""Valid media on either lane: its own message."""
bad_media = _event(
    "media",
    {
        "url": st.one_of(names, names.map(lambda name: "https://example.com/" + name)),
        "media_kind": st.one_of(st.sampled_from(["image", "file", "audio", "video"]), names),
    },
    caption=texts,
)
"""Media whose URL or kind may be wrong (a URL with whitespace, none, a path; an unknown kind): a 400 naming the
field, or, when the draw happens to be valid, its own message (a broken line's check allows both)."""
events = st.one_of(
    _event(
        "text",
        {"text": texts},
        mode=st.sampled_from(["delta", "snapshot", "replace"]),
        message=messages,
        visibility=st.sampled_from(["answer", "reasoning", "status"]),
    ),
    _event("block_end", {}, message=messages),
    _event("message_end", {}, message=messages),
    tool_call,
    _event("tool_result", {"id": names}, name=names, summary=texts),
    _event("phase", {"name": names}),
    _event("status", {"text": texts}),
    media,
    _event("commit", {}, text=texts),
    _event("end", {}, status=st.sampled_from(["ok", "error", "cancelled"]), final_text=texts),
    _event("error", {"message": texts}),
)
"""A valid event of any kind but ``run.start`` (of :data:`RUN`, or with no ``run``)."""


def encode(value: Any, ascii_only: bool = True) -> Line:
    """``value`` as one JSON line; lone surrogates kept as escapes, or as the bad bytes they make otherwise."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def encode_valid(value: Any, ascii_only: bool = True) -> Line:
    """``value`` as one valid JSON line in UTF-8 (lone surrogates as escapes, whatever ``ascii_only`` says)."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:
        return encode(value)


valid_lines = st.builds(encode_valid, events, st.booleans())


@st.composite
def valid_run_lines(draw: st.DrawFn, fmt: str | None = None) -> list[Line]:
    """A run that is all valid: its ``run.start``, events, maybe an ``end`` (every line must be taken: 2xx)."""
    start = draw(run_start(fmt))
    lines = [encode(start), *draw(st.lists(valid_lines, max_size=12))]
    if draw(st.booleans()):
        lines.append(encode({"kind": "end", "status": "ok"}))
    return lines


# --- broken lines -----------------------------------------------------------------------------------------------


@st.composite
def broken_event(draw: st.DrawFn) -> JsonObj:
    """A valid event with one thing wrong: a field of the wrong type, a bad seq, a field missing or unknown, an
    unknown kind."""
    event: JsonObj = draw(events | run_start())
    how = draw(st.sampled_from(["type", "seq", "drop", "extra", "kind"]))
    if how == "type":
        event[draw(st.sampled_from(sorted(event)))] = draw(st.sampled_from(WRONG_VALUES) | json_values)
    elif how == "seq":
        event["seq"] = draw(st.sampled_from(BAD_SEQS))
    elif how == "drop":
        del event[draw(st.sampled_from(sorted(event)))]
    elif how == "extra":
        event[draw(texts)] = draw(json_values)
    else:
        event["kind"] = draw(st.sampled_from(["", "Text", "run_start", "run.end", " text", "text\x00"]) | texts)
    return event


def nested(depth: int, opener: bytes = b"[", closer: bytes = b"]", core: bytes = b"1") -> bytes:
    return opener * depth + core + closer * depth


depths = st.sampled_from([50, 500, 900, 950, 980, 990, 1000, 1100, 5000, 20000])


@st.composite
def depth_bomb(draw: st.DrawFn) -> Line:
    """Nesting deep enough to hurt a recursive parser or encoder, alone or inside an event's field."""
    depth = draw(depths)
    bomb = draw(st.sampled_from([nested(depth), nested(depth, b'{"a":', b"}"), b"[" * depth]))
    where = draw(
        st.sampled_from(
            [
                b"%s",
                b'{"kind":"text","text":%s}',
                b'{"kind":"run.start","run":"@run@","channel":"web","target":{"chat_id":"p"},"overrides":{"x":%s}}',
                b'{"kind":"tool_call","id":"t","state":"end","args":{"a":%s}}',
                b'{"kind":"status","text":"s","source":{"agent_id":"a","path":%s}}',
            ]
        )
    )
    return where.replace(b"%s", bomb)


@st.composite
def byte_broken_line(draw: st.DrawFn) -> Line:
    """A line broken below JSON: bad UTF-8, a BOM, NaN, a key twice, cut short, huge, not an object, blank."""
    line = draw(valid_lines)
    how = draw(st.sampled_from(["utf8", "bom", "nan", "dup", "cut", "huge", "object", "blank", "surrogate", "cr"]))
    if how == "utf8":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.sampled_from(BAD_BYTES)) + line[at:]
    if how == "bom":
        return b"\xef\xbb\xbf" + line
    if how == "nan":
        value = draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
        return draw(st.sampled_from([b'{"kind":"text","text":%s}', b'{"kind":"end","seq":%s}'])).replace(
            b"%s", value.encode()
        )
    if how == "dup":
        return draw(
            st.sampled_from(
                [
                    b'{"kind":"text","text":"a","text":"b"}',
                    b'{"kind":"run.start","run":"@run@","channel":"web","target":{"chat_id":1,"chat_id":2}}',
                    b'{"kind":"end","kind":"end"}',
                ]
            )
        )
    if how == "cut":
        return line[: draw(st.integers(0, max(0, len(line) - 1)))]
    if how == "huge":
        size = draw(st.sampled_from([1_000, 30_000, 60_000, 70_000]))
        char = draw(st.sampled_from(["x", "é", "😀", "\\u0000", "\n"]))
        return encode({"kind": "text", "text": char * (size // len(char.encode()))}, draw(st.booleans()))
    if how == "object":
        return draw(st.sampled_from(NOT_OBJECTS))
    if how == "blank":
        return draw(st.sampled_from(BLANK_LINES))
    if how == "surrogate":
        where = draw(st.sampled_from(["key", "run", "kind", "channel", "id"]))
        return _surrogate_line(where, draw(st.sampled_from(["\ud800", "\udfff", "a\ud83d"])), draw(st.booleans()))
    return line + b"\r"


def _surrogate_line(where: str, bad: str, ascii_only: bool) -> Line:
    """A line with a lone surrogate in a key or an identifier (an escape, or its bad UTF-8 bytes)."""
    if where == "key":
        return encode({"kind": "text", "text": "x", bad: 1}, ascii_only)
    if where == "run":
        return encode({"kind": "run.start", "run": bad, "channel": "web", "target": {"chat_id": "p"}}, ascii_only)
    if where == "kind":
        return encode({"kind": bad, "text": "x"}, ascii_only)
    if where == "channel":
        return encode({"kind": "run.start", "run": RUN, "channel": bad, "target": {"chat_id": 1}}, ascii_only)
    return encode({"kind": "tool_call", "id": bad, "state": "start", "name": bad}, ascii_only)


broken_lines = st.one_of(
    st.builds(encode, broken_event(), st.booleans()),
    st.builds(encode, bad_media, st.booleans()),
    depth_bomb(),
    byte_broken_line(),
)

# --- hostile lines ----------------------------------------------------------------------------------------------


@st.composite
def hostile_start(draw: st.DrawFn) -> JsonObj:
    """A ``run.start`` with an unknown channel, a bad target or bad overrides."""
    start: JsonObj = draw(run_start())
    how = draw(st.sampled_from(["channel", "target", "overrides", "mode", "format"]))
    if how == "channel":
        start["channel"] = draw(st.sampled_from(["telegarm", "Telegram", " web", "", "slack"]) | texts)
    elif how == "target":
        start["target"] = draw(st.sampled_from(BAD_TARGETS + ODD_TARGETS))
    elif how == "overrides":
        start["overrides"] = draw(st.sampled_from(BAD_OVERRIDES) | st.dictionaries(texts, json_values, max_size=3))
    elif how == "mode":
        start["mode"] = draw(st.sampled_from(["stream", "", "PREVIEW"]) | json_values)
    else:
        start["format"] = draw(st.sampled_from(["anthropic ", "openai", "vertex", "AG-UI", ""]) | json_values)
    return start


@st.composite
def hostile_run_line(draw: st.DrawFn) -> JsonObj:
    """An event naming a hostile run id (a '/' or '..', spaces, 300 characters, control characters, unicode)."""
    event: JsonObj = draw(events | run_start())
    event["run"] = draw(st.sampled_from(HOSTILE_RUN_IDS) | texts)
    return event


hostile_lines = st.builds(encode, hostile_start() | hostile_run_line(), st.booleans())
any_line = st.one_of(valid_lines, broken_lines, hostile_lines)

# --- bodies -----------------------------------------------------------------------------------------------------


def body(lines: list[Line], *, crlf: bool = False, final_newline: bool = True) -> bytes:
    """The NDJSON body of ``lines``."""
    end = b"\r\n" if crlf else b"\n"
    return end.join(lines) + (end if final_newline and lines else b"")


@st.composite
def run_bodies(draw: st.DrawFn) -> bytes:
    """A body for ``/v1/runs/@run@/events``: usually a valid run.start first (else a hostile one, which only a run's
    first run.start reaches in full, or none), then valid, broken and hostile lines."""
    lines: list[Line] = []
    first = draw(st.sampled_from(["valid"] * 7 + ["hostile"] * 2 + ["none"]))
    if first != "none":
        lines.append(encode(draw(run_start() if first == "valid" else hostile_start())))
    lines += draw(st.lists(any_line, max_size=15))
    return body(lines, crlf=draw(st.booleans()), final_newline=draw(st.booleans()))


@st.composite
def multi_run_bodies(draw: st.DrawFn) -> bytes:
    """A body for ``/v1/events``: two runs interleaved, each line naming its run (or not, or a hostile one)."""
    lines: list[Line] = [encode(draw(run_start(run=RUN))), encode(draw(run_start(run=OTHER)))]
    for _ in range(draw(st.integers(0, 12))):
        line = draw(any_line)
        if draw(st.booleans()):
            line = line.replace(RUN.encode(), OTHER.encode())
        lines.insert(draw(st.integers(0, len(lines))), line)
    return body(lines, crlf=draw(st.booleans()), final_newline=draw(st.booleans()))


_chats = itertools.count(1)


def with_runs(data: bytes, run: str, other: str = "") -> bytes:
    """``data`` with the placeholders replaced: :data:`RUN` and :data:`OTHER` by the run ids given (plain ASCII ids:
    no JSON escaping needed), the Telegram chats by chats of their own."""
    chat = next(_chats)
    for slot, value in ((TG_GROUP, -chat), (TG_PRIVATE, chat), (TG_CHANNEL, f"@fz_channel_{chat}")):
        data = data.replace(str(slot).encode(), str(value).encode())
    return data.replace(RUN.encode(), run.encode()).replace(OTHER.encode(), (other or run + "-b").encode())
