"""A long answer in a Matrix preview (matrix-nio over HTTP to the mock homeserver): 30,000+ characters of Latin
Markdown and of CJK Markdown, streamed in small deltas. Matrix has two numbers: the chunk length (``limit``, 5,000
UTF-16 units of source) and the rendered limit (63,488 bytes of the edit's JSON). Every event stays within the
65,536 bytes the homeserver takes (the mock answers 413 past it), each live message keeps growing until the chunker
rolls over (no stall on the longest start that fits, no message created whole), and the answer is shown once, whole.
https://spec.matrix.org/latest/client-server-api/#size-limits
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.adapters.matrix.render import render
from streamrelay.app.cases.inputs import paced
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.chunk_checks import content_key, fences_balanced
from streamrelay.core.units import LengthUnit, text_units
from streamrelay.mocks.matrix import MAX_EVENT_BYTES, MockMatrix
from streamrelay.mocks.matrix.wire import pdu_bytes
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(240)

DELTA_CHARS = 60
GAP_S = 0.02
"""60 characters every 20 ms: 3,000 a second, so each 4,500-unit message gets a few dozen edits at 100 ms."""


def latin_markdown(n_chars: int) -> str:
    """Sections of Latin Markdown (headings, paragraphs with emphasis and code, lists, a fenced block), at least
    ``n_chars`` characters."""
    out: list[str] = []
    i = 0
    while sum(len(p) + 2 for p in out) < n_chars:
        i += 1
        out.append(f'## Section {i}: the "quoted" <part> & more')
        out.append(
            f"Paragraph {i} explains **how the relay cuts** long answers and why `limit` counts UTF-16 units of "
            "the source while the homeserver counts bytes of the event: the quick brown fox jumps over the lazy dog."
        )
        out.append("\n".join(f"- item {i}.{k}: *emphasis* and [a link](https://example.org/{i}/{k})" for k in range(4)))
        if i % 3 == 0:
            out.append(f"```python\ndef section_{i}(x):\n    return x * {i}  # < & >\n```")
    return "\n\n".join(out)


def cjk_markdown(n_chars: int) -> str:
    """Paragraphs and lists of CJK text (3 bytes a character in UTF-8), at least ``n_chars`` characters."""
    base = (
        "中文文本的流式传输测试\uff1a每个字符在编辑事件中出现多次\uff0c因此字节数远大于字符数\u3002"  # full-width : , .
    )
    out: list[str] = []
    i = 0
    while sum(len(p) + 2 for p in out) < n_chars:
        i += 1
        out.append(f"第{i}段。" + base * 6)
        out.append("\n".join(f"- **要点{i}.{k}** {base}" for k in range(3)))
    return "\n\n".join(out)


def event_lines(text: str, target: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    start = {"kind": "run.start", "run": "long", "channel": "c", "target": target}
    deltas = [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)]
    lines = [(k * GAP_S, {"kind": "text", "mode": "delta", "text": d}) for k, d in enumerate(deltas)]
    return [(0.0, start), *lines, (len(deltas) * GAP_S, {"kind": "end", "status": "ok"})]


@pytest.mark.parametrize("script", ["latin", "cjk"])
async def test_a_long_matrix_preview_keeps_growing_within_the_event_limit_and_shows_the_answer_once(
    script: str,
) -> None:
    text = latin_markdown(30_000) if script == "latin" else cjk_markdown(30_000)
    assert len(text) >= 30_000
    dry = DRY_RUN["matrix"]
    mock = MockMatrix(rate_limits=False)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {
            "platform": "matrix",
            "api_base": api,
            "delivery": "preview",
            "format": "markdown",
            "throttle_ms": 100,
            "rate": {"rc_message": {"per_s": 50.0, "burst": 10}},  # a bot its homeserver exempted
        }
    )
    policy = settings.policy("c")
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    target = dry.target()
    try:
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=200) as client:
            lines = event_lines(text, target.model_dump(exclude_none=True))
            answer = await client.post("/v1/runs/long/events", content=paced(lines, time.monotonic()))
            assert answer.status_code == 200, answer.text
            report = (await client.get("/v1/runs/long", params={"wait_s": 180})).json()
        shown = [t for _, t in mock.visible(target.chat_id)]
        calls = list(mock.calls)
        room = mock.rooms.rooms[str(target.chat_id)]
        sizes = [pdu_bytes(room.room_id, e.sender, e.type, e.content, e.ts_ms) for e in room.events]
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()

    assert report["status"] == "delivered", report
    # whole, once: the messages joined are the answer
    assert content_key("\n".join(shown)) == content_key(text)
    assert all(fences_balanced(t) for t in shown)
    # every event within the homeserver's 65,536 bytes, every edit's content within the rendered limit
    assert [c.status for c in calls if c.status != 200] == []
    assert sizes and max(sizes) <= MAX_EVENT_BYTES
    assert max(render(t, TextFormat.MARKDOWN).units for t in shown) <= policy.rendered_max
    # the live message keeps growing: per message, each call shows more than the one before (no edit repeats the
    # text, none shows less), and the message was first sent small: no part created whole after a stall
    texts: dict[str, list[str]] = {}
    for call in calls:
        if call.method == "send" and call.text is not None:
            texts.setdefault(str(call.message_id), []).append(call.text)
    assert len(texts) == len(shown) >= 30_000 // policy.max_units
    budget = policy.split_params().max_chars
    for n, (mid, seen) in enumerate(texts.items()):
        lengths = [text_units(t, LengthUnit.UTF16) for t in seen]
        previews = lengths[:-1]  # the last edit is the message's final text (a frozen one: its chunk)
        assert all(b > a for a, b in itertools.pairwise(previews)), (mid, lengths)
        assert all(b != a for a, b in itertools.pairwise(seen)), mid
        assert max(lengths) <= policy.max_units, (mid, lengths)
        if n < len(texts) - 1:  # a frozen message: grown edit by edit to about the chunk length, then cut there
            assert len(seen) >= 4 and lengths[0] <= lengths[-1] // 2, (mid, lengths)
            assert previews[-1] >= budget * 3 // 4 and lengths[-1] >= budget // 2, (mid, lengths, budget)
        print(script, n, "calls", len(seen), "first", lengths[0], "last preview", previews[-1], "final", lengths[-1])
