"""The answers a chaos campaign streams: slices of real recorded provider streams, as normalized event lines.

Each recording (tests/streams/) is normalized once; its root answer deltas, in their recorded split, are the
material. A run streams a contiguous slice of one recording's deltas (a few deltas up to the whole 8.5k-character
Markdown answer with nine code fences), so every run has a known final answer: the slice's text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.config.paths import recordings
from streamrelay.core.events import TextEvent, Visibility
from streamrelay.core.normalize import make_normalizer

STREAMS = recordings()
RECORDINGS = (
    "anthropic/markdown-long-fences.jsonl",
    "openai-responses/web-search-annotations.jsonl",
    "openai-chat/long-text.jsonl",
    "anthropic/server-tool-citations.jsonl",
    "openai-chat/text.jsonl",
    "anthropic/thinking-then-text.jsonl",
)
"""Recordings whose root answers are used (their reasoning and tool calls are left out)."""

SIZES = (("short", 0.4, 40, 600), ("medium", 0.35, 600, 2600), ("long", 0.25, 2600, 9000))
"""``(name, share, least chars, most chars)`` of the answers a campaign streams."""


@dataclass(frozen=True)
class Recording:
    """One recording's root answer as its deltas (``name`` relative to tests/streams)."""

    name: str
    deltas: tuple[str, ...]

    @property
    def starts(self) -> list[int]:
        """Delta indices where a line of the answer starts (a slice begins there)."""
        out = [0]
        for i in range(1, len(self.deltas)):
            if self.deltas[i - 1].endswith("\n"):
                out.append(i)
        return out


@dataclass(frozen=True)
class Answer:
    """A run's answer: ``deltas[start:stop]`` of a recording, grouped into lines of one to a few deltas."""

    recording: str
    start: int
    stop: int
    size: str
    pieces: tuple[str, ...]
    """The text of each ``text`` line, in order (each one to a few recorded deltas)."""

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def breaks(self) -> list[int]:
        """Piece indices ``i`` where a media item may go between paragraphs: the text before piece ``i`` ends a
        line outside a code fence (``len(pieces)``: after all of the text)."""
        out: list[int] = []
        before = ""
        for i, piece in enumerate(self.pieces[:-1], start=1):
            before += piece
            if before.endswith("\n") and before.count("```") % 2 == 0 and before.strip():
                out.append(i)
        return [*out, len(self.pieces)]


MEDIA_KINDS = ("image", "file", "audio", "video")
MEDIA_EXTENSIONS = {"image": "png", "file": "pdf", "audio": "mp3", "video": "mp4"}


@dataclass(frozen=True)
class Media:
    """A media item of a run's answer (the ``media`` event, README "Media"): it follows the answer's first
    ``after`` pieces. Its caption names the run and the item, so the judge knows its message in the chat (a mock
    shows a media message as its caption: ``GET /_mock/state``)."""

    after: int
    kind: str
    url: str
    caption: str

    def line(self, run: str) -> dict[str, Any]:
        """The ``media`` event line (without ``seq``)."""
        return {"kind": "media", "run": run, "url": self.url, "media_kind": self.kind, "caption": self.caption}


def pick_media(rng: random.Random, run: str, answer: Answer, count: int) -> tuple[Media, ...]:
    """``count`` media items at distinct seeded paragraph breaks of ``answer`` (fewer when it has fewer)."""
    places = sorted(rng.sample(answer.breaks(), min(count, len(answer.breaks()))))
    out: list[Media] = []
    for k, after in enumerate(places, start=1):
        kind = rng.choice(MEDIA_KINDS)
        url = f"https://example.com/chaos/{run}-{k}.{MEDIA_EXTENSIONS[kind]}"
        out.append(Media(after, kind, url, f"Chaos media {k} ({kind}) of {run}"))
    return tuple(out)


def load_recordings(streams: Path = STREAMS) -> list[Recording]:
    """Normalize each recording of :data:`RECORDINGS` and keep its root answer deltas.

    Raises:
        ValueError: a recording is missing or is not valid JSON lines.
    """
    out: list[Recording] = []
    for name in RECORDINGS:
        path = streams / name
        if not path.is_file():
            raise ValueError(f"recording {path} is missing (the chaos campaign streams slices of tests/streams/)")
        normalizer = make_normalizer(detect_format(path), "chaos")
        events = [e for obj in recording_lines(path) for e in normalizer.feed(obj)] + normalizer.close()
        deltas = tuple(
            e.text
            for e in events
            if isinstance(e, TextEvent) and e.source is None and e.visibility is Visibility.ANSWER and e.text
        )
        if deltas:
            out.append(Recording(name, deltas))
    return out


def pick_answer(rng: random.Random, recordings: list[Recording]) -> Answer:
    """A seeded slice: its size class by :data:`SIZES`, a recording long enough for it, a start at a line."""
    size, _, least, most = rng.choices(SIZES, weights=[s[1] for s in SIZES])[0]
    fitting = [r for r in recordings if sum(map(len, r.deltas)) >= least] or recordings
    recording = rng.choice(fitting)
    goal = rng.randint(least, most)
    starts = recording.starts
    start = rng.choice([s for s in starts if sum(map(len, recording.deltas[s:])) >= least] or [0])
    stop, length = start, 0
    while stop < len(recording.deltas) and length < goal:
        length += len(recording.deltas[stop])
        stop += 1
    pieces: list[str] = []
    i = start
    while i < stop:
        take = min(stop - i, rng.choice((1, 1, 2, 3)))
        pieces.append("".join(recording.deltas[i : i + take]))
        i += take
    if not "".join(pieces).strip():
        pieces.append("(answer)")
    return Answer(recording.name, start, stop, size, tuple(pieces))


def run_lines(
    run: str,
    channel: str,
    chat_id: int | str,
    mode: str,
    answer: Answer,
    media: tuple[Media, ...] = (),
    places: tuple[tuple[str, int | str], ...] = (),
) -> list[dict[str, Any]]:
    """The run's normalized event lines, ``seq`` from 0: ``run.start`` (its delivery ``mode``; with ``places``, the
    ``(channel, chat_id)`` of more places, a fan-out ``targets`` list with its own first), one ``text`` delta per
    piece with each ``media`` line after the pieces it follows, ``block_end`` and ``end`` with status ok."""
    start: dict[str, Any] = {"kind": "run.start", "run": run, "channel": channel, "target": {"chat_id": chat_id}}
    if places:
        start["targets"] = [{"channel": c, "target": {"chat_id": chat}} for c, chat in ((channel, chat_id), *places)]
    lines: list[dict[str, Any]] = [{**start, "mode": mode}]
    for i, piece in enumerate(answer.pieces):
        lines += [m.line(run) for m in media if m.after == i]
        lines.append({"kind": "text", "run": run, "mode": "delta", "text": piece})
    lines += [m.line(run) for m in media if m.after >= len(answer.pieces)]
    lines += [{"kind": "block_end", "run": run}, {"kind": "end", "run": run, "status": "ok"}]
    return [{**line, "seq": seq} for seq, line in enumerate(lines)]


def text_of(lines: list[dict[str, Any]], upto: int) -> str:
    """The answer text carried by the first ``upto`` lines."""
    return "".join(str(line.get("text", "")) for line in lines[:upto] if line.get("kind") == "text")


def media_lines(lines: list[dict[str, Any]]) -> list[int]:
    """The indices of the ``media`` lines among ``lines``."""
    return [i for i, line in enumerate(lines) if line.get("kind") == "media"]
