"""The sidecar over real HTTP with the mock Bot API: good runs, bad input, auth, size limits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.integration.conftest import INGEST_TOKEN, Stack


def ndjson(*lines: dict[str, Any] | str) -> bytes:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


def start(run: str, chat_id: int = 7, **extra: Any) -> dict[str, Any]:
    return {"kind": "run.start", "run": run, "channel": "telegram", "target": {"chat_id": chat_id}, **extra}


async def test_a_run_is_delivered_and_its_report_says_so(stack: Stack) -> None:
    body = ndjson(
        start("r1"),
        {"kind": "text", "mode": "delta", "text": "Hello, "},
        {"kind": "text", "mode": "delta", "text": "world!"},
        {"kind": "end", "status": "ok"},
    )
    answer = await stack.client.post("/v1/runs/r1/events", content=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"accepted": 4}
    report = (await stack.client.get("/v1/runs/r1", params={"wait_s": 10})).json()
    assert report["status"] == "delivered" and report["done"]
    assert [t for _, t in stack.mock.visible(7)] == ["Hello, world!"]
    assert report["message_ids"] == [str(mid) for mid, _ in stack.mock.visible(7)]


async def test_a_missing_or_wrong_token_is_401_and_nothing_is_taken(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.sidecar.url) as anon:
        missing = await anon.post("/v1/runs/r2/events", content=ndjson(start("r2")))
        wrong = await anon.post(
            "/v1/runs/r2/events", content=ndjson(start("r2")), headers={"Authorization": "Bearer nope"}
        )
    assert missing.status_code == 401 and "missing Authorization" in missing.json()["error"]
    assert wrong.status_code == 401 and "wrong bearer token" in wrong.json()["error"]
    assert "nope" not in wrong.text
    assert stack.relay.controller("r2") is None


async def test_a_bad_line_fails_alone_and_the_run_goes_on(stack: Stack) -> None:
    body = ndjson(
        start("r3"),
        {"kind": "text", "mode": "delta", "text": "kept "},
        "{not json",
        {"kind": "teleport", "text": "?"},
        {"kind": "text", "mode": "sideways", "text": "?"},
        {"kind": "text", "mode": "delta", "text": "and kept"},
        {"kind": "end", "status": "ok"},
    )
    answer = await stack.client.post("/v1/runs/r3/events", content=body)
    assert answer.status_code == 400
    data = answer.json()
    assert data["accepted"] == 4
    errors = {r["line"]: r["error"] for r in data["rejected"]}
    assert "malformed JSON" in errors[3]
    assert "unknown event kind 'teleport'" in errors[4]
    assert "mode" in errors[5]
    report = (await stack.client.get("/v1/runs/r3", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    assert [t for _, t in stack.mock.visible(7)] == ["kept and kept"]


async def test_an_unknown_channel_is_named_in_the_error(stack: Stack) -> None:
    answer = await stack.client.post("/v1/runs/r4/events", content=ndjson({**start("r4"), "channel": "telegarm"}))
    assert answer.status_code == 400
    assert "unknown channel 'telegarm'" in answer.json()["error"]
    assert "telegram" in answer.json()["error"]


async def test_events_for_a_run_that_never_started_are_409(stack: Stack) -> None:
    answer = await stack.client.post("/v1/runs/ghost/events", content=ndjson({"kind": "text", "text": "x"}))
    assert answer.status_code == 409
    assert "send its run.start event first" in answer.json()["error"]


async def test_oversize_body_is_413(stack: Stack) -> None:
    big = ndjson(start("r5"), *({"kind": "text", "text": "x" * 4000} for _ in range(40)))
    answer = await stack.client.post("/v1/runs/r5/events", content=big)
    assert answer.status_code == 413
    assert "over" in answer.json()["error"]


async def test_an_unknown_run_report_is_404(stack: Stack) -> None:
    answer = await stack.client.get("/v1/runs/nobody")
    assert answer.status_code == 404


async def test_two_runs_in_parallel_do_not_mix(stack: Stack) -> None:
    body = ndjson(
        start("a", chat_id=1),
        start("b", chat_id=2),
        {"run": "a", "kind": "text", "text": "for one"},
        {"run": "b", "kind": "text", "text": "for two"},
        {"run": "a", "kind": "end"},
        {"run": "b", "kind": "end"},
    )
    answer = await stack.client.post("/v1/events", content=body)
    assert answer.status_code == 200, answer.text
    for run in ("a", "b"):
        assert (await stack.client.get(f"/v1/runs/{run}", params={"wait_s": 10})).json()["status"] == "delivered"
    assert [t for _, t in stack.mock.visible(1)] == ["for one"]
    assert [t for _, t in stack.mock.visible(2)] == ["for two"]


async def test_a_provider_stream_is_normalized(stack: Stack) -> None:
    raw: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "secret"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Visible"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ]
    body = ndjson(start("p1", format="anthropic"), *raw, {"kind": "end", "status": "ok"})
    answer = await stack.client.post("/v1/runs/p1/events", content=body)
    assert answer.status_code == 200, answer.text
    report = (await stack.client.get("/v1/runs/p1", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    assert [t for _, t in stack.mock.visible(7)] == ["Visible"]


async def test_raw_provider_lines_without_a_declared_format_are_refused(stack: Stack) -> None:
    body = ndjson(start("p2"), {"type": "message_start"})
    answer = await stack.client.post("/v1/runs/p2/events", content=body)
    assert answer.status_code == 400
    assert "declares 'format'" in answer.json()["error"]


async def test_a_declared_body_over_the_limit_is_413_before_it_is_read(stack: Stack) -> None:
    url = httpx.URL(stack.sidecar.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    head = (
        f"POST /v1/runs/r6/events HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Bearer {INGEST_TOKEN}\r\n"
        f"Content-Length: {10**9}\r\n\r\n"
    )
    writer.write(head.encode() + b'{"kind": "run.start"')  # the rest never comes: the answer must not wait for it
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"over 65536 bytes" in answer


@pytest.mark.parametrize("wait_s", ["nan", "NaN", "soon", "inf-ish"])
async def test_a_report_wait_that_is_not_a_number_is_400(stack: Stack, wait_s: str) -> None:
    answer = await stack.client.get("/v1/runs/nobody", params={"wait_s": wait_s})
    assert answer.status_code == 400
    assert "wait_s must be a number of seconds" in answer.json()["error"]


async def test_an_integer_past_pythons_digit_limit_is_named_without_pythons_advice(stack: Stack) -> None:
    line = '{"kind": "run.start", "channel": "telegram", "target": {"chat_id": ' + "9" * 5000 + "}}\n"
    answer = await stack.client.post("/v1/runs/r7/events", content=line.encode())
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "an integer of more than 4300 digits" in error and "set_int_max_str_digits" not in error


async def test_a_path_no_route_serves_says_where_the_routes_are(stack: Stack) -> None:
    """``GET /`` (someone looking at the sidecar for the first time) is told where the API and the probes are, not
    about run ids; a run path that no route can hold still names the run id rule."""
    root = await stack.client.get("/")
    assert root.status_code == 404
    assert root.json()["error"].startswith("no such route: GET /: the API is under /v1"), root.text
    assert "/healthz" in root.json()["error"] and "run ids" not in root.json()["error"]
    slash = await stack.client.get("/v1/runs/a/b")
    assert slash.status_code == 404 and "run ids hold no '/'" in slash.json()["error"], slash.text


@pytest.mark.parametrize("depth", [129, 255, 300, 999])
async def test_a_line_nested_past_the_depth_limit_is_refused_alone_and_the_run_goes_on(
    stack: Stack, depth: int
) -> None:
    """The fuzzer's depth bombs: a line nested deeper than the sidecar can encode again (orjson stops at 254 levels)
    was taken and later killed the run's worker. It is refused at ingest (422, saying how deep and what to do); the
    run's other lines, and another run, go on."""
    run, other = f"deep-{depth}", f"beside-{depth}"
    bomb = "[" * depth + "1" + "]" * depth
    deep_object = '{"a": ' * depth + "1" + "}" * depth
    body = ndjson(
        start(run, chat_id=40 + depth),
        {"kind": "text", "mode": "delta", "text": "before "},
        '{"kind": "tool_call", "id": "t", "state": "end", "name": "f", "args": {"a": ' + bomb + "}}",
        '{"kind": "tool_call", "id": "u", "state": "end", "name": "g", "args": ' + deep_object + "}",
        bomb,
        {"kind": "text", "mode": "delta", "text": "after"},
        {"kind": "end", "status": "ok"},
    )
    answer = await stack.client.post(f"/v1/runs/{run}/events", content=body)
    assert answer.status_code == 400, answer.text  # not the JSON the sidecar takes, as NaN: test_pipeline_http
    data = answer.json()
    assert data["accepted"] == 4
    assert [r["line"] for r in data["rejected"]] == [3, 4, 5]
    for rejected in data["rejected"]:
        assert "nested too deeply (more than 128 levels" in rejected["error"], rejected
        assert "flatten" in rejected["error"]
    beside = await stack.client.post(
        f"/v1/runs/{other}/events",
        content=ndjson(start(other, chat_id=41 + depth), {"kind": "text", "text": "fine"}, {"kind": "end"}),
    )
    assert beside.status_code == 200, beside.text
    report = (await stack.client.get(f"/v1/runs/{run}", params={"wait_s": 10})).json()
    assert report["status"] == "delivered", report
    assert [t for _, t in stack.mock.visible(40 + depth)] == ["before after"]
    assert (await stack.client.get(f"/v1/runs/{other}", params={"wait_s": 10})).json()["status"] == "delivered"


