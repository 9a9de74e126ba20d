"""Benchmark: the send path's own CPU per platform call, beside the bare SDK call against the same mock.

For each platform (Telegram through aiogram, Slack through slack-sdk, Discord through discord.py) the mock platform
server runs in its own process (``streamrelay mock NAME --no-rate-limits``: its CPU is not counted), and this process
makes the same calls two ways, alternating, ``--repeat`` times:

- ``sdk``: the bare SDK call in a loop (aiogram's ``bot.send_message`` / ``bot.edit_message_text``, slack-sdk's
  ``chat_postMessage`` / ``chat_update``, discord.py's ``PartialMessageable.send`` / ``PartialMessage.edit``);
- ``relay``: the project's whole send path for the same texts: a slot book's part changes, the delivery machine
  plans the call (``next_op``), the send chain's budgets are asked once (``grant``; every budget lifted to 10^6/s
  so nobody waits, but each is asked and spent), and the reconciler's ``_perform`` makes it: the ledger's intent (a
  real SQLite ledger in a temporary file), ``adapter.perform`` (metered, as ``serve`` builds it, with the service's
  logging at ``--log-level``), the outcome to the machine and the part to the ledger.

Calls come in messages: one create, then ``--edits`` edits, each showing ``--grow`` more characters of the recorded
8.5k Markdown answer, sent as plain text (``--fmt markdown``: rendered by the adapter, as a channel with
``format = "markdown"`` does; the bare SDK calls send the text as it is either way).
Prints, per platform, the process CPU per call (µs, medians; the mock's CPU left out), the overhead ratio
relay / sdk, and the machine's load average. ``--profile`` prints a cProfile of one relay pass (the project's side:
the rows under ``streamrelay/``).

    uv run python bench/bench_send.py [--calls 300] [--repeat 3] [--platforms telegram,slack,discord] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import os
import pstats
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import SecretStr

from bench.bench_pipeline import recorded_deltas
from bench.serving import free_port
from streamrelay.adapters.ops import ServiceMetrics, configure_logging
from streamrelay.adapters.sqlite.ledger import SqliteLedger
from streamrelay.adapters.sqlite.store import SqliteStore
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.reconciler import Reconciler
from streamrelay.core.delivery.send_chain import Wait
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.ledger import Ledger, MemoryLedger, RunRecord
from streamrelay.core.records.report import SlotRole

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("telegram", "slack", "discord")
FMT = [TextFormat.PLAIN]
"""The channel's text format (``--fmt``)."""
LEDGER = ["sqlite"]
"""The ledger (``--ledger``): ``sqlite`` as ``serve`` keeps it, or ``memory`` (to see what the file costs)."""
COMMITS: list[float] = []
"""The ledger's commits per call of each relay pass."""
LIFTED = {"per_s": 1_000_000.0, "burst": 1_000_000.0}
"""Every budget at this rate: asked and spent per call, never waited for."""


def texts(calls: int, edits: int, grow: int) -> list[list[str]]:
    """``calls`` calls as messages: each a list of the texts it shows (its create's, then one per edit)."""
    answer = "".join(recorded_deltas())
    messages: list[list[str]] = []
    made = 0
    start = 0
    while made < calls:
        steps = min(edits + 1, calls - made)
        shown = []
        for i in range(steps):
            end = start + grow * (i + 1)
            if end > len(answer):
                start, end = 0, grow * (i + 1)
            shown.append(answer[start:end])
        messages.append(shown)
        start = (start + grow * steps) % max(1, len(answer) - grow * (edits + 1))
        made += steps
    return messages


def wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the mock ended ({proc.returncode})")
        time.sleep(0.05)
    raise RuntimeError("the mock did not listen in time")


# --- the bare SDK calls -----------------------------------------------------------------------------------------


async def sdk_telegram(api: str, token: str, chats: list[Any], messages: list[list[str]]) -> float:
    from aiogram import Bot
    from aiogram.client.session.aiohttp import AiohttpSession
    from aiogram.client.telegram import TelegramAPIServer

    bot = Bot(token, session=AiohttpSession(api=TelegramAPIServer.from_base(api)))

    async def one(chat: Any, mine: list[list[str]]) -> None:
        for shown in mine:
            sent = await bot.send_message(chat, shown[0])
            for text in shown[1:]:
                await bot.edit_message_text(text, chat_id=chat, message_id=sent.message_id)

    try:
        await bot.send_message(chats[0], "warm up")
        return await timed(one, chats, messages)
    finally:
        await bot.session.close()


