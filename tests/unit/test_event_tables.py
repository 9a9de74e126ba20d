"""Every event type of the eight stream formats has a row in its normalizer's table (issue 26): what it means for
the run (:class:`core.normalize.meanings.Meaning`). Every stream the project has (recordings, upstream fixtures,
reported cases, shared/streams) is read line by line; a type without a row fails here, naming it."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest

from streamrelay.app.ingest_client import recording_lines
from streamrelay.core.events import ProviderFormat
from streamrelay.core.normalize import (
    a2a,
    ag_ui,
    ai_sdk_ui,
    anthropic,
    gemini,
    langgraph,
    openai_chat,
    openai_responses,
)
from streamrelay.core.normalize.meanings import Meaning, undeclared

MODULES: dict[ProviderFormat, ModuleType] = {
    ProviderFormat.ANTHROPIC: anthropic,
    ProviderFormat.OPENAI_RESPONSES: openai_responses,
    ProviderFormat.OPENAI_CHAT: openai_chat,
    ProviderFormat.GEMINI: gemini,
    ProviderFormat.AG_UI: ag_ui,
    ProviderFormat.AI_SDK_UI: ai_sdk_ui,
    ProviderFormat.A2A: a2a,
    ProviderFormat.LANGGRAPH: langgraph,
}
ROOTS = [Path(__file__).resolve().parents[1] / "streams", Path("/work/shared/streams")]
FILES = sorted(
    (fmt, path)
    for root in ROOTS
    if root.is_dir()
    for fmt in ProviderFormat
    if (root / fmt.value).is_dir()
    for path in (root / fmt.value).rglob("*.jsonl")
)


def test_every_format_has_a_table() -> None:
    assert set(MODULES) == set(ProviderFormat)
    for module in MODULES.values():
        assert module.EVENT_TYPES, module.__name__
        for key, meanings in module.EVENT_TYPES.items():
            assert meanings and all(isinstance(m, Meaning) for m in meanings), (module.__name__, key)


def test_every_format_has_streams_to_read() -> None:
    assert {fmt for fmt, _ in FILES} == set(ProviderFormat)


@pytest.mark.parametrize(("fmt", "path"), FILES, ids=[f"{f.value}:{p.parent.name}/{p.stem}" for f, p in FILES])
def test_every_type_in_every_stream_has_a_row(fmt: ProviderFormat, path: Path) -> None:
    module = MODULES[fmt]
    seen = {key for raw in recording_lines(path) for key in module.event_types(raw)}
    assert seen, path
    assert sorted(seen - set(module.EVENT_TYPES)) == [], f"{path}: types with no row in {module.__name__}.EVENT_TYPES"


@pytest.mark.parametrize(
    ("fmt", "raw", "key"),
    [
        (ProviderFormat.ANTHROPIC, {"type": "brand_new_event"}, "brand_new_event"),
        (ProviderFormat.ANTHROPIC, {"type": "content_block_delta", "delta": {"type": "new_delta"}}, "delta/new_delta"),
        (ProviderFormat.OPENAI_RESPONSES, {"type": "response.new_thing.delta"}, "response.new_thing.delta"),
        (ProviderFormat.OPENAI_RESPONSES, {"type": "response.output_item.done", "item": {"type": "x"}}, "item/x"),
        (ProviderFormat.OPENAI_CHAT, {"choices": [{"delta": {"new_field": "x"}}]}, "delta.new_field"),
        (ProviderFormat.OPENAI_CHAT, {"choices": [{"delta": {}, "finish_reason": "new"}]}, "finish_reason/new"),
        (ProviderFormat.GEMINI, {"candidates": [{"content": {"parts": [{"newPart": {}}]}}]}, "part/newPart"),
        (ProviderFormat.AG_UI, {"type": "A_FUTURE_EVENT"}, "A_FUTURE_EVENT"),
        (ProviderFormat.AI_SDK_UI, {"type": "some-future-part"}, "some-future-part"),
        (
            ProviderFormat.A2A,
            {"jsonrpc": "2.0", "result": {"kind": "push-notification-config"}},
            "push-notification-config",
        ),
        (ProviderFormat.A2A, {"result": {"kind": "message", "parts": [{"kind": "video"}]}}, "part/video"),
        (ProviderFormat.LANGGRAPH, {"event": "a-future-mode|sub:1", "data": {}}, "a-future-mode"),
    ],
)
def test_an_unknown_type_has_no_row_and_is_logged_once(
    fmt: ProviderFormat, raw: dict[str, object], key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What the stream test above would fail on; at run time such a type is ignored and logged once."""
    module = MODULES[fmt]
    assert key in module.event_types(raw) and key not in module.EVENT_TYPES
    with caplog.at_level(logging.WARNING, logger="streamrelay.core.normalize.meanings"):
        assert undeclared(f"test-{fmt.value}", module.EVENT_TYPES, [key]) == [key]
        assert undeclared(f"test-{fmt.value}", module.EVENT_TYPES, [key]) == [key]
    assert [r.getMessage().count(repr(key)) for r in caplog.records] == [1]


def test_the_docstrings_name_what_the_tables_say_is_ignored() -> None:
    """A row ignored on purpose is named in the module's docstring (its reason is there)."""
    for module in (ag_ui, anthropic, openai_responses):
        doc = module.__doc__ or ""
        for key, meanings in module.EVENT_TYPES.items():
            name = key.split("/")[-1]
            if meanings == {Meaning.IGNORED} and "." not in name and name.isupper():
                assert name in doc, (module.__name__, key)
