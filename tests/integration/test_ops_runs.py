"""The operator's view of one process over real HTTP: ``GET /v1/runs`` lists the active runs with their delivery
state, the 429s they met and a link to their live page; ``streamrelay runs`` prints them (and fails in one clear
line when the token is missing or wrong, or the sidecar is down); ``/ops`` is served, with nothing from elsewhere."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from streamrelay.app.cli import app
from tests.integration.conftest import INGEST_TOKEN, Stack
from tests.ports import free_port as _closed_port

pytestmark = pytest.mark.timeout(60)


def _line(run: str, **event: Any) -> bytes:
    return (json.dumps({"run": run, **event}) + "\n").encode()


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _start(stack: Stack, run: str, chat_id: int, text: str) -> None:
    body = _line(run, kind="run.start", channel="telegram", target={"chat_id": chat_id})
    body += _line(run, kind="text", mode="delta", text=text)
    answer = await stack.client.post(f"/v1/runs/{run}/events", content=body)
    assert answer.status_code == 200, answer.text


async def _rows(stack: Stack, **params: str) -> list[dict[str, Any]]:
    answer = await stack.client.get("/v1/runs", params=params)
    assert answer.status_code == 200, answer.text
    assert answer.json()["unreachable"] == []
    rows: list[dict[str, Any]] = answer.json()["runs"]
    return rows


async def _cli(*args: str, token: str | None = INGEST_TOKEN) -> Result:
    """``streamrelay ARGS`` in a thread (it runs its own event loop), stdout and stderr apart."""
    env = {"STREAMRELAY_TOKEN": token, "COLUMNS": "200", "NO_COLOR": "1"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)


def _shown(stack: Stack, chat_id: int) -> Callable[[], Awaitable[Any]]:
    async def shown() -> Any:
        return stack.mock.visible(chat_id)

    return shown


async def test_an_active_run_is_listed_with_its_delivery_429s_and_live_page_until_it_ends(stack: Stack) -> None:
    stack.mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 1})
    await _start(stack, "ops-1", 7, "Hello")
    await _until(_shown(stack, 7), "the first message")
    await stack.client.post("/v1/runs/ops-1/events", content=_line("ops-1", kind="text", mode="delta", text=" world"))

    async def limited() -> list[dict[str, Any]]:
        return [row for row in await _rows(stack) if row["rate_limited"] == 1]

    (row,) = await _until(limited, "the 429 in the listing")
    assert row["run"] == "ops-1" and row["channel"] == "telegram" and row["platform"] == "telegram"
    assert row["mode"] == "preview" and row["status"] == "pending"
    assert (row["confirmed"], row["uncertain"], row["failed"]) == (0, 0, 0)  # its part waits to show " world"

    async def confirmed() -> list[dict[str, Any]]:
        return [row for row in await _rows(stack) if row["confirmed"] == 1 and row["rate_limited"] == 1]

    await _until(confirmed, "the edit after the 429's retry_after")
    assert abs(row["started_at"] - time.time()) < 10 and 0 <= row["age_s"] < 10
    assert row["watch"] == stack.sidecar.watch_path("ops-1") and "replica" not in row
    assert (await stack.client.get(row["watch"])).status_code == 200  # the live page, with its read token
    assert [r["run"] for r in await _rows(stack, all="1")] == ["ops-1"]  # one process: all replicas is this one

    await _start(stack, "ops-2", 8, "Second")
    assert [r["run"] for r in await _rows(stack)] == ["ops-1", "ops-2"]  # oldest first
    await stack.client.post("/v1/runs/ops-1/events", content=_line("ops-1", kind="end", status="ok"))
    assert (await stack.client.get("/v1/runs/ops-1", params={"wait_s": 10})).json()["status"] == "delivered"
    assert [r["run"] for r in await _rows(stack)] == ["ops-2"]


async def test_the_listing_needs_the_main_token_not_a_read_token(stack: Stack) -> None:
    await _start(stack, "ops-3", 9, "Hi")
    read_token = stack.sidecar.tokens.token("ops-3")
    async with httpx.AsyncClient(base_url=stack.sidecar.url) as anon:
        assert (await anon.get("/v1/runs")).status_code == 401
        refused = await anon.get("/v1/runs", headers={"Authorization": f"Bearer {read_token}"})
        assert refused.status_code == 401 and "ops-3" not in refused.text


async def test_streamrelay_runs_prints_the_active_runs(stack: Stack) -> None:
    await _start(stack, "ops-4", 10, "Hello")
    await _until(_shown(stack, 10), "the first message")
    done = await _cli("runs", "--url", stack.sidecar.url, "--json")
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)["runs"]
    assert row["run"] == "ops-4" and row["watch"] == stack.sidecar.watch_path("ops-4")

    table = await _cli("runs", "--url", stack.sidecar.url)
    assert table.exit_code == 0, table.output
    assert "1 active run" in table.stdout and "ops-4" in table.stdout and "preview" in table.stdout
    assert stack.sidecar.watch_url("ops-4") in table.stdout  # the live page as a link to open


async def test_streamrelay_runs_fails_in_one_clear_line(stack: Stack) -> None:
    cases = [
        (await _cli("runs", "--url", stack.sidecar.url, token=None), 2, "STREAMRELAY_TOKEN is not set"),
        (await _cli("runs", "--url", stack.sidecar.url, token="wrong"), 1, "refused the token in STREAMRELAY_TOKEN"),
        (await _cli("runs", "--url", f"http://127.0.0.1:{_closed_port()}"), 1, "cannot reach the sidecar at"),
    ]
    for done, code, message in cases:
        assert done.exit_code == code, done.output
        assert message in done.stderr and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.output


async def test_dead_letters_on_the_sqlite_backend_are_explained(tmp_path: Any) -> None:
    config = tmp_path / "channels.toml"
    config.write_text('[service]\nbackend = "sqlite"\n')
    listed = await _cli("runs", "--dead", "--config", str(config))
    assert listed.exit_code == 0 and "keeps no dead letters" in listed.stdout
    retried = await _cli("runs", "retry", "0", "1-0", "--config", str(config))
    assert retried.exit_code == 2 and "keeps no dead letters" in retried.stderr


async def test_the_ops_page_is_served_with_nothing_from_elsewhere(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.sidecar.url) as anon:
        page = await anon.get("/ops")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sorted(assets) == ["/static/ops.css", "/static/ops.js"]
        texts = [page.text]
        for asset in assets:
            got = await anon.get(asset)
            assert got.status_code == 200
            texts.append(got.text)
    for text in texts:
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), "an external URL"
        assert "@import" not in text and "url(" not in text
    script = texts[2]
    assert "sessionStorage" in script and "Authorization: `Bearer ${token}`" in script
    assert "/v1/runs?all=1" in script and "token=" not in script  # the main token never goes into a URL


async def test_a_runs_delivery_timeline_orders_events_taken_and_calls_with_their_outcome(stack: Stack) -> None:
    stack.mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 1})
    await _start(stack, "tl-1", 11, "Hello")
    await _until(_shown(stack, 11), "the first message")
    await stack.client.post("/v1/runs/tl-1/events", content=_line("tl-1", kind="text", mode="delta", text=" world"))
    await stack.client.post("/v1/runs/tl-1/events", content=_line("tl-1", kind="end", status="ok"))
    assert (await stack.client.get("/v1/runs/tl-1", params={"wait_s": 10})).json()["status"] == "delivered"

    answer = await stack.client.get("/v1/runs/tl-1/timeline")  # kept after the run ended
    assert answer.status_code == 200, answer.text
    timeline = answer.json()
    assert timeline["run"] == "tl-1" and timeline["left_out"] == 0
    entries = timeline["entries"]
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    assert entries[0]["type"] == "opened" and entries[-1] == {**entries[-1], "type": "ended", "status": "delivered"}
    taken = [(e["kind"], e["count"]) for e in entries if e["type"] == "taken"]
    assert taken[0] == ("text", 1) and ("end", 1) in taken  # the start opens the run: its first delta is taken
    calls = [e for e in entries if e["type"] == "call" and e["part"] is not None]
    first = calls[0]
    assert (first["op"], first["method"], first["outcome"], first["label"]) == ("send", "send", "done", "ack")
    assert first["place"] == "tl-1" and first["role"] == "answer" and first["done_at"] >= first["at"]
    (limited,) = [e for e in calls if e["outcome"] == "not_done"]
    assert limited["method"] == "edit" and limited["retry_after_s"] == 1.0 and limited["error"] == "RateLimitedError"
    after = [e for e in calls if e["at"] > limited["at"] and e["method"] == "edit"]
    assert after and after[-1]["outcome"] == "done" and after[0]["at"] >= limited["done_at"] + 0.9  # its retry_after
    assert "Hello" not in answer.text and "world" not in answer.text  # no text in a timeline

    assert (await stack.client.get("/v1/runs/nope/timeline")).status_code == 404
    async with httpx.AsyncClient(base_url=stack.sidecar.url) as anon:
        assert (await anon.get("/v1/runs/tl-1/timeline")).status_code == 401
    assert (await stack.client.delete("/v1/runs/tl-1")).status_code == 200  # erased: its timeline goes too
    assert (await stack.client.get("/v1/runs/tl-1/timeline")).status_code == 404
