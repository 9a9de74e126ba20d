"""The ``streamrelay`` command: serve, demo, replay, case, mock, chaos, runs (:mod:`app.ops_cli`); ``--version``."""

from __future__ import annotations

import asyncio
import enum
import json
import os
import secrets
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.ops_cli import runs_app
from core.errors import ConfigError
from core.events import DeliveryMode, ProviderFormat

if TYPE_CHECKING:
    from app.chaos.plan import Options

T = TypeVar("T")

app = typer.Typer(
    help="streamrelay: the delivery sidecar between LLM agents and chat platforms.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)
app.add_typer(runs_app, name="runs")


class Platform(enum.StrEnum):
    TELEGRAM = "telegram"
    SLACK = "slack"
    DISCORD = "discord"


class DemoPlatform(enum.StrEnum):
    TELEGRAM = "telegram"
    SLACK = "slack"
    DISCORD = "discord"
    WEB = "web"


console = Console()
err = Console(stderr=True)


class LogFormatChoice(enum.StrEnum):
    JSON = "json"
    CONSOLE = "console"


class LogLevelChoice(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def _print_version(value: bool) -> None:
    if value:
        from app.version import version

        typer.echo(f"streamrelay {version()}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """streamrelay: the delivery sidecar between LLM agents and chat platforms."""


@app.command()
def serve(
    config: Annotated[Path, typer.Option(help="channels TOML")] = Path("config/channels.toml"),
    host: Annotated[str | None, typer.Option(help="override [service].host")] = None,
    port: Annotated[int | None, typer.Option(help="override [service].port")] = None,
    log_format: Annotated[
        LogFormatChoice | None, typer.Option(help="override [service].log_format (default: console on a terminal)")
    ] = None,
    log_level: Annotated[LogLevelChoice | None, typer.Option(help="override [service].log_level")] = None,
) -> None:
    """Run the sidecar: HTTP ingest, the SQLite journal and ledger, the configured channels, /healthz, /readyz and
    /metrics. Runs a previous process left unfinished resume by themselves; SIGTERM drains active runs first."""
    from app.serving import serve as run_service

    _run(
        run_service(
            config,
            host=host,
            port=port,
            log_format=log_format.value if log_format else None,
            log_level=log_level.value if log_level else None,
        ),
        loop_factory=fast_loop(),
    )


@app.command()
def demo(
    recording: Annotated[Path | None, typer.Option(help="a recorded provider stream (.jsonl)")] = None,
    format: Annotated[ProviderFormat | None, typer.Option(help="provider format (default: from the folder)")] = None,
    delivery: Annotated[DeliveryMode, typer.Option(help="delivery mode")] = DeliveryMode.PREVIEW,
    pace_ms: Annotated[float, typer.Option(help="milliseconds between recorded events")] = 5.0,
    throttle_ms: Annotated[int | None, typer.Option(help="preview edit throttle (default: the TOML's)")] = None,
    platform: Annotated[
        DemoPlatform, typer.Option(help="which platform's mock chat to deliver to (web: the live page itself)")
    ] = DemoPlatform.TELEGRAM,
    keep_serving: Annotated[bool, typer.Option(help="keep the live page up after the run, until Ctrl+C")] = False,
) -> None:
    """Replay a real recorded stream into a mock chat (Telegram, Slack, Discord or the web page) and show what it
    shows; prints the run's live page URL."""
    from app.demo import DEFAULT_RECORDING, run_demo

    code = _run(
        run_demo(
            console,
            recording=recording or DEFAULT_RECORDING,
            fmt=format,
            delivery=delivery,
            pace_ms=pace_ms,
            throttle_ms=throttle_ms,
            platform=platform.value,
            keep_serving=keep_serving,
        )
    )
    raise typer.Exit(code or 0)


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="a recorded provider stream (.jsonl)", exists=True, dir_okay=False)],
    channel: Annotated[str, typer.Option(help="configured channel name")],
    chat_id: Annotated[str, typer.Option(help="target chat id")],
    format: Annotated[ProviderFormat | None, typer.Option(help="provider format (default: from the folder)")] = None,
    url: Annotated[str, typer.Option(help="the sidecar's base URL")] = "http://127.0.0.1:8787",
    run: Annotated[str | None, typer.Option(help="run id (default: random)")] = None,
    pace_ms: Annotated[float, typer.Option(help="milliseconds between events")] = 0.0,
    token_env: Annotated[
        str, typer.Option(help="environment variable holding the sidecar token")
    ] = "STREAMRELAY_TOKEN",
) -> None:
    """Replay a recorded stream against a running sidecar and print its delivery report."""
    from app.ingest_client import detect_format, recording_lines
    from app.ingest_client import replay as do_replay

    token = os.environ.get(token_env, "")
    if not token:
        err.print(f"environment variable {token_env} is not set: export the sidecar's bearer token")
        raise typer.Exit(2)
    try:
        fmt = format or detect_format(file)
        events = recording_lines(file)
    except ValueError as exc:
        err.print(str(exc))
        raise typer.Exit(2) from None
    target: int | str = int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id
    report = _run(
        do_replay(
            url,
            token,
            run=run or f"replay-{secrets.token_hex(4)}",
            channel=channel,
            chat_id=target,
            fmt=fmt,
            events=events,
            pace_ms=pace_ms,
        )
    )
    console.print_json(json.dumps(report))


