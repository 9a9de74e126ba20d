"""The ingest's fast JSON path (orjson) decides a line only when the strict parser would give the same value: a key
twice, NaN / Infinity, a lone surrogate, an integer past 64 bits, a number past the double range are left to the
strict parser, whose value or error the client gets as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from streamrelay.adapters.ingest_http.lines import (
    _UNDECIDED,
    MAX_REJECTED_SHOWN,
    CountsResponse,
    Tally,
    decode,
    fast_strict_loads,
)
from streamrelay.core.errors import IngestError
from streamrelay.core.lanes.pipeline import (
    MAX_JSON_DEPTH,
    json_depth,
    strict_json_object,
    strict_loads,
)

KEYS = st.sampled_from(["a", "b", "a:b", ":", "kind", "text", "é", "😀"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab: "\\é😀\n\x01'), max_size=8)
)


def _json_text(value: Any, draw: st.DrawFn) -> str:
    """``value`` as JSON text, objects written member by member: a key may repeat, a ``:`` may be escaped."""
    if isinstance(value, list) and value and value[0] == "__object__":
        members = [f"{_key(key, draw)}:{_json_text(item, draw)}" for key, item in value[1:]]
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item, draw) for item in value) + "]"
    return json.dumps(value)


def _key(key: str, draw: st.DrawFn) -> str:
    text = json.dumps(key)
    return text.replace(":", "\\u003a") if draw(st.booleans()) else text


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    objects = st.lists(st.tuples(KEYS, SCALARS), max_size=4).map(lambda pairs: ["__object__", *pairs])
    tree = st.recursive(
        SCALARS | objects,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(st.tuples(KEYS, inner), max_size=4).map(lambda pairs: ["__object__", *pairs])
        ),
        max_leaves=12,
    )
    return _json_text(draw(tree), draw)


def _strict(raw: bytes) -> Any:
    try:
        return ("value", strict_loads(raw.decode("utf-8")))
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=400, deadline=None)
@given(text=json_texts())
def test_the_fast_path_decides_only_what_the_strict_parser_decides_the_same_way(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    fast = fast_strict_loads(raw)
    strict = _strict(raw)
    if fast is not _UNDECIDED:
        assert strict == ("value", fast)
        assert json.dumps(fast) == json.dumps(strict[1])  # the same types too (an int stays an int)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":2}',
        b'{"a":"x:y","b":{"c":1,"c":2}}',
        b'{"a":"\\u003a","a":1}',
        b'{"n":12345678901234567890}',
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":"\\ud800"}',
        b"1e400",
        b"\xef\xbb\xbf{}",
        b'{"a":1',
    ],
)
def test_lines_the_fast_path_leaves_to_the_strict_parser(raw: bytes) -> None:
    assert fast_strict_loads(raw) is _UNDECIDED


def test_a_repeated_key_is_refused_with_the_strict_parsers_message() -> None:
    with pytest.raises(IngestError, match="key 'c' appears twice"):
        decode(b'{"kind":"text","b":{"c":1,"c":2}}', 1000)
    assert decode(b'{"kind":"text","text":"a:b"}', 1000) == (
        {"kind": "text", "text": "a:b"},
        '{"kind":"text","text":"a:b"}',
    )


def _nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + "1" + closer * depth


@pytest.mark.parametrize("shape", [("[", "]"), ('{"a":', "}"), ('[{"a":', "}]")])
def test_a_line_nested_past_the_depth_limit_is_refused_with_400_on_both_paths(shape: tuple[str, str]) -> None:
    """The fuzzer's depth bombs: 128 levels (:data:`MAX_JSON_DEPTH`) are taken, one more is refused (422, saying
    what to do), on the fast path, on the strict one (a 20-digit integer sends a line there), past Python's limit."""
    opener, closer = shape
    levels = opener.count("[") + opener.count("{")
    within = _nested(MAX_JSON_DEPTH // levels, opener, closer)
    assert json_depth(decode(within.encode(), 10**6)[0]) == MAX_JSON_DEPTH  # the fast path
    assert json_depth(strict_loads(within)) == MAX_JSON_DEPTH
    for depth in (MAX_JSON_DEPTH // levels + 1, 254, 255, 600, 5000):
        bomb = _nested(depth, opener, closer)
        unclosed = ["[" * 100_000] if depth > 2000 else []  # past Python's recursion limit before the end
        in_a_line = '{"kind":"tool_call","args":' + bomb + "}"
        strict_path = '{"n":12345678901234567890,"b":' + bomb + "}"
        for raw in [bomb, in_a_line, strict_path, *unclosed]:
            with pytest.raises(IngestError, match=r"nested too deeply \(more than 128 levels") as refused:
                decode(raw.encode(), 10**6)
            assert refused.value.status == 400 and "flatten" in str(refused.value), (depth, raw[:20])
        with pytest.raises(ValueError, match=r"arguments are JSON nested too deeply \(more than 128 levels"):
            strict_json_object('{"a":' + bomb + "}")  # a tool call's streamed arguments: malformed, never a call


def test_the_depth_of_a_json_value() -> None:
    values: list[object] = [1, "[[", [], {}, [1, [2]], {"a": {"b": [{}]}}]
    assert [json_depth(v) for v in values] == [0, 0, 1, 1, 2, 4]
    assert json_depth(json.loads(_nested(500)), stop_past=5) == 6  # counted no further


def test_a_tally_lists_the_first_rejected_lines_in_line_order() -> None:
    """A batch's lines refused when decoded are told first, those refused when submitted after: the answer lists the
    first :data:`MAX_REJECTED_SHOWN` rejected lines by number, and its status is the first rejected line's."""
    tally = Tally()
    for batch in range(3):  # each batch: its odd lines refused when decoded (400), then its even ones (422)
        lines = range(batch * 10 + 1, batch * 10 + 11)
        for line in [n for n in lines if n % 2] + [n for n in lines if not n % 2]:
            status = 400 if line % 2 else 422
            tally.add(line, IngestError(f"line {line}", status=status))
    assert [r["line"] for r in tally.rejected] == list(range(1, MAX_REJECTED_SHOWN + 1))
    assert tally.rejected_total == 30 and tally.status == 400
    late = Tally()
    late.add(7, IngestError("decoded", status=400))
    late.add(3, IngestError("submitted", status=422))
    assert [r["line"] for r in late.rejected] == [3, 7] and late.status == 422


@given(st.integers(0, 10**9), st.integers(0, 10**9), st.text(st.characters(codec="utf-8")))
def test_the_counts_answer_is_the_bytes_starlette_renders(accepted: int, dropped: int, reason: str) -> None:
    """A request's 200 (rendered by orjson, its headers set at once) is byte for byte what :class:`JSONResponse`
    renders, headers too."""
    counts: dict[str, int | str] = {"accepted": accepted}
    if dropped:
        counts |= {"dropped": dropped, "dropped_reason": f"line 3: {reason}"}
    ours, theirs = CountsResponse(counts), JSONResponse(counts)
    assert (ours.body, ours.raw_headers, ours.status_code) == (theirs.body, theirs.raw_headers, theirs.status_code)