async def sdk_slack(api: str, token: str, chats: list[Any], messages: list[list[str]]) -> float:
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(token=token, base_url=api)

    async def one(chat: Any, mine: list[list[str]]) -> None:
        for shown in mine:
            sent = await client.chat_postMessage(channel=chat, text=shown[0])
            ts, channel = sent["ts"], sent["channel"]
            for text in shown[1:]:
                await client.chat_update(channel=channel, ts=ts, text=text)

    try:
        await client.chat_postMessage(channel=chats[0], text="warm up")
        return await timed(one, chats, messages)
    finally:
        if client.session is not None:
            await client.session.close()


async def sdk_discord(api: str, token: str, chats: list[Any], messages: list[list[str]]) -> float:
    from streamrelay.adapters.discord._sdk import discord

    discord.http.Route.BASE = api
    client = discord.Client(intents=discord.Intents.none())
    await client.login(token)

    async def one(chat: Any, mine: list[list[str]]) -> None:
        channel = client.get_partial_messageable(int(chat))
        for shown in mine:
            sent = await channel.send(shown[0])
            for text in shown[1:]:
                await sent.edit(content=text)

    try:
        await client.get_partial_messageable(int(chats[0])).send("warm up")
        return await timed(one, chats, messages)
    finally:
        await client.close()


async def timed(
    one: Callable[[Any, list[list[str]]], Awaitable[None]], chats: list[Any], messages: list[list[str]]
) -> float:
    """CPU seconds of ``one(chat, its messages)`` for every chat at once (the messages dealt out in turn)."""
    cpu = time.process_time()
    await asyncio.gather(*(one(chat, messages[i :: len(chats)]) for i, chat in enumerate(chats)))
    return time.process_time() - cpu


SDK: dict[str, Callable[[str, str, list[Any], list[list[str]]], Coroutine[Any, Any, float]]] = {
    "telegram": sdk_telegram,
    "slack": sdk_slack,
    "discord": sdk_discord,
}


# --- the project's send path ------------------------------------------------------------------------------------


async def relay_pass(
    platform: str, api: str, token: str, chats: list[Any], messages: list[list[str]], profile: cProfile.Profile | None
) -> float:
    """The same calls through the project's send path (module docstring), one run per chat, all at once; the CPU
    seconds they took."""
    defaults = ChannelSettings.model_validate({"platform": platform, "api_base": api})
    rate = {budget.budget.name: LIFTED for budget in defaults.budgets()}
    settings = ChannelSettings.model_validate({"platform": platform, "api_base": api, "rate": rate})
    runtime = make_runtime("bench", settings, SecretStr(token), metrics=ServiceMetrics())
    adapter = runtime.adapter
    clock = MonotonicClock()
    with tempfile.TemporaryDirectory() as tmp:
        store = await SqliteStore.open(Path(tmp) / "ledger.db")
        try:
            ledger: Ledger = await SqliteLedger.on(store) if LEDGER[0] == "sqlite" else MemoryLedger()
            recs = []
            for i, chat in enumerate(chats):
                run, target = f"bench-run-{i}", Target(chat_id=chat)
                await ledger.start_run(RunRecord(run, "bench", {"chat_id": chat}, "preview"))
                rec = Reconciler(
                    book=SlotBook(run, 0.0, native=False, measure=adapter.measure),
                    adapter=adapter,
                    chain=runtime.chain_for(target, clock),
                    target=target,
                    ledger=ledger,
                    clock=clock,
                    requester=Requester.of(run),
                )
                recs.append(rec)
                warm = rec.book.claim_slot(SlotRole.ANSWER, "warm up", FMT[0])
                await step(rec)
                rec.book.retire(warm)  # its message is deleted: not counted
                await step(rec)

            async def one(rec: Reconciler, mine: list[list[str]]) -> int:
                made = 0
                for shown in mine:
                    slot = rec.book.claim_slot(SlotRole.ANSWER, shown[0], FMT[0])
                    made += await step(rec)
                    for text in shown[1:]:
                        rec.book.set_text(slot, text)
                        made += await step(rec)
                return made

            cpu = time.process_time()
            if profile is not None:
                profile.enable()
            made = await asyncio.gather(*(one(rec, messages[i :: len(recs)]) for i, rec in enumerate(recs)))
            if profile is not None:
                profile.disable()
            spent = time.process_time() - cpu
            COMMITS.append(store.commits / max(1, sum(made)))
            expected = sum(len(shown) for shown in messages)
            if sum(made) != expected:
                raise RuntimeError(f"{platform}: {sum(made)} calls made, {expected} expected")
            return spent
        finally:
            await adapter.close()
            await store.close()


