"""``streamrelay demo``: a real recorded model stream delivered into a mock chat, end to end.

Starts the platform's mock server (Telegram Bot API, Slack Web API or Discord REST, with the platform's
documented rate limits on), the sidecar (HTTP ingest, SQLite ledger in a temporary folder, the platform's
real SDK: aiogram, slack-sdk or discord.py), replays the recording through HTTP ingest, then prints what the
chat shows, message by message, and the delivery report.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from adapters.sqlite import SqliteLedger
from app.dry_run import DRY_RUN, seed_thread
from app.ingest_client import detect_format, recording_lines, replay
from app.service import Sidecar, build_relay
from config.settings import DEFAULT_CONFIG, load_settings
from core.assembler import TextAssembler
from core.chunk_checks import content_key, fences_balanced
from core.errors import ConfigError
from core.events import DeliveryMode, ProviderFormat, TextEvent, Visibility
from core.normalize import make_normalizer
from core.units import LengthUnit, text_units

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"


async def run_demo(
    console: Console,
    *,
    recording: Path = DEFAULT_RECORDING,
    fmt: ProviderFormat | None = None,
    delivery: DeliveryMode = DeliveryMode.PREVIEW,
    pace_ms: float = 2.0,
    throttle_ms: int | None = None,
    platform: str = "telegram",
) -> int:
    """Run the demo on ``platform`` (telegram, slack or discord); return the exit code (0 when the report
    says delivered).

    Raises:
        ConfigError: the platform has no channel in config/channels.toml, or it cannot stream ``delivery``.
    """
    fmt = fmt or detect_format(recording)
    events = recording_lines(recording)
    dry = DRY_RUN[platform]
    settings = load_settings(DEFAULT_CONFIG, include_disabled=True)
    name = next((n for n, ch in settings.channels.items() if ch.platform == platform), None)
    if name is None:
        raise ConfigError(f"{DEFAULT_CONFIG} has no channel with platform = {platform!r}")
    update: dict[str, object] = {"delivery": delivery, "enabled": True}
    if throttle_ms is not None:
        update["throttle_ms"] = throttle_ms
    channel = settings.channels[name].with_values(name, **update)  # checked before anything starts
    mock = dry.make_mock(True)
    channel = channel.with_values(name, api_base=await mock.start())
    settings.channels = {name: channel}
    limit = channel.policy(name).max_units
    target = dry.target(native=delivery is DeliveryMode.NATIVE)
    seed_thread(mock, target)
    with tempfile.TemporaryDirectory(prefix="streamrelay-demo-") as tmp:
        ledger = await SqliteLedger.open(Path(tmp) / "ledger.sqlite3")
        relay = build_relay(settings, ledger, tokens={name: SecretStr(dry.token)})
        token = secrets.token_urlsafe(24)
        sidecar = Sidecar(relay, token=token)
        url = await sidecar.start()
        console.print(f"[bold]mock {platform} API[/] {mock.base_url}   [bold]sidecar[/] {url}")
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
                    run=f"demo-{secrets.token_hex(4)}",
                    channel=name,
                    chat_id=target.chat_id,
                    thread_id=target.thread_id,
                    fmt=fmt,
                    events=events,
                    pace_ms=pace_ms,
                    on_line=lambda n: progress.update(task, completed=n),
                )
        finally:
            await sidecar.stop()
            await relay.close()
            await ledger.close()
            await mock.stop()
    messages = [(mid, text) for mid, text in mock.visible(target.chat_id) if mid != target.thread_id]
    console.rule(f"what {platform} chat {target.chat_id} shows: {len(messages)} message(s)")
    for message_id, text in messages:
        units = text_units(text, LengthUnit.UTF16)
        console.print(
            Panel(
                Text(text),
                title=f"message {message_id}",
                subtitle=f"{units} / {limit} UTF-16 units",
                expand=True,
            )
        )
    calls = mock.calls
    table = Table(title="delivery report")
    table.add_column("field")
    table.add_column("value")
    for key in (
        "status",
        "confirmed",
        "uncertain",
        "failed",
        "unsent",
        "degraded",
        "message_ids",
        "end_status",
    ):
        table.add_row(key, str(report.get(key)))
    methods: dict[str, int] = {}
    for call in calls:
        methods[call.method] = methods.get(call.method, 0) + 1
    table.add_row("platform calls", ", ".join(f"{m} x{n}" for m, n in methods.items()))
    table.add_row("429 answers", str(sum(c.status == 429 for c in calls)))
    texts = [text for _, text in messages]
    table.add_row("every message fits", _yes(all(text_units(t, LengthUnit.UTF16) <= limit for t in texts)))
    table.add_row("fences balanced", _yes(all(fences_balanced(t) for t in texts)))
    expected = recorded_answer(events, fmt)
    if delivery is DeliveryMode.PROGRESS:  # the status message is shown too: the answer is the last part(s)
        same = content_key("\n".join(texts)).endswith(content_key(expected))
    else:
        same = content_key("\n".join(texts)) == content_key(expected)
    table.add_row("answer shown once, whole", _yes(same) + f" (against the recording's {len(expected)} chars)")
    console.print(table)
    return 0 if report.get("status") == "delivered" else 1


def recorded_answer(events: list[dict[str, object]], fmt: ProviderFormat) -> str:
    """The answer text of a recording, read with the same normalizer the sidecar uses (for the check)."""
    normalizer = make_normalizer(fmt, "check")
    assembler = TextAssembler()
    for event in [e for raw in events for e in normalizer.feed(raw)] + normalizer.close():
        if isinstance(event, TextEvent) and event.visibility is Visibility.ANSWER:
            assembler.apply(None, event.message, event.mode, event.text)
    return assembler.answer()


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"
