"""A small client of the sidecar's HTTP ingest: replays a recorded provider stream as one paced NDJSON
request, then reads the delivery report. Used by ``streamrelay replay`` and ``streamrelay demo``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from streamrelay.core.events import ProviderFormat

WAIT_POLL_S = 0.25
"""How often :func:`wait_for_sidecar` asks a starting sidecar whether it is ready."""
KEEPALIVE_S = 30.0
"""Seconds of silence after which a long request's body gets an empty line (a keep-alive, docs/ingest.md): well
under the sidecar's ``[service.connections] body_idle_timeout_s`` (120 s by default), past which a silent body is
cut."""
STARTING_WAIT_S = 120.0
"""How long :func:`wait_for_sidecar` waits for a sidecar that answers it is starting (``/readyz`` 503: loading its
channels, resuming its journal), from its first such answer, whatever ``wait_s`` says."""


class SidecarUnreachableError(RuntimeError):
    """The sidecar at ``url`` did not answer, or not as ready, in time; the message says what to do."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(
            f"the sidecar at {url} is not reachable ({why}): start it (`streamrelay serve`, or the README's dry-run "
            "block), or point --url / STREAMRELAY_URL at the one that runs"
        )
        self.url = url


class SidecarNotReadyError(SidecarUnreachableError):
    """The sidecar at ``url`` answered, but kept saying it is starting."""

    def __init__(self, url: str, why: str) -> None:
        RuntimeError.__init__(self, f"the sidecar at {url} is still not ready {why}: see its log")
        self.url = url


async def quiet(delay_s: float, keepalive_s: float = KEEPALIVE_S) -> AsyncIterator[bytes]:
    """Wait ``delay_s`` seconds inside a request body, yielding an empty line (``b"\\n"``, a keep-alive the sidecar
    skips) every ``keepalive_s`` seconds of it, so a long pause (an agent's tool call) never leaves the body silent
    past the sidecar's ``body_idle_timeout_s``."""
    deadline = time.monotonic() + delay_s
    while (left_s := deadline - time.monotonic()) > 0:
        if left_s <= keepalive_s:
            await asyncio.sleep(left_s)
            return
        await asyncio.sleep(keepalive_s)
        yield b"\n"


async def wait_for_sidecar(url: str, wait_s: float, *, on_wait: Callable[[str], None] | None = None) -> None:
    """Return once the sidecar at ``url`` answers ``GET /readyz`` with 200 (or with anything but 503: not a
    starting sidecar, so the request that follows tells what it is). Asks every :data:`WAIT_POLL_S`: for up to
    ``wait_s`` seconds while nothing answers (twice at least when ``wait_s`` > 0), for up to :data:`STARTING_WAIT_S`
    once it answers that it is starting.
    ``on_wait`` gets one line to show when the waiting begins, and one when the sidecar says it is starting.

    Raises:
        SidecarUnreachableError: nothing answered in time (:class:`SidecarNotReadyError`: it kept starting).
        ValueError: ``url`` is not an http(s) URL.
    """
    say = on_wait or (lambda line: None)
    deadline = time.monotonic() + wait_s
    told: set[str] = set()
    async with httpx.AsyncClient(base_url=url, timeout=max(1.0, min(wait_s, 5.0))) as client:
        while True:
            starting, why = await _ready(client, url)
            if not why:
                return
            if starting and "starting" not in told:
                told.add("starting")
                deadline = max(deadline, time.monotonic() + STARTING_WAIT_S)
                say(f"the sidecar at {url} answers, not ready yet: {why}…")
            # a first look that failed is followed by a second one when waiting is asked for, whatever it took: on a
            # busy machine the first refused connect alone may outlast a short wait_s, which then was never waited
            if time.monotonic() + WAIT_POLL_S > deadline and (told or not wait_s):
                if starting:
                    raise SidecarNotReadyError(url, f"after {STARTING_WAIT_S:g} s: {why}")
                raise SidecarUnreachableError(url, f"{why}, waited {wait_s:g} s" if wait_s else why)
            if not told:
                told.add("waiting")
                say(f"waiting for the sidecar at {url}…")
            await asyncio.sleep(WAIT_POLL_S)


async def _ready(client: httpx.AsyncClient, url: str) -> tuple[bool, str]:
    """One look at ``/readyz``: (it answered that it is starting, why it is not ready); why is "" when ready."""
    try:
        answer = await client.get("/readyz")
    except (httpx.UnsupportedProtocol, httpx.InvalidURL):
        raise ValueError(f"--url {url!r} is not an http:// or https:// URL") from None
    except httpx.TransportError as exc:
        return False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if answer.status_code != 503:
        return False, ""
    try:
        body = answer.json()
        state = str(body.get("reason") or body.get("state") or "")
    except (ValueError, AttributeError):
        state = answer.text[:200]
    return True, state or "/readyz answers 503"


def detect_format(path: Path) -> ProviderFormat:
    """The stream format of a recording from its folder name (``streams/anthropic/x.jsonl``, ``streams/ag-ui/``).

    Raises:
        ValueError: no folder on the path names a format (the message lists them and says to pass --format).
    """
    for part in reversed(path.resolve().parts[:-1]):
        if part in {f.value for f in ProviderFormat}:
            return ProviderFormat(part)
    names = ", ".join(f.value for f in ProviderFormat)
    raise ValueError(f"cannot tell the stream format of {path} from its folders: pass --format ({names})")