async def step(rec: Reconciler) -> int:
    """Make the calls the machine wants now, as the reconciler's loop does (no waits: budgets are lifted and the
    throttle is 0); returns how many were made."""
    machine, chain = rec.machine, rec._chain
    made = 0
    while (op := machine.next_op()) is not None:
        if op.slot.stale and op.kind.journaled:
            rec.book.refresh(op.slot)
            continue
        if op.kind.journaled and machine.shortcut(op):
            continue
        ask = chain.grant(op.kind.call_kind, final=rec.finalizing, requester=rec.requester)
        if isinstance(ask, Wait):
            raise RuntimeError(f"a lifted budget said wait {ask.seconds:.3f} s")
        await rec._perform(op, ask)
        made += 1
    return made


# --- the table --------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per pass (creates and edits)")
    parser.add_argument("--edits", type=int, default=9, help="edits after each create")
    parser.add_argument("--chats", type=int, default=10, help="conversations at once (one run each)")
    parser.add_argument("--grow", type=int, default=150, help="characters each edit adds")
    parser.add_argument("--repeat", type=int, default=3, help="alternating sdk/relay pairs (medians printed)")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument(
        "--fmt", choices=("plain", "markdown"), default="plain", help="the channel's format (markdown: rendered)"
    )
    parser.add_argument("--ledger", choices=("sqlite", "memory"), default="sqlite", help="memory: what SQLite costs")
    parser.add_argument("--log-level", default="info", help="the service's log level (serve's default: info)")
    parser.add_argument("--profile", action="store_true", help="cProfile one more relay pass per platform")
    parser.add_argument("--top", type=int, default=30, help="profile rows")
    args = parser.parse_args()

    FMT[0] = TextFormat(args.fmt)
    LEDGER[0] = args.ledger
    configure_logging("json", args.log_level, stream=open(os.devnull, "w"))  # noqa: SIM115 (lives with the process)
    messages = texts(args.calls, args.edits, args.grow)
    calls = sum(len(shown) for shown in messages)
    print(
        f"{calls} calls per pass ({len(messages)} creates, {calls - len(messages)} edits of +{args.grow} chars),"
        f" {args.chats} chats at once, fmt {args.fmt}, log level {args.log_level}, ledger {args.ledger}"
    )
    print(f"{'platform':10} {'sdk µs/call':>12} {'relay µs/call':>14} {'overhead µs':>12} {'ratio':>6}  load")
    for platform in args.platforms.split(","):
        dry = DRY_RUN[platform]
        from streamrelay.adapters.registry import REGISTRY

        port = free_port()
        path = REGISTRY[platform].dry_run.api_path  # type: ignore[union-attr]
        api = f"http://127.0.0.1:{port}{path}"
        mock = subprocess.Popen(
            [sys.executable, "-m", "streamrelay.app", "mock", platform, "--port", str(port), "--no-rate-limits"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port, mock)
            chats = [REGISTRY[platform].dry_run.chat(i) for i in range(args.chats)]  # type: ignore[union-attr]
            sdk: list[float] = []
            relay: list[float] = []
            for _ in range(args.repeat):
                gc.collect()
                sdk.append(asyncio.run(SDK[platform](api, dry.token, chats, messages)) / calls)
                gc.collect()
                relay.append(asyncio.run(relay_pass(platform, api, dry.token, chats, messages, None)) / calls)
            s, r = statistics.median(sdk) * 1e6, statistics.median(relay) * 1e6
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{platform:10} {s:12.0f} {r:14.0f} {r - s:12.0f} {r / s:6.2f}  {load}", flush=True)
            if args.profile:
                profile = cProfile.Profile(time.process_time)  # CPU, not the wait for the mock
                asyncio.run(relay_pass(platform, api, dry.token, chats, messages, profile))
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out).sort_stats("tottime")
                stats.print_stats(args.top)
                print(out.getvalue())
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out).sort_stats("cumulative")
                stats.print_stats("streamrelay/", args.top)
                print(out.getvalue())
        finally:
            mock.terminate()
            mock.wait(10)


if __name__ == "__main__":
    main()
