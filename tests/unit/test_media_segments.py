"""The pure run stage with media (hypothesis): whatever the text around them and however it is split into deltas, in
every delivery mode the conversation's parts are, in order, the text before the first media item, that item, the
text after it, ... each text whole (whitespace aside) and in its own messages, each media item once."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.events import BlockEnd, DeliveryMode, End, Event, Media, TextEvent
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.records.report import SlotRole
from tests.unit.test_run_stage import RUN, stage_for

WORDS = st.text(alphabet="abcdefghij .,\n", min_size=1, max_size=400)
SEGMENTS = st.lists(st.lists(WORDS, min_size=0, max_size=4).map("".join), min_size=1, max_size=4).map(
    lambda texts: [f"S{i} {text}" for i, text in enumerate(texts)]
)
_SPACE = re.compile(r"\s+")


def _key(text: str) -> str:
    return _SPACE.sub("", text)


def _events(segments: list[str], cuts: list[int], block_ends: bool) -> list[Event]:
    """Each segment's deltas (cut every ``cuts[i]`` characters), a media item before every segment but the first.
    Segments start with their own tag: a delta that begins with the whole text so far would be taken for a replayed
    snapshot (the assembler's delta-replay guard, DESIGN §4), which is not what this test is about."""
    events: list[Event] = []
    for i, segment in enumerate(segments):
        if i:
            item = MediaItem(f"https://example.com/{i}.png", MediaKind.IMAGE, f"media {i}")
            events.append(Media(run=RUN, url=item.url, media_kind=item.kind, caption=item.caption))
        step = max(1, cuts[i % len(cuts)])
        events += [TextEvent(run=RUN, text=segment[j : j + step]) for j in range(0, len(segment), step)]
        if block_ends:
            events.append(BlockEnd(run=RUN))
    return events


@settings(max_examples=80, deadline=None)
@given(
    segments=SEGMENTS,
    cuts=st.lists(st.integers(1, 90), min_size=1, max_size=4),
    block_ends=st.booleans(),
    mode=st.sampled_from([DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL, DeliveryMode.PROGRESS]),
)
def test_media_parts_stand_between_their_texts_in_every_mode(
    segments: list[str], cuts: list[int], block_ends: bool, mode: DeliveryMode
) -> None:
    stage = stage_for(mode)
    for event in _events(segments, cuts, block_ends):
        stage.handle(event)
    stage.end(End(run=RUN))
    stage.book.finalizing = True
    for slot in stage.book.slots:
        stage.book.refresh(slot)
    shown = [s for s in stage.book.slots if s.role in (SlotRole.ANSWER, SlotRole.MEDIA) and s.desired.strip()]
    groups: list[list[str]] = [[]]
    media: list[str] = []
    for slot in shown:
        if slot.role is SlotRole.MEDIA:
            media.append(slot.desired)
            groups.append([])
        else:
            groups[-1].append(slot.desired)
    assert media == [f"image: https://example.com/{i}.png\nmedia {i}" for i in range(1, len(segments))]
    assert [_key("".join(group)) for group in groups] == [_key(segment) for segment in segments]
