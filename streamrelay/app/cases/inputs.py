"""What a scenario case sends: its channel's settings, and its events as timed NDJSON lines (tests/cases/README.md)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from streamrelay.app.ingest_client import KEEPALIVE_S, quiet
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.events import Target


def case_channel_settings(channel: dict[str, Any], api_base: str | None) -> ChannelSettings:
    """The ``ChannelSettings`` a scenario's ``channel`` describes (unset keys: the TOML defaults)."""
    known = {
        "delivery",
        "format",
        "limit",
        "throttle_ms",
        "send_timeout_ms",
        "chunk",
        "coalesce",
        "subagents",
        "reasoning",
        "exclusive_bot",
    }
    values = {k: v for k, v in channel.items() if k in known}
    return ChannelSettings.model_validate(
        {"platform": channel["platform"], "token_env": None, "api_base": api_base, **values}
    )


def case_events(case: dict[str, Any], run: str, target: Target, base_dir: Path) -> list[tuple[float, dict[str, Any]]]:
    """The NDJSON lines to post, each with the second (since the start) to post it at: ``run.start`` first, an
    ``end`` added when the case has none."""
    start: dict[str, Any] = {
        "kind": "run.start",
        "run": run,
        "channel": "case",
        "target": target.model_dump(exclude_none=True),
    }
    timed: list[tuple[float, dict[str, Any]]] = []
    stream = case.get("stream")
    if stream:
        start["format"] = stream["format"]
        gap_s = float(stream.get("gap_ms", 0)) / 1000
        lines = (base_dir / stream["file"]).read_text(encoding="utf-8").splitlines()
        timed = [(i * gap_s, json.loads(line)) for i, line in enumerate(line for line in lines if line.strip())]
    events = [dict(e) for e in case.get("events", [])]
    last_at = timed[-1][0] if timed else 0.0
    for event in events:
        at = float(event.pop("at_ms", 0)) / 1000
        last_at = max(last_at, at)
        timed.append((last_at, {"run": run, **event}))
    if not any(e.get("kind") == "end" and not e.get("source") for _, e in timed):
        timed.append((last_at, {"run": run, "kind": "end", "status": "ok"}))
    return [(0.0, start), *timed]


async def paced(
    lines: list[tuple[float, dict[str, Any]]], t0: float, keepalive_s: float = KEEPALIVE_S
) -> AsyncIterator[bytes]:
    """The lines as an NDJSON body, each sent at its time after ``t0`` (monotonic seconds); a pause longer than
    ``keepalive_s`` carries an empty line every ``keepalive_s`` (a keep-alive: the sidecar cuts a body silent for
    ``body_idle_timeout_s``)."""
    for at, obj in lines:
        async for keepalive in quiet(t0 + at - time.monotonic(), keepalive_s):
            yield keepalive
        yield (json.dumps(obj) + "\n").encode()
