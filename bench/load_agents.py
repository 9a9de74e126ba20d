"""The agents of bench/bench_load.py: each streams one run as one chunked NDJSON request over a raw connection (an
httpx client per event would cost the load generator more than the sidecar), writes what is due as one chunk when it
is behind, and sends the rest again from ``pushed_back_from`` after ``Retry-After`` when the sidecar pushes back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

TOKEN = "load-bench-ingest-token-0123456789"


def nonspace(text: str) -> str:
    """``text`` without its whitespace (chats are compared whitespace-insensitively)."""
    return "".join(text.split())


@dataclass
class Agent:
    """One run's lines, when each was due, and what became of its requests."""

    run: str
    chat: int
    lines: list[bytes]
    due: list[float]
    shown_after: list[int]
    """Non-space characters of the answer once line i is shown."""
    sent: list[float] = field(default_factory=list)
    """When line i was written to the sidecar (monotonic seconds; the last write of a line sent again after a
    push-back): the sidecar's latency is measured from here, not from ``due`` (an agent process that falls behind
    its schedule must not count as the sidecar's delay)."""
    requests: int = 0
    pushed_back: int = 0
    failures: list[str] = field(default_factory=list)


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], dict[str, Any]]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, json.loads(body or b"{}")


async def _request(agent: Agent, port: int, first: int) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Stream ``agent``'s lines from ``first`` on as one chunked request, each at its due time (or at once when
    late); stop writing as soon as the answer arrives (a push-back)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /v1/runs/{agent.run}/events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    answer = asyncio.ensure_future(_read_answer(reader))
    try:
        i = first
        while i < len(agent.lines):
            delay = agent.due[i] - time.monotonic()
            if delay > 0:
                await asyncio.wait([answer], timeout=delay)
            if answer.done() or writer.is_closing():
                break
            now, due = time.monotonic(), i + 1
            while due < len(agent.lines) and agent.due[due] <= now:  # behind: what is due goes in one chunk
                due += 1
            piece = b"".join(line + b"\n" for line in agent.lines[i:due])
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            agent.sent[i:due] = [now] * (due - i)
            i = due
        if not answer.done() and not writer.is_closing():
            writer.write(b"0\r\n\r\n")
        return await answer
    finally:
        answer.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def agent_run(agent: Agent, port: int) -> None:
    """Stream ``agent``'s lines until they are all taken (sent again from where a push-back cut them)."""
    first = 0
    while first < len(agent.lines):
        agent.requests += 1
        try:
            status, headers, body = await _request(agent, port, first)
        except (OSError, asyncio.IncompleteReadError) as exc:
            agent.failures.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(1.0)
            continue
        if status == 200:
            return
        if status in (429, 503) and isinstance(body.get("pushed_back_from"), int):
            agent.pushed_back += 1
            first += body["pushed_back_from"] - 1
            await asyncio.sleep(float(headers.get("retry-after", "1")))
            continue
        agent.failures.append(f"{status}: {str(body.get('error'))[:200]}")
        return


def make_agents(runs: int, events: list[dict[str, Any]], chat0: int, lead_s: float = 0.5) -> list[Agent]:
    """``runs`` agents, each into chat ``chat0 + i``, starting within a second of ``lead_s`` seconds after they are
    built, a delta 20-50 ms apart.

    Due times are set once every agent is built: building 1,000 agents takes seconds, and due times taken before it
    were already past when the agents began, so their first lines went out late and in one burst (the sidecar was
    blamed for the benchmark's own delay: it was most of the p99 this benchmark once printed). The non-space count
    after each line is summed per delta (whitespace removal is additive), not recounted over the whole text."""
    rng = random.Random(13)
    counts = [len(nonspace(event["text"])) for event in events]
    agents = []
    for i in range(runs):
        run = f"load-{chat0 + i}"
        start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat0 + i}, "seq": 0}
        lines = [json.dumps(start).encode()]
        t = rng.uniform(0.0, 1.0)
        due, shown, total = [t], [0], 0
        for seq, (event, count) in enumerate(zip(events, counts, strict=True), 1):
            t += rng.uniform(0.020, 0.050)
            total += count
            lines.append(json.dumps({**event, "seq": seq}).encode())
            due.append(t)
            shown.append(total)
        lines.append(json.dumps({"kind": "end", "status": "ok", "seq": len(events) + 1}).encode())
        due.append(t + 0.02)
        shown.append(shown[-1])
        agents.append(Agent(run, chat0 + i, lines, due, shown, [0.0] * len(lines)))
    began = time.monotonic() + lead_s
    for agent in agents:
        agent.due = [began + offset for offset in agent.due]
    return agents
