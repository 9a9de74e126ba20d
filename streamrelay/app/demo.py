"""``streamrelay demo``: a real recorded model stream delivered into a mock chat, end to end.

Starts the platform's mock server (Telegram Bot API, Slack Web API or Discord REST, with the platform's
documented rate limits on), the sidecar (HTTP ingest, SQLite ledger in a temporary folder, the platform's
real SDK: aiogram, slack-sdk or discord.py), replays the recording through HTTP ingest, then prints what the
chat shows, message by message, and the delivery report. It prints the run's live page URL first (open it in a
browser to watch the run); with ``platform = "web"`` that page is the channel itself (no mock server).
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.web import WebAdapter
from streamrelay.app.demo_check import Check, demo_checks
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.ingest_client import detect_format, recording_lines, replay
from streamrelay.app.service import Sidecar, build_relay
from streamrelay.config.paths import recordings
from streamrelay.config.settings import DEFAULT_CONFIG, load_settings
from streamrelay.core.delivery.sources import SourceList, with_sources
from streamrelay.core.errors import ConfigError
from streamrelay.core.events import Citation, DeliveryMode, ProviderFormat, Target, TextEvent, Visibility
from streamrelay.core.json_types import JsonObject
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.ports import TextFormat
from streamrelay.core.text.assembler import TextAssembler
from streamrelay.core.units import LengthUnit, text_units
from streamrelay.mocks.common import MockPlatform

DEFAULT_RECORDING = recordings() / "anthropic" / "markdown-long-fences.jsonl"


async def run_demo(
    console: Console,
    *,
    recording: Path = DEFAULT_RECORDING,
    fmt: ProviderFormat | None = None,
    delivery: DeliveryMode = DeliveryMode.PREVIEW,
    pace_ms: float = 2.0,
    throttle_ms: int | None = None,
    platform: str = "telegram",
    keep_serving: bool = False,
) -> int:
    """Run the demo on ``platform`` (telegram, slack, discord or web); return the exit code: 0 when the report
    says delivered and every check of what the chat shows holds (:mod:`app.demo_check`), else 1.

    Args:
        keep_serving: after the run, keep the sidecar (and the live page) up until Ctrl+C.

    Raises:
        ConfigError: the platform has no channel in config/channels.toml, or it cannot stream ``delivery``.
    """
    fmt = fmt or detect_format(recording)
    events = recording_lines(recording)
    dry = DRY_RUN.get(platform)  # None for the web channel: the sidecar is its platform
    settings = load_settings(DEFAULT_CONFIG, include_disabled=True)
    name = next((n for n, ch in settings.channels.items() if ch.platform == platform), None)
    if name is None:
        raise ConfigError(f"{DEFAULT_CONFIG} has no channel with platform = {platform!r}")
    update: dict[str, object] = {"delivery": delivery, "enabled": True}
    if throttle_ms is not None:
        update["throttle_ms"] = throttle_ms
    channel = settings.channels[name].with_values(name, **update)  # checked before anything starts
    mock = dry.make_mock(True) if dry is not None else None
    if mock is not None:
        channel = channel.with_values(name, api_base=await mock.start())
    settings.channels = {name: channel}
    limit = channel.policy(name).max_units
    target = dry.target(native=delivery is DeliveryMode.NATIVE) if dry is not None else Target(chat_id="demo-page")
    if mock is not None:
        seed_thread(mock, target)
    # printed before the platform's SDK is imported (build_relay: aiogram alone takes seconds): the first line at once
    console.print(f"[bold]mock {platform} API[/] {mock.base_url if mock else '(none: the page is the channel)'}")
    note = channel.delivery_note()
    if note is not None:
        console.print(f"[yellow]{note}[/]")
    with tempfile.TemporaryDirectory(prefix="streamrelay-demo-") as tmp:
        ledger = await SqliteLedger.open(Path(tmp) / "ledger.sqlite3")
        relay = build_relay(settings, ledger, tokens={name: SecretStr(dry.token if dry else "")})
        token = secrets.token_urlsafe(24)
        sidecar = Sidecar(relay, token=token)
        url = await sidecar.start()
        run = f"demo-{secrets.token_hex(4)}"
        page = relay.channels[name].adapter
        if isinstance(page, WebAdapter):
            page.record = True
        console.print(f"[bold]sidecar[/] {url}   [bold]watch it live[/] {sidecar.watch_url(run)}")
        if not keep_serving:
            console.print("[dim](the page lives as long as the demo: --keep-serving keeps it up after the run)[/]")
        console.print(
            f"replaying [cyan]{recording.name}[/] ({fmt}, {len(events)} events, {pace_ms:g} ms apart) "
            f"into {platform} chat {target.chat_id}, delivery [cyan]{delivery}[/]"
        )
        try:
            with Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            ) as progress:
                task = progress.add_task("streaming", total=len(events))
                report = await replay(
                    url,
                    token,
                    run=run,
                    channel=name,
                    chat_id=target.chat_id,
                    thread_id=target.thread_id,
                    fmt=fmt,
                    events=events,
                    pace_ms=pace_ms,
                    on_line=lambda n: progress.update(task, completed=n),
                )
            if keep_serving:
                console.print(f"serving the live page until Ctrl+C: {sidecar.watch_url(run)}")
                await sidecar.wait()
        finally:
            await sidecar.stop()
            await relay.close()
            await ledger.close()
            if mock is not None:
                await mock.stop()
    shown: MockPlatform | WebAdapter
    if mock is not None:
        shown = mock
    else:
        assert isinstance(page, WebAdapter)
        shown = page
    messages = [(str(mid), text) for mid, text in shown.visible(target.chat_id) if mid != target.thread_id]
    console.rule(f"what {platform} chat {target.chat_id} shows: {len(messages)} message(s)")
    for message_id, text in messages:
        units = text_units(text, LengthUnit.UTF16)
        console.print(Panel(Text(text), title=f"message {message_id}", subtitle=f"{units} / {limit} UTF-16 units"))
    texts = [t for _, t in messages]
    checks = demo_checks(
        texts,
        recorded_answer(events, fmt, TextFormat(channel.format)),
        platform=platform,
        fmt=TextFormat(channel.format),
        limit=limit,
        status_first=delivery is DeliveryMode.PROGRESS,  # the status message is shown too
    )
    console.print(_report_table(report, shown, checks))
    return 0 if report.get("status") == "delivered" and all(check.ok for check in checks) else 1


def _report_table(report: dict[str, Any], shown: MockPlatform | WebAdapter, checks: list[Check]) -> Table:
    """The delivery report and the demo's own checks of what the chat shows."""
    calls = shown.calls
    table = Table(title="delivery report")
    table.add_column("field")
    table.add_column("value")
    for key in ("status", "confirmed", "uncertain", "failed", "unsent", "degraded", "message_ids", "end_status"):
        table.add_row(key, str(report.get(key)))
    methods: dict[str, int] = {}
    for call in calls:
        methods[call.method] = methods.get(call.method, 0) + 1
    table.add_row("platform calls", ", ".join(f"{m} x{n}" for m, n in methods.items()))
    table.add_row("429 answers", str(sum(c.status == 429 for c in calls)))
    for check in checks:
        table.add_row(check.name, ("yes" if check.ok else "NO") + (f" ({check.note})" if check.note else ""))
    return table


def recorded_answer(events: list[JsonObject], fmt: ProviderFormat, shown_as: TextFormat = TextFormat.MARKDOWN) -> str:
    """The root's answer text of a recording as the chat shows it, read with the same normalizer the sidecar uses (for
    the check): a sub-agent's text (an event with a ``source``) never enters the root's answer; the root's sources
    follow it as the channel's format ``shown_as`` lists them (:func:`core.delivery.sources.with_sources`)."""
    normalizer = make_normalizer(fmt, "check")
    assembler = TextAssembler()
    sources = SourceList()
    for event in [e for raw in events for e in normalizer.feed(raw)] + normalizer.close():
        if isinstance(event, TextEvent) and event.visibility is Visibility.ANSWER and event.source is None:
            assembler.apply(None, event.message, event.mode, event.text)
        elif isinstance(event, Citation) and event.source is None:
            sources.add(event.url, event.title)
    return with_sources(assembler.answer(), sources, shown_as)