SSE_DONE = "[DONE]"
"""The end-of-stream sentinel of OpenAI-style and AI SDK SSE streams (``data: [DONE]``): framing, not an event."""


def recording_lines(path: Path) -> list[dict[str, Any]]:
    """The recorded raw events, decoded: one JSON object per non-empty line, or per SSE event.

    A file may keep its SSE framing, as ``curl -N`` saves a stream, read as the SSE specification says
    (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation): an event's ``data:``
    lines (one space after the colon dropped) are joined with newlines, and a blank line ends the event; ``event:``,
    ``id:`` and ``retry:`` fields, comment lines (``:``) and the ``[DONE]`` sentinel are skipped. So a JSON object
    spread over several ``data:`` lines is one event. A file that puts one ``data:`` line per event without the blank
    lines between (as some tools save it) is still read line by line when the joined lines are not one JSON value but
    each line is. Lines without SSE framing are JSON Lines.

    Raises:
        ValueError: an event or line is not JSON (the message names the line).
    """
    out: list[dict[str, Any]] = []
    data: list[tuple[int, str]] = []

    def dispatch() -> None:
        if data:
            out.extend(_sse_event(path, data))
            data.clear()

    for number, raw_line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw_line.startswith("data:") or raw_line == "data":
            value = raw_line[len("data:") :]
            data.append((number, value[1:] if value.startswith(" ") else value))
            continue
        if not raw_line.strip():
            dispatch()
            continue
        if raw_line.startswith(":") or raw_line.split(":", 1)[0] in _SSE_FIELDS:
            continue  # a comment, or a field a replay has no use for
        dispatch()
        line = raw_line.strip()
        if line == SSE_DONE:
            continue
        out.append(_json_line(path, number, line))
    dispatch()
    return out


_SSE_FIELDS = frozenset({"event", "id", "retry"})


def _sse_event(path: Path, data: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """The JSON value of one SSE event's ``data`` lines (none for ``[DONE]`` or an empty event)."""
    text = "\n".join(value for _, value in data).strip()
    if not text or text == SSE_DONE:
        return []
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        if len(data) == 1:
            return [_json_line(path, data[0][0], text)]
    lines = [(n, v.strip()) for n, v in data if v.strip() and v.strip() != SSE_DONE]
    return [_json_line(path, n, v) for n, v in lines]  # one event a line, its blank separators left out


def _json_line(path: Path, number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{number}: not JSON: {exc}") from None


async def replay(
    url: str,
    token: str,
    *,
    run: str,
    channel: str,
    chat_id: int | str,
    fmt: ProviderFormat,
    thread_id: int | str | None = None,
    events: list[dict[str, Any]],
    pace_ms: float = 0.0,
    on_line: Callable[[int], None] | None = None,
    wait_s: float = 120.0,
) -> dict[str, Any]:
    """Post ``run.start`` (declaring ``fmt``), the raw events ``pace_ms`` apart, and ``end``; return the report.

    Every line carries ``seq`` (``run.start`` 0, the events 1, 2, …, ``end`` last), so replaying the same recording
    into the same run again (after a lost answer or a sidecar's crash) takes each line once.

    Raises:
        RuntimeError: the sidecar refused the request (the message carries its answer), or the connection to it was
            lost (:class:`SidecarUnreachableError`).
    """
    start = {
        "kind": "run.start",
        "run": run,
        "channel": channel,
        "target": {"chat_id": chat_id, **({"thread_id": thread_id} if thread_id is not None else {})},
        "format": fmt,
        "seq": 0,
    }

    async def body() -> AsyncIterator[bytes]:
        yield (json.dumps(start) + "\n").encode()
        t0 = time.monotonic()
        for i, event in enumerate(events):
            async for keepalive in quiet(t0 + i * pace_ms / 1000 - time.monotonic()):
                yield keepalive
            yield (json.dumps({**event, "seq": i + 1}) + "\n").encode()
            if on_line is not None:
                on_line(i + 1)
        yield (json.dumps({"kind": "end", "run": run, "status": "ok", "seq": len(events) + 1}) + "\n").encode()

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=wait_s + 30) as client:
            answer = await client.post(f"/v1/runs/{run}/events", content=body())
            _check(url, answer)
            report = await client.get(f"/v1/runs/{run}", params={"wait_s": wait_s})
            _check(url, report)
            result: dict[str, Any] = report.json()
            return result
    except httpx.TransportError as exc:
        raise SidecarUnreachableError(url, f"{type(exc).__name__} during the run") from None


def _check(url: str, answer: httpx.Response) -> None:
    """Raise what a person can act on when the sidecar did not answer 200."""
    if answer.status_code == 401:
        raise RuntimeError(
            f"the sidecar at {url} refused the token (401): export the value it was started with (its "
            "STREAMRELAY_TOKEN, or the variable its [service] token_env names)"
        )
    if answer.status_code != 200:
        raise RuntimeError(f"the sidecar at {url} answered {answer.status_code}: {answer.text[:500]}")