@app.command()
def case(
    paths: Annotated[list[Path], typer.Argument(help="case files or folders of them")],
    out: Annotated[Path, typer.Option(help="folder for the transcripts (<id>.json)")] = Path("out/cases"),
) -> None:
    """Run case files (unit and scenario) and write each transcript to OUT/<id>.json."""
    from app.cases import run_case_file

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            err.print(f"no such case file or folder: {path}")
            raise typer.Exit(2)
    out.mkdir(parents=True, exist_ok=True)

    async def main() -> int:
        table = Table(title=f"{len(files)} case(s)")
        for col in ("case", "type", "result", "seconds", "why"):
            table.add_column(col)
        failed = 0
        for file in files:
            result = await run_case_file(file)
            (out / f"{result.id}.json").write_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
            verdict = (
                "[green]pass[/]"
                if result.passed
                else ("[yellow]unsupported[/]" if result.unsupported else "[red]FAIL[/]")
            )
            failed += not result.passed
            why = "; ".join(result.failures)[:300]
            table.add_row(result.id, result.type, verdict, f"{result.seconds:.2f}", why)
        console.print(table)
        console.print(f"{len(files) - failed} passed, {failed} failed · transcripts in {out}")
        return 1 if failed else 0

    raise typer.Exit(_run(main()))


@app.command()
def mock(
    platform: Annotated[Platform, typer.Argument(help="which platform's API to mock")],
    port: Annotated[int | None, typer.Option(help="port (default: telegram 8081, slack 8082, discord 8083)")] = None,
    rate_limits: Annotated[bool, typer.Option(help="answer 429 past the platform's documented limits")] = True,
    host: Annotated[
        str, typer.Option(help="interface (a container's mock for other containers: 0.0.0.0; never a real token)")
    ] = "127.0.0.1",
) -> None:
    """Run a mock platform API (on 127.0.0.1 by default) for dry runs (point a channel's api_base at the URL it
    prints)."""
    from app.dry_run import DRY_RUN

    dry = DRY_RUN[platform.value]
    _run(dry.serve(host, dry.default_port if port is None else port, rate_limits))


