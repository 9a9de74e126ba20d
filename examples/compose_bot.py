"""The compose example's bot: streams a real recorded model stream into each sidecar, then prints what each delivered.

It stands for an agent runtime beside its sidecars (deploy/compose.yaml): it waits until every sidecar is ready
(``/readyz``), replays a recorded provider stream (``tests/streams/``) into each as one run through HTTP ingest
(the run's ``run.start`` declares the provider format; the sidecar normalizes the raw events), and prints each
delivery report in one line. The exit code is 0 when every run was delivered.

Environment:
    STREAMRELAY_TOKEN: the sidecars' bearer token.
    BOT_TARGETS: space-separated ``URL,CHANNEL,CHAT_ID`` (e.g. ``http://sidecar-a:8787,telegram,1001``).
    BOT_RECORDING: the recorded stream (default: the Anthropic Markdown answer with nine code fences).
    BOT_PACE_MS: milliseconds between recorded events (default 5).

Run it against a local sidecar::

    BOT_TARGETS=http://127.0.0.1:8787,telegram,1001 uv run python examples/compose_bot.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.ingest_client import detect_format, recording_lines, replay

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class BotTarget:
    """One sidecar and where its run goes."""

    url: str
    channel: str
    chat_id: int | str

    @classmethod
    def parse(cls, spec: str) -> BotTarget:
        """``URL,CHANNEL,CHAT_ID`` (a numeric chat id becomes an integer).

        Raises:
            ValueError: not three comma-separated parts.
        """
        parts = spec.split(",")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"BOT_TARGETS entry {spec!r} is not URL,CHANNEL,CHAT_ID")
        url, channel, chat = parts
        return cls(url.rstrip("/"), channel, int(chat) if chat.lstrip("-").isdigit() else chat)


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


async def main(targets: list[BotTarget], token: str, recording: Path, pace_ms: float = 5.0) -> list[dict[str, Any]]:
    """One run per target, all at once; the reports in ``targets`` order (each line printed as it comes).

    Raises:
        TimeoutError: a sidecar never became ready.
        RuntimeError: a sidecar refused the run.
    """
    fmt, events = detect_format(recording), recording_lines(recording)
    await asyncio.gather(*(wait_ready(target.url) for target in targets))

    async def one(target: BotTarget) -> dict[str, Any]:
        run = f"bot-{uuid.uuid4().hex[:8]}"
        report = await replay(
            target.url,
            token,
            run=run,
            channel=target.channel,
            chat_id=target.chat_id,
            fmt=fmt,
            events=events,
            pace_ms=pace_ms,
        )
        shown = len(report.get("message_ids", []))
        print(f"{target.url} {target.channel} {target.chat_id}: {report['status']} in {shown} messages ({run})")
        return report

    return list(await asyncio.gather(*(one(target) for target in targets)))


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
