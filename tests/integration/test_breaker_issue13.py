"""Breaker findings on issue 13 (push-back and the chunker package), kept as strict xfails until fixed
(the escaped end and the client's refused line were fixed in 7e14602: plain regression tests now).

Each test states what the README promises and what the sidecar did instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamrelay.app.client import RelayClient, RelayError
from streamrelay.core.chunking import ChunkParams, chunk_text
from streamrelay.core.text.chunk_checks import chunk_property_failures
from tests.integration import test_push_back
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_push_back import START, Loaded, ndjson

END = {"kind": "end", "status": "ok"}
loaded = test_push_back.loaded  # the push-back tests' fixture, used here by name


async def test_a_resent_ended_run_is_dropped_not_pushed_back(loaded: Loaded) -> None:
    st = loaded
    body = ndjson({**START, "seq": 0}, {"kind": "text", "mode": "delta", "text": "Done.", "seq": 1}, {**END, "seq": 2})
    assert (await st.http.post("/v1/runs/r1/events", content=body)).status_code == 200
    await st.http.get("/v1/runs/r1", params={"wait_s": 10})
    st.lag.set(0.15)  # past overload_lag_ms: new runs are pushed back; r1 is not new
    again = await st.http.post("/v1/runs/r1/events", content=body)
    assert again.status_code == 200, again.text


async def test_an_end_written_with_an_escape_is_still_taken(loaded: Loaded) -> None:
    st = loaded
    first = ndjson(START, {"kind": "text", "mode": "delta", "text": "x"})
    assert (await st.http.post("/v1/runs/r1/events", content=first)).status_code == 200
    st.lag.set(5.0)  # every line but an end is pushed back
    answer = await st.http.post("/v1/runs/r1/events", content=b'{"kind": "\\u0065nd", "status": "ok"}\n')
    assert answer.status_code == 200, answer.text


async def test_the_client_reports_a_line_refused_beside_a_push_back(loaded: Loaded) -> None:
    st = loaded
    st.lag.set(0.15)  # new runs pushed back
    async with RelayClient(st.sidecar.url, INGEST_TOKEN, push_back_s=10) as relay:
        lines: list[dict[str, Any]] = [
            {"kind": "text", "mode": "delta", "text": "orphan"},
            {**START, "target": {"chat_id": 9}},
            END,
        ]
        sending = asyncio.create_task(relay.send("r2", lines))
        await asyncio.sleep(0.5)
        st.lag.set(0.0)
        with pytest.raises(RelayError):
            await asyncio.wait_for(sending, 10)


def _hostile_fences() -> tuple[str, ChunkParams]:
    """Text the breaker's fuzzing found: a combining mark right after a cut point inside a fence, among
    long fence openers and fence-like lines."""
    params = ChunkParams(min_chars=49, max_chars=100)
    x80 = "x" * 80
    text = (
        "* * *\n👨\u200d👩\u200d👧\u200d👦é| a | b |\n|---|---|\n```"
        + x80
        + "\n\r\n~~~```\n"
        + "x" * 50
        + "~~~```\n```\n```\n\r\n    code in item\n```\n```\n```~~~\n***\n   ```\n    ```\n```"
        + x80
        + "\ne\u0301      ```js\n\n\n# Heading\nword 🇫🇷🇩🇪\r\n# Heading\n```python\n"
    )
    return text, params


def test_a_combining_mark_stays_with_its_letter_across_a_fence_cut() -> None:
    text, params = _hostile_fences()
    chunks = chunk_text(text, params)
    assert chunk_property_failures(chunks, {"no_split_grapheme": True, "max_units": 100}, params, [text]) == []


def test_the_hostile_fences_join_back_to_the_input() -> None:
    """'* * *' is a thematic break, not nested list items, so a later '    ```' is indented code, not a fence
    inside an item (both readers read it as one, and cut there)."""
    text, params = _hostile_fences()
    chunks = chunk_text(text, params)
    assert chunk_property_failures(chunks, {"joined_equals_input": True}, params, [text]) == []