async def test_the_rejected_lines_are_listed_in_line_order_and_the_first_one_sets_the_answer(stack: Stack) -> None:
    """A line refused when decoded (not JSON) was listed before an earlier line refused when submitted (a bad
    event), and its error was the answer's: the list is in line order, the answer the first rejected line's."""
    body = ndjson(
        start("r8", chat_id=8),
        {"kind": "text", "mode": "sideways", "text": "x"},  # refused when submitted
        "{not json",  # refused when decoded
        {"kind": "teleport"},
        '{"kind": "text", "text": "a", "text": "b"}',  # a key twice
        {"kind": "end", "status": "ok"},
    )
    answer = await stack.client.post("/v1/runs/r8/events", content=body)
    data = answer.json()
    assert [r["line"] for r in data["rejected"]] == [2, 3, 4, 5], data
    assert answer.status_code == 400 and data["error"].startswith("line 2: bad 'text' event: mode"), data
    assert data["accepted"] == 2


async def test_plain_deltas_taken_alone_get_the_answers_of_any_line(stack: Stack) -> None:
    """A plain delta line (decoded once, carried as a TextDelta) that the batch's group cannot take is taken alone with
    the answer any line gets: a repeated seq dropped, a seq past the window refused (422), a run that has not started
    refused (409)."""
    ghost = await stack.client.post("/v1/runs/ghost2/events", content=ndjson({"kind": "text", "text": "x", "seq": 1}))
    assert ghost.status_code == 409 and "send its run.start event first" in ghost.json()["error"]
    body = ndjson(
        {**start("r9"), "seq": 0},
        {"kind": "text", "text": "Hello", "seq": 1},
        {"kind": "text", "text": "Hello", "seq": 1},  # a repeat
        {"kind": "text", "text": " far", "seq": 10**15},  # past the seq window
        {"kind": "text", "text": ", world", "seq": 2, "lane": "ui", "visibility": "answer", "source": None},
        {"kind": "end", "seq": 3},
    )
    answer = await stack.client.post("/v1/runs/r9/events", content=body)
    assert answer.status_code == 422, answer.text
    data = answer.json()
    assert (data["accepted"], data["dropped"]) == (4, 1)
    assert [r["line"] for r in data["rejected"]] == [4] and "seq_window" in data["rejected"][0]["error"]
    report = (await stack.client.get("/v1/runs/r9", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    assert [t for _, t in stack.mock.visible(7)] == ["Hello, world"]
