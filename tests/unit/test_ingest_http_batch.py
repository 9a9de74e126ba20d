"""HTTP ingest's batch fast path, end to end in process: a body of NDJSON lines posted in one request (decoded as a
batch by :func:`adapters.ingest_http.lines.decode_deltas`, taken as a group by ``Admission.take_deltas``, ordered by
``SeqGate.push_all``, joined by ``join_deltas`` and appended by the run stage's plain line) must give what each line
posted alone gives: the same chat, the same report, and per line the same answer (accepted, dropped, refused with the
same error). The lines are an attacker's and a careless bot's: keys written twice, ``:`` and escapes in the text,
surrogate pairs, seqs repeated / out of order / negative / floats / booleans / past 64 bits, replayed snapshots, other
kinds and other runs mixed in, blank and malformed lines."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamrelay.adapters.ingest_http.app import create_app
from streamrelay.adapters.ingest_http.lines import decode_delta
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import DEFAULT_CLIENT, ClientLimits
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

AUTH = {"Authorization": "Bearer batch-token"}
START = b'{"kind": "run.start", "channel": "c", "target": {"chat_id": 5}, "seq": 0}'

LINES = [
    b'{"kind":"text","text":"a","text":"b"}',
    b'{"kind":"text","text":"a","lane":"ui","lane":"ui"}',
    b'{"kind":"text","text":"a:b"}',
    b'{"kind":"text","text":"\\u003a"}',
    b'{"\\u006bind":"text","text":"k"}',
    b'{"kind":"text","text":"\\"q\\""}',
    b'{"kind":"text","text":"\\ud83d\\ude00 x"}',
    b'{"kind":"text","text":"\\ud83d"}',
    b'{"kind":"text","text":"\\ude00"}',
    b'{"kind":"text","text":""}',
    b'{"kind":"text","text":"Hello world, this is"}',
    b'{"kind":"text","text":"Hello world, this is a long answer"}',
    '{"kind":"text","text":"Привет, café 中"}'.encode(),
    b'{"kind":"status","text":"thinking"}',
    b'{"kind":"text","text":"x","message":1}',
    b'{"kind":"text","text":"x","seq":true}',
    b'{"kind":"text","text":"x","seq":1.5}',
    b'{"kind":"text","text":"x","seq":-1}',
    b'{"kind":"text","text":"x","seq":99999999999999999999}',
    b'{"kind":"text","text":"x","mode":"snapshot"}',
    b'{"kind":"text","text":"' + b"y" * 3000 + b'"}',
    b'{"kind":"text","text":"a","run":"other"}',
    b'{"kind":"text","text":"a","run":"r"}',
    b"",
    b"not json",
    b'{"kind":"text","text":"a"} ',
]

PLAIN = [line for line in LINES if decode_delta(line, "r") is not None]
"""The lines of :data:`LINES` that are plain deltas (each alone a TextDelta: the batch decoder takes a body of them)."""


@st.composite
def bodies(draw: st.DrawFn) -> list[bytes]:
    """A request's lines, each drawn from :data:`LINES`; a text line without a ``seq`` gets one now and then, mostly
    the next, sometimes a repeat, a gap, a step back or a jump past the window."""
    lines: list[bytes] = []
    seq = 0
    pool = draw(st.sampled_from([LINES, PLAIN]))  # half the bodies plain deltas alone: the batch's fast path
    for _ in range(draw(st.integers(1, 10))):
        line = draw(st.sampled_from(pool))
        if line.startswith(b'{"kind":"text"') and line.endswith(b"}") and b'"seq"' not in line and draw(st.booleans()):
            seq = max(0, seq + draw(st.sampled_from([1, 1, 1, 1, 0, 2, -1, 50])))
            line = line[:-1] + b',"seq":%d}' % seq
        lines.append(line)
    return lines


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """Each refused line is logged: hundreds per run of the property test."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


async def _posted(bodies: list[bytes], limits: ClientLimits) -> tuple[list[str], Any, list[dict[str, Any]]]:
    """The chat's messages, the run's report and each request's answer (its JSON) after posting ``bodies``, one request
    each, to the run ``r`` (started first, ended last) of a relay in process behind the real ingest app."""
    chat = MemoryChat()
    relay = Relay(
        {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)},
        MemoryLedger(),
        MonotonicClock(),
        clients={DEFAULT_CLIENT: limits},
    )
    app = create_app(relay, clients=[(limits, "batch-token")])
    answers: list[dict[str, Any]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as client:
        assert (await client.post("/v1/runs/r/events", content=START, headers=AUTH)).status_code == 200
        for body in bodies:
            answer = await client.post("/v1/runs/r/events", content=body, headers=AUTH)  # (whole: one piece)
            answers.append(answer.json())
            await asyncio.sleep(0)
        await client.post("/v1/runs/r/events", content=b'{"kind":"end"}', headers=AUTH)
    report = await relay.wait_done("r", 10)
    await relay.close()
    return list(chat.messages.values()), report.model_dump(mode="json") if report else None, answers


def _numbered(text: str, seq: int) -> bytes:
    return b'{"kind":"text","text":"%s","seq":%d}' % (text.encode(), seq)


ROOMY = ClientLimits(max_events_per_run=30, max_chars_per_run=5000, seq_window=100)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bodies(),
    st.integers(0, 10),
    st.builds(
        ClientLimits,
        max_events_per_run=st.integers(3, 30),
        max_chars_per_run=st.integers(10, 5000),
        seq_window=st.integers(1, 100),
    ),
)
@example(  # a replayed snapshot in the second batch: the guard must read it (the stage's plain line must not take it)
    [_numbered("Hello world, this is", 1), _numbered("Hello world, this is a long answer", 2), _numbered("x", 3)],
    1,
    ROOMY,
)
@example([_numbered("a", 1), _numbered("c", 3), _numbered("b", 2), _numbered("c", 3)], 2, ROOMY)  # 3 resent
def test_a_body_posted_at_once_is_taken_as_its_lines_posted_one_a_request(
    lines: list[bytes], cut: int, limits: ClientLimits
) -> None:
    """Whole (the batch's fast path when every line is a plain delta, the line-by-line path otherwise) against each
    line alone (the one-line path): the same chat and report, and the lines accepted, dropped and refused (each with
    its line number and error) sum to the same answer. The body is posted in two requests, cut at ``cut`` (a gap the
    first leaves, a repeat of its seqs in the second)."""
    cut = min(cut, len(lines))
    numbered = [(first, part) for first, part in ((0, lines[:cut]), (cut, lines[cut:])) if part]
    chat, report, parts = asyncio.run(
        _posted([b"".join(line + b"\n" for line in part) for _, part in numbered], limits)
    )
    answer: dict[str, Any] = {"rejected": [], "accepted": 0, "dropped": 0}
    for (number, _), part in zip(numbered, parts, strict=True):
        answer["rejected"] += [{**line, "line": line["line"] + number} for line in part.get("rejected", [])]
        answer["accepted"] += part.get("accepted", 0)
        answer["dropped"] += part.get("dropped", 0)
    chat_alone, report_alone, answers = asyncio.run(_posted(lines, limits))
    assert chat == chat_alone
    assert report == report_alone
    refused = [(line["line"], line["error"]) for line in answer.get("rejected", [])]
    refused_alone = [(i, line["error"]) for i, one in enumerate(answers, 1) for line in one.get("rejected", [])]
    assert refused == refused_alone
    assert answer.get("accepted", 0) == sum(one.get("accepted", 0) for one in answers)
    assert answer.get("dropped", 0) == sum(one.get("dropped", 0) for one in answers)
