"""streamrelay.adapters.rendering.RenderCache: a text measured then sent is rendered once; the cache stays bounded."""

from __future__ import annotations

from dataclasses import dataclass

from streamrelay.adapters.rendering import RenderCache
from streamrelay.core.ports import TextFormat

MARKDOWN, PLAIN = TextFormat.MARKDOWN, TextFormat.PLAIN


@dataclass(frozen=True)
class Shown:
    body: str
    units: int


def counting() -> tuple[RenderCache[Shown], list[tuple[str, TextFormat]]]:
    calls: list[tuple[str, TextFormat]] = []

    def render(text: str, fmt: TextFormat) -> Shown:
        calls.append((text, fmt))
        return Shown(text.upper(), len(text))

    return RenderCache(render, size=2), calls


def test_the_same_text_and_format_is_rendered_once() -> None:
    cache, calls = counting()
    assert cache("hello", MARKDOWN).units == 5  # measured
    assert cache("hello", MARKDOWN) == Shown("HELLO", 5)  # sent
    assert cache("hello", PLAIN).body == "HELLO"  # another format is another rendering
    assert calls == [("hello", MARKDOWN), ("hello", PLAIN)]


def test_the_least_recently_used_rendering_is_dropped_past_the_bound() -> None:
    cache, calls = counting()
    cache("a", MARKDOWN)
    cache("b", MARKDOWN)
    cache("a", MARKDOWN)  # used again: "b" is now the oldest
    cache("c", MARKDOWN)
    assert len(cache) == 2
    cache("a", MARKDOWN)
    cache("b", MARKDOWN)  # dropped: rendered again
    assert [text for text, _ in calls] == ["a", "b", "c", "b"]
