"""Hypothesis strategies over raw streams of every format (anthropic, openai-responses, openai-chat, ag-ui,
ai-sdk-ui, a2a, gemini): windows of the recordings and samples in tests/streams/ (valid), and the same with events
mutated (a field dropped, a value of another type, a line cut short, another format's event), a raw event before
its run's ``run.start``, a run.start that declares another format or none.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.samples import WRONG_VALUES
from tests.fuzz.strategies import JsonObj, Line, body, encode, json_values, run_start, texts

STREAMS = Path(__file__).resolve().parents[1] / "streams"
FORMATS = ("anthropic", "openai-responses", "openai-chat", "ag-ui", "ai-sdk-ui", "a2a", "gemini")
MAX_WINDOW = 60


def _load() -> dict[str, list[list[JsonObj]]]:
    recordings: dict[str, list[list[JsonObj]]] = {}
    for fmt in FORMATS:
        files = sorted((STREAMS / fmt).glob("*.jsonl"))
        recordings[fmt] = [[json.loads(line) for line in f.read_text().splitlines() if line.strip()] for f in files]
    return recordings


RECORDINGS = _load()


@dataclass(frozen=True)
class ProviderBody:
    """A body of raw provider lines and whether every line of it must be taken (a valid stream: 2xx)."""

    data: bytes
    valid: bool
    fmt: str


@st.composite
def window(draw: st.DrawFn, fmt: str) -> list[JsonObj]:
    """Consecutive events of one recording of ``fmt`` (now and then the whole recording)."""
    recording = draw(st.sampled_from(RECORDINGS[fmt]))
    if draw(st.integers(0, 19)) == 0:
        return copy.deepcopy(recording)
    start = draw(st.integers(0, len(recording) - 1))
    size = draw(st.integers(1, MAX_WINDOW))
    return copy.deepcopy(recording[start : start + size])


def _paths(value: Any, prefix: tuple[Any, ...] = (), limit: int = 200) -> list[tuple[Any, ...]]:
    """Paths (keys and list indexes) to the values inside ``value``, breadth first, at most ``limit``."""
    out: list[tuple[Any, ...]] = []
    queue: list[tuple[tuple[Any, ...], Any]] = [(prefix, value)]
    while queue and len(out) < limit:
        path, node = queue.pop(0)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            out.append((*path, key))
            queue.append(((*path, key), child))
    return out


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        obj = obj[key]
    return obj


@st.composite
def mutated(draw: st.DrawFn, event: JsonObj) -> Line:
    """``event`` with one thing changed: a field dropped or of another type, its ``type`` changed, cut short."""
    how = draw(st.sampled_from(["drop", "swap", "swap", "type", "cut", "other", "array"]))
    paths = _paths(event)
    if how in ("drop", "swap") and paths:
        path = draw(st.sampled_from(paths))
        parent = _parent(event, path)
        if how == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(st.sampled_from(WRONG_VALUES) | json_values)
    elif how == "type":
        event["type"] = draw(st.sampled_from(["", "message_start", "response.created", "error", None, 7]) | texts)
    elif how == "cut":
        line = encode(event)
        return line[: draw(st.integers(0, max(0, len(line) - 1)))]
    elif how == "other":
        fmt = draw(st.sampled_from(FORMATS))
        return encode(draw(st.sampled_from(draw(st.sampled_from(RECORDINGS[fmt])))))
    else:
        return encode([event])
    return encode(event, draw(st.booleans()))


@st.composite
def provider_bodies(draw: st.DrawFn) -> ProviderBody:
    """A provider run for ``/v1/runs/@run@/events``: its run.start declaring ``format``, a window of a recording,
    maybe an ``end``; valid, or with mutated lines, raw lines before the run.start, or the wrong format declared."""
    fmt = draw(st.sampled_from(FORMATS))
    raw = draw(window(fmt))
    start = draw(run_start(fmt))
    lines: list[Line] = [encode(event) for event in raw]
    flaw = draw(st.sampled_from(["none", "none", "mutate", "before", "format", "no-format"]))
    if flaw == "mutate":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(raw) - 1))
            lines[at] = draw(mutated(raw[at]))
    elif flaw == "format":
        start["format"] = draw(st.sampled_from([f for f in FORMATS if f != fmt]))
    elif flaw == "no-format":
        del start["format"]
    at = draw(st.integers(0, len(lines))) if flaw == "before" else 0
    lines.insert(at, encode(start))
    if draw(st.booleans()):
        lines.append(encode({"kind": "end", "status": "ok"}))
    valid = flaw == "none" or (flaw == "before" and at == 0)
    return ProviderBody(body(lines, crlf=draw(st.booleans())), valid, fmt)
