"""A live run held in one long request through a pause longer than ``body_idle_timeout_s`` (an agent's tool call):
``RelayClient.stream`` and the case runner's paced body send empty lines while silent, the sidecar skips them as
keep-alives, and the run is taken whole (issue 24, item 1)."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamrelay.app.cases.inputs import paced
from streamrelay.app.client import RelayClient
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_connections import closed, sidecar_with

pytestmark = pytest.mark.timeout(60)


async def test_a_stream_kept_open_by_the_clients_empty_lines_outlives_the_body_idle_timeout() -> None:
    async with sidecar_with(body_idle_timeout_s=2) as sidecar:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as relay:
            start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 9}}
            async with relay.stream("thinking", keepalive_s=0.2) as stream:
                await stream.send([start, {"kind": "text", "text": "Let me look that up.", "seq": 1}])
                await asyncio.sleep(4.5)  # a tool call longer than body_idle_timeout_s
                await stream.send([{"kind": "text", "text": " Found it.", "seq": 2}, {"kind": "end", "seq": 3}])
            assert stream.accepted == 4
            report = await relay.report("thinking", wait_s=20)
        assert report.status == "delivered", report
        assert closed(sidecar, "body_idle_timeout") == 0


async def test_the_case_runners_paced_body_sends_empty_lines_through_a_long_pause() -> None:
    t0 = time.monotonic()
    lines = [(0.0, {"kind": "text", "text": "a"}), (0.5, {"kind": "text", "text": "b"})]
    pieces = [piece async for piece in paced(lines, t0, keepalive_s=0.2)]
    assert pieces[0].startswith(b"{") and pieces[-1].startswith(b"{")
    assert pieces[1:-1] == [b"\n", b"\n"]  # 0.5 s of silence: an empty line after 0.2 s and 0.4 s