@app.command()
def chaos(
    runs: Annotated[int, typer.Option(min=1, help="how many runs")] = 100,
    seed: Annotated[int, typer.Option(help="the plan's seed (same runs and seed: same plan)")] = 1,
    platform: Annotated[str, typer.Option(help="telegram | slack | discord | all")] = "all",
    mode: Annotated[str, typer.Option(help="delivery mode of the runs: preview | block | all")] = "all",
    exclusive_bot: Annotated[
        bool,
        typer.Option(
            "--exclusive-bot/--shared-bot",
            help="Telegram's bot token is the sidecar's alone (uncertain sends settled by an id probe) or shared",
        ),
    ] = True,
    concurrency: Annotated[int, typer.Option(min=1, help="agents streaming at once")] = 12,
    long: Annotated[bool, typer.Option("--long", help="outages of minutes (run idle timeout 300 s)")] = False,
    idle_timeout_s: Annotated[
        float | None, typer.Option(help="the sidecar's run_idle_timeout_s (default 20, or 300 with --long)")
    ] = None,
    kill_every: Annotated[int, typer.Option(min=1, help="one planned kill -9 per this many runs (at least 2)")] = 12,
    fault_every: Annotated[int, typer.Option(min=1, help="one planned platform fault per this many runs")] = 4,
    out: Annotated[Path | None, typer.Option(help="transcript folder (default: a new temporary folder)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    backend: Annotated[
        str, typer.Option(help="sqlite (one sidecar) | redis (replicas on a redis-server the campaign starts)")
    ] = "sqlite",
    replicas: Annotated[int, typer.Option(min=1, help="replica processes (--backend redis)")] = 1,
    lease_ttl_s: Annotated[
        float, typer.Option(min=1.0, help="the replicas' lease_ttl_s (--backend redis; short: kills cost seconds)")
    ] = 3.0,
) -> None:
    """A seeded chaos campaign against the real sidecar and mock platforms (separate processes): kill -9 of the
    sidecar at random points, restarts on the same journal and ledger, agents re-sending from seq 0 or never
    coming back, platform faults (429 storms, 5xx and timeouts before and after commit, resets, outages). With
    --backend redis --replicas N: N replicas on a redis-server of the campaign's own, kills of random replicas.
    Prints one row per platform and mode; exits 1 when a run was lost, lied about, left unfinished or doubled
    where that is not allowed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from app.chaos import BACKENDS, MODES, PLATFORMS, Options, failed, run_campaign, summary, table, write_transcripts

    def choice(value: str, known: tuple[str, ...], name: str) -> tuple[str, ...]:
        if value == "all":
            return known
        if value not in known:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(known)}, all", param_hint=name)
        return (value,)

    if backend not in BACKENDS:
        raise typer.BadParameter(f"{backend!r} is not one of {', '.join(BACKENDS)}", param_hint="--backend")
    options = Options(
        runs=runs,
        seed=seed,
        platforms=choice(platform, PLATFORMS, "--platform"),
        modes=choice(mode, MODES, "--mode"),
        exclusive_bot=exclusive_bot,
        concurrency=concurrency,
        long=long,
        out=out,
        idle_timeout_s=idle_timeout_s,
        runs_per_kill=kill_every,
        runs_per_fault=fault_every,
        backend=backend,
        replicas=replicas,
        lease_ttl_s=lease_ttl_s,
    )
    _chaos_preflight(options)
    shown = err if as_json else console
    progress = Progress(
        TextColumn("[bold]chaos[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
        console=shown,
    )
    task = progress.add_task("runs", total=runs, line="starting the mocks and the sidecar…")

    def on_progress(event: str, counts: dict[str, int]) -> None:
        line = f"streaming {counts['streaming']} · kills {counts['kills']} · faults {counts['faults']}"
        progress.update(task, completed=counts["done"], line=line)

    with progress:
        outcome = _run(run_campaign(options, on_progress))
    result = summary(outcome)
    write_transcripts(outcome, result)
    if as_json:
        typer.echo(json.dumps(result, indent=1, ensure_ascii=False))  # plain: rich would wrap long lines
    else:
        wide = console if console.width >= 130 else Console(width=130)
        wide.print(table(outcome))
        for bad in result["bad_runs"][:20]:
            wide.print(
                f"[red]{escape(bad['run'])}[/] ({bad['platform']}/{bad['mode']}): {escape('; '.join(bad['problems']))}"
            )
            if bad["anomalies"]:
                wide.print(f"  agent: {escape('; '.join(bad['anomalies'])[:400])}")
        if len(result["bad_runs"]) > 20:
            wide.print(f"… and {len(result['bad_runs']) - 20} more bad run(s): summary.json lists them all")
        if outcome.crashes:
            wide.print(f"[red]the sidecar crashed:[/] {escape('; '.join(outcome.crashes))}")
        kept = "transcripts and logs" if options.replicated else "transcripts, logs and the ledger"
        wide.print(f"{kept} in {outcome.out}")
    raise typer.Exit(1 if failed(outcome) else 0)


def _chaos_preflight(options: Options) -> None:
    """Refuse what a campaign cannot run before anything starts: replicas without Redis, Redis without its
    server."""
    from app.chaos.procs import redis_server

    if not options.replicated:
        if options.replicas != 1:
            raise typer.BadParameter("replicas need --backend redis (sqlite runs one sidecar)", param_hint="--replicas")
        return
    try:
        redis_server()
    except RuntimeError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


def fast_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (it is a dependency; it has no Windows build): the service's
    sockets, timers and callbacks in C (libuv) rather than in Python, which is most of the loop's own cost under
    load; None: asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _run(coro: Coroutine[Any, Any, T], *, loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(coro)
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except (RuntimeError, OSError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


def main() -> None:
    """Entry point of the ``streamrelay`` script."""
    app(sys.argv[1:])
