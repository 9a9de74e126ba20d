"""The compose example's bot: streams a real recorded model stream into each sidecar, then prints what each delivered.

It stands for an agent runtime beside its sidecars (deploy/compose.yaml): it waits until every sidecar is ready
(``/readyz``), replays a recorded provider stream (``tests/streams/``) into each as one run through HTTP ingest
(the run's ``run.start`` declares the provider format; the sidecar normalizes the raw events), reads each run's
delivery report (through another replica when the target names one: replicas on Redis answer any run's report,
the replica that does not own the run forwards the request to the one that does), and prints it in one line. The
exit code is 0 when every run was delivered.

Environment:
    STREAMRELAY_TOKEN: the sidecars' bearer token.
    BOT_TARGETS: whitespace-separated ``URL,CHANNEL,CHAT_ID[,READ_URL]``: the run goes into URL, its report is read
        through READ_URL (default URL), e.g. ``http://sidecar-a:8787,telegram,1001,http://sidecar-b:8787``.
    BOT_RECORDING: the recorded stream (default: the Anthropic Markdown answer with nine code fences).
    BOT_PACE_MS: milliseconds between recorded events (default 5).

Run it against a local sidecar::

    BOT_TARGETS=http://127.0.0.1:8787,telegram,1001 uv run python examples/compose_bot.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.core.events import ProviderFormat

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
READY_TIMEOUT_S = 120.0
REPORT_WAIT_S = 120.0
PUSH_BACK_S = 60.0
"""How long a run's lines may be pushed back (503, the sidecar past its capacity) before the bot gives up."""


@dataclass(frozen=True)
class BotTarget:
    """One run: the sidecar it goes into, where it is delivered, and the sidecar its report is read through."""

    url: str
    channel: str
    chat_id: int | str
    read_url: str

    @classmethod
    def parse(cls, spec: str) -> BotTarget:
        """``URL,CHANNEL,CHAT_ID[,READ_URL]`` (a numeric chat id becomes an integer; READ_URL defaults to URL).

        Raises:
            ValueError: not three or four non-empty comma-separated parts.
        """
        parts = spec.split(",")
        if len(parts) not in (3, 4) or not all(parts):
            raise ValueError(f"BOT_TARGETS entry {spec!r} is not URL,CHANNEL,CHAT_ID[,READ_URL]")
        url, channel, chat, *read = parts
        chat_id = int(chat) if chat.lstrip("-").isdigit() else chat
        return cls(url.rstrip("/"), channel, chat_id, (read[0] if read else url).rstrip("/"))


async def wait_ready(url: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll ``url``/readyz until it answers 200.

    Raises:
        TimeoutError: not ready within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    raise TimeoutError(f"{url} was not ready within {timeout_s:g} s")


async def post_run(
    http: httpx.AsyncClient,
    target: BotTarget,
    run: str,
    fmt: ProviderFormat,
    events: list[dict[str, Any]],
    pace_ms: float,
) -> None:
    """Post the run into ``target.url`` as one NDJSON request: ``run.start`` (declaring ``fmt``), the raw events
    ``pace_ms`` apart (as a model streams them), then ``end``. A sidecar past its capacity pushes back (503 with
    ``Retry-After`` and ``pushed_back_from``, the first line it did not take): those lines are sent again after
    ``Retry-After`` seconds, for up to ``PUSH_BACK_S`` in all.

    Raises:
        RuntimeError: the sidecar refused the lines, or still pushed back after ``PUSH_BACK_S`` (the message
            carries its answer).
    """
    start = {"kind": "run.start", "run": run, "channel": target.channel, "target": {"chat_id": target.chat_id}}
    lines = [{**start, "format": fmt}, *events, {"kind": "end", "run": run, "status": "ok"}]

    async def body(paced: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        t0 = time.monotonic()
        for i, line in enumerate(paced):
            delay = t0 + (i - 1) * pace_ms / 1000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield (json.dumps(line) + "\n").encode()

    deadline = time.monotonic() + PUSH_BACK_S
    while True:
        answer = await http.post(
            f"{target.url}/v1/runs/{run}/events", content=body(lines), headers={"Content-Type": "application/x-ndjson"}
        )
        if answer.status_code == 200:
            return
        first = None
        if answer.status_code == 503 and answer.headers.get("Content-Type", "").startswith("application/json"):
            first = answer.json().get("pushed_back_from")
        if not isinstance(first, int) or not 1 <= first <= len(lines) or time.monotonic() > deadline:
            raise RuntimeError(f"{target.url} answered {answer.status_code}: {answer.text}")
        lines = lines[first - 1 :]
        await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))


async def read_report(http: httpx.AsyncClient, url: str, run: str, wait_s: float = REPORT_WAIT_S) -> dict[str, Any]:
    """The run's report through the sidecar at ``url``, once the run ended (within ``wait_s``); a 503 (the run's
    partition is changing owner between replicas) is asked again after its ``Retry-After``.

    Raises:
        RuntimeError: the sidecar refused, or still answered 503 after ``wait_s``.
    """
    deadline = time.monotonic() + wait_s
    while True:
        left = max(1.0, deadline - time.monotonic())
        answer = await http.get(f"{url}/v1/runs/{run}", params={"wait_s": left}, timeout=left + 30)
        if answer.status_code == 503 and time.monotonic() < deadline:
            await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
            continue
        if answer.status_code != 200:
            raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text}")
        report: dict[str, Any] = answer.json()
        return report


async def main(targets: list[BotTarget], token: str, recording: Path, pace_ms: float = 5.0) -> list[dict[str, Any]]:
    """One run per target, all at once; the reports in ``targets`` order (each line printed as it comes).

    Raises:
        TimeoutError: a sidecar never became ready.
        RuntimeError: a sidecar refused the run or its report.
    """
    fmt, events = detect_format(recording), recording_lines(recording)
    urls = {target.url for target in targets} | {target.read_url for target in targets}
    await asyncio.gather(*(wait_ready(url) for url in sorted(urls)))

    async def one(http: httpx.AsyncClient, target: BotTarget) -> dict[str, Any]:
        run = f"bot-{uuid.uuid4().hex[:8]}"
        await post_run(http, target, run, fmt, events, pace_ms)
        report = await read_report(http, target.read_url, run)
        shown = len(report.get("message_ids", []))
        through = f", report read through {target.read_url}" if target.read_url != target.url else ""
        print(
            f"{target.url} {target.channel} {target.chat_id}: {report['status']} in {shown} messages ({run}{through})"
        )
        return report

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0)) as http:
        return list(await asyncio.gather(*(one(http, target) for target in targets)))


if __name__ == "__main__":
    specs = os.environ.get("BOT_TARGETS", "http://127.0.0.1:8787,telegram,1001").split()
    reports = asyncio.run(
        main(
            [BotTarget.parse(spec) for spec in specs],
            os.environ["STREAMRELAY_TOKEN"],
            Path(os.environ.get("BOT_RECORDING", str(DEFAULT_RECORDING))),
            float(os.environ.get("BOT_PACE_MS", "5")),
        )
    )
    sys.exit(0 if all(report["status"] == "delivered" for report in reports) else 1)
