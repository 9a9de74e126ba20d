"""The ``streamrelay`` command: serve, run (a bot beside it), init, demo, replay, case, mock, chaos, runs
(:mod:`app.ops_cli`; correct, retract and corrections: :mod:`app.corrections_cli`), deliveries
(:mod:`app.deliveries_cli`); ``--version``."""

from __future__ import annotations

import enum
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperArgument, TyperCommand

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos_cli import chaos
from streamrelay.app.cli_checks import existing_file, refuse_taken
from streamrelay.app.cli_run import err, fast_loop
from streamrelay.app.cli_run import run_async as _run
from streamrelay.app.corrections_cli import register as register_corrections
from streamrelay.app.deliveries_cli import deliveries_app
from streamrelay.app.ops_cli import DEFAULT_CONFIG as SHIPPED_CONFIG
from streamrelay.app.ops_cli import DEFAULT_URL, runs_app
from streamrelay.app.records_cli import register as register_records
from streamrelay.core.events import DeliveryMode, ProviderFormat

app = typer.Typer(
    help="streamrelay: the delivery sidecar between LLM agents and chat platforms.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)
register_corrections(runs_app)
register_records(app, runs_app)
app.add_typer(runs_app, name="runs")
app.add_typer(deliveries_app, name="deliveries")


MOCK_PLATFORMS = tuple(name for name, platform in REGISTRY.items() if platform.dry_run is not None)
"""``streamrelay mock``'s platforms: those registered with a mock (:mod:`adapters.registry`)."""
DEMO_PLATFORMS = tuple(REGISTRY)
"""``streamrelay demo``'s platforms: every registered one (web: the live page itself)."""


def _one_of(known: tuple[str, ...]) -> Callable[[str], str]:
    """A typer callback that takes a value in ``known`` (registered platforms) and refuses others, naming them."""

    def check(value: str) -> str:
        if value not in known:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(known)}")
        return value

    return check


DEFAULT_PORTS = ", ".join(f"{n} {p.dry_run.default_port}" for n, p in REGISTRY.items() if p.dry_run is not None)

console = Console()


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
        from streamrelay.app.version import version

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
    config: Annotated[Path, typer.Option(metavar="FILE", help="channels TOML")] = SHIPPED_CONFIG,
    host: Annotated[str | None, typer.Option(metavar="HOST", help="override [service].host")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, metavar="PORT", help="override [service].port")] = None,
    log_format: Annotated[
        LogFormatChoice | None, typer.Option(help="override [service].log_format (default: console on a terminal)")
    ] = None,
    log_level: Annotated[LogLevelChoice | None, typer.Option(help="override [service].log_level")] = None,
) -> None:
    """Run the sidecar: HTTP ingest, the SQLite journal and ledger, the configured channels, /healthz, /readyz and
    /metrics. Runs a previous process left unfinished resume by themselves; SIGTERM drains active runs first."""
    from streamrelay.app.cli_checks import check_listeners
    from streamrelay.app.serving import serve as run_service

    check_listeners(config, host, port)
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


@app.command(
    name="run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    no_args_is_help=True,
)
def run_with_bot(
    command: Annotated[list[str], typer.Argument(metavar="-- COMMAND...", help="the bot, e.g. -- python bot.py")],
    config: Annotated[Path, typer.Option(metavar="FILE", help="channels TOML")] = Path(
        "streamrelay/config/channels.toml"
    ),
    host: Annotated[str | None, typer.Option(metavar="HOST", help="override [service].host")] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, metavar="PORT", help="override [service].port (0: a free one)")
    ] = None,
    log_format: Annotated[
        LogFormatChoice | None, typer.Option(help="override [service].log_format (default: console on a terminal)")
    ] = None,
    log_level: Annotated[LogLevelChoice | None, typer.Option(help="override [service].log_level")] = None,
) -> None:
    """Serve (as serve does, same configuration), wait for /readyz, run the bot with STREAMRELAY_URL and
    STREAMRELAY_TOKEN in its environment, pass SIGINT/SIGTERM/SIGHUP on to it, and drain the sidecar when it exits.
    Exits with the bot's exit code. Without $STREAMRELAY_TOKEN a random token is made for the run."""
    from streamrelay.app.cli_checks import check_listeners
    from streamrelay.app.run_bot import run_bot

    if port != 0:
        check_listeners(config, host, port)
    code = _run(
        run_bot(
            config,
            command,
            host=host,
            port=port,
            log_format=log_format.value if log_format else None,
            log_level=log_level.value if log_level else None,
        ),
        loop_factory=fast_loop(),
    )
    raise typer.Exit(code)


@app.command()
def init(
    folder: Annotated[Path, typer.Argument(metavar="[FOLDER]", help="where to write (default: here)")] = Path("."),
    platform: Annotated[
        list[str] | None,
        typer.Option(
            metavar="[" + "|".join(MOCK_PLATFORMS) + "]",
            help="a channel for this platform (repeat it; default: telegram and slack)",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="overwrite files that exist")] = False,
) -> None:
    """Write a starter configuration: channels.toml (each rate number under its documentation link) and
    .env.example (the variables to set, no secrets). Refuses to overwrite either without --force."""
    from streamrelay.app.starter import write_starter

    try:
        written = write_starter(folder, platform or ["telegram", "slack"], force=force)
    except (FileExistsError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    for path in written:
        typer.echo(f"wrote {path}")
    config = written[0]
    typer.echo(
        f"next: copy {written[1]} to .env and fill it in, then: streamrelay run --config {config} -- python bot.py"
    )


FORMAT_HELP = (
    "the stream's format: a provider API's (anthropic, openai-responses, openai-chat, gemini) or an agent protocol's "
    "(ag-ui, ai-sdk-ui, a2a, langgraph); default: the recording's folder name (tests/streams/<format>/)"
)


@app.command()
def demo(
    recording: Annotated[
        Path | None, typer.Option(callback=existing_file, metavar="FILE", help="a recorded provider stream (.jsonl)")
    ] = None,
    format: Annotated[ProviderFormat | None, typer.Option(help=FORMAT_HELP)] = None,
    delivery: Annotated[DeliveryMode, typer.Option(help="delivery mode")] = DeliveryMode.PREVIEW,
    pace_ms: Annotated[float, typer.Option(min=0, metavar="MS", help="milliseconds between recorded events")] = 5.0,
    throttle_ms: Annotated[
        int | None, typer.Option(min=0, metavar="MS", help="preview edit throttle in ms (default: the TOML's)")
    ] = None,
    platform: Annotated[
        str,
        typer.Option(
            callback=_one_of(DEMO_PLATFORMS),
            metavar="[" + "|".join(DEMO_PLATFORMS) + "]",
            help="which platform's mock chat to deliver to (web: the live page itself)",
        ),
    ] = "telegram",
    keep_serving: Annotated[bool, typer.Option(help="keep the live page up after the run, until Ctrl+C")] = False,
) -> None:
    """Replay a real recorded stream into a mock chat (Telegram, Slack, Discord or the web page) and show what it
    shows; prints the run's live page URL."""
    from streamrelay.app.demo import DEFAULT_RECORDING, run_demo

    code = _run(
        run_demo(
            console,
            recording=recording or DEFAULT_RECORDING,
            fmt=format,
            delivery=delivery,
            pace_ms=pace_ms,
            throttle_ms=throttle_ms,
            platform=platform,
            keep_serving=keep_serving,
        )
    )
    raise typer.Exit(code or 0)


@app.command()
def replay(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="a recorded stream (.jsonl, one raw event per line)", exists=True, dir_okay=False
        ),
    ],
    channel: Annotated[str, typer.Option(metavar="NAME", help="configured channel name")],
    chat_id: Annotated[str, typer.Option(metavar="ID", help="target chat id")],
    format: Annotated[ProviderFormat | None, typer.Option(help=FORMAT_HELP)] = None,
    url: Annotated[
        str, typer.Option(envvar="STREAMRELAY_URL", metavar="URL", help="the sidecar's base URL")
    ] = DEFAULT_URL,
    run: Annotated[str | None, typer.Option(metavar="RUN", help="run id (default: random)")] = None,
    pace_ms: Annotated[float, typer.Option(min=0, metavar="MS", help="milliseconds between events")] = 0.0,
    token_env: Annotated[
        str, typer.Option(metavar="VAR", help="environment variable holding the sidecar token")
    ] = "STREAMRELAY_TOKEN",
    wait_s: Annotated[
        float,
        typer.Option(
            min=0, metavar="SECONDS", help="seconds to wait for a sidecar to answer (then up to 120 while it starts)"
        ),
    ] = 10.0,
) -> None:
    """Replay a recorded stream against a running sidecar and print its delivery report."""
    from streamrelay.app.ingest_client import detect_format, recording_lines, wait_for_sidecar
    from streamrelay.app.ingest_client import replay as do_replay

    token = os.environ.get(token_env, "")
    if not token:
        err.print(
            f"[red]error:[/] environment variable {token_env} is not set: export the bearer token the sidecar was "
            f"started with (`export {token_env}=...` in this shell, the same value `streamrelay serve` has)"
        )
        raise typer.Exit(2)
    try:
        fmt = format or detect_format(file)
        events = recording_lines(file)
    except ValueError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    target: int | str = int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id
    _run(wait_for_sidecar(url, wait_s, on_wait=lambda line: err.print(escape(line), highlight=False)))
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


def _case_progress() -> Progress:
    """``case``'s progress on stderr: a line per case as it ends, in the files' order (``3/55 pass chunk-tilde-fence
    (0.41 s)``) and, on a terminal, a bar naming the case awaited (removed at the end), elsewhere
    :class:`StillRunning`'s word on a long wait; the table stays alone on stdout."""
    columns = (TextColumn("{task.fields[case]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=err, transient=True)


STILL_RUNNING_S = 10.0
"""How often ``case`` says which case is still running where no bar shows it (seconds)."""


class StillRunning:
    """``case``'s word on a case that runs long where no progress bar shows it (stderr not a terminal: a CI log):
    every ``every_s`` seconds of one wait, ``  block-mode-keeps-first still running (20 s)``. The scenarios' platform
    SDKs are imported first (aiogram rebuilds its ~590 pydantic models at import: ~5-6 CPU-seconds, 63 s of wall
    time at load ~5 on 2 cores), and an import holds the GIL, so the word comes from a thread, not a task. Use as a
    context manager; :meth:`running` names what is awaited now (a case, the import; ``None``: nothing)."""

    def __init__(self, console: Console, every_s: float = STILL_RUNNING_S) -> None:
        self._console, self._every_s = console, every_s
        self._lock = threading.Lock()
        self._case: str | None = None
        self._since = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="case-still-running", daemon=True)

    def running(self, case: str | None) -> None:
        """The case that starts now (``None``: none runs)."""
        with self._lock:
            self._case, self._since = case, time.monotonic()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s / 2):
            with self._lock:
                case, since = self._case, self._since
            if case is None:
                continue
            ran = time.monotonic() - since
            if ran >= self._every_s:
                self._console.print(f"  {escape(case)} still running ({ran:.0f} s)", highlight=False)
                with self._lock:
                    if self._case == case:
                        self._since = since + ran // self._every_s * self._every_s  # the next word in every_s

    def __enter__(self) -> StillRunning:
        if not self._console.is_terminal:  # a terminal has the bar's elapsed time
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class _PathsArgument(TyperArgument):
    """A list of paths as a command's help shows it: ``PATH... <path>`` (typer shows a list argument's Python type,
    ``PATH <list[Path]>``)."""

    def _rich_display_name(self) -> str:
        return f"{self.display_name_raw}..."

    def display_type_rich(self, ctx: object) -> str:
        return "<path>"


class _PathsCommand(TyperCommand):
    """A command whose arguments taking many values are lists of paths (:class:`_PathsArgument`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for param in self.params:
            if isinstance(param, TyperArgument) and param.nargs == -1:
                param.__class__ = _PathsArgument


@app.command(cls=_PathsCommand)
def case(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH", help="case files or folders of them")],
    out: Annotated[Path, typer.Option(metavar="DIR", help="folder for the transcripts (<id>.json)")] = Path(
        "out/cases"
    ),
) -> None:
    """Run case files (unit and scenario) and write each transcript to OUT/<id>.json."""
    from streamrelay.app.cases import start_case_files

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
        with _case_progress() as progress, StillRunning(err) as still:
            task = progress.add_task("cases", total=len(files), case="")
            still.running("the platforms' SDK import")
            runs = await start_case_files(files)  # several at once; each reported in the files' order
            for n, (file, run) in enumerate(zip(files, runs, strict=True), 1):
                progress.update(task, case=file.stem)
                still.running(file.stem)
                result = await run
                still.running(None)
                (out / f"{result.id}.json").write_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
                verdict = (
                    "[green]pass[/]"
                    if result.passed
                    else ("[yellow]unsupported[/]" if result.unsupported else "[red]FAIL[/]")
                )
                failed += not result.passed
                why = "; ".join(result.failures)[:300]
                table.add_row(result.id, result.type, verdict, f"{result.seconds:.2f}", why)
                done = f"{n:>{len(str(len(files)))}}/{len(files)}"
                progress.console.print(f"{done} {verdict} {escape(result.id)} ({result.seconds:.2f} s)")
                progress.advance(task)
        console.print(table)
        console.print(f"{len(files) - failed} passed, {failed} failed · transcripts in {out}")
        return 1 if failed else 0

    raise typer.Exit(_run(main()))


@app.command()
def mock(
    platform: Annotated[
        str,
        typer.Argument(
            callback=_one_of(MOCK_PLATFORMS),
            metavar="PLATFORM",
            help=f"which platform's API to mock: {', '.join(MOCK_PLATFORMS)}",
        ),
    ],
    port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, metavar="PORT", help=f"port (default: {DEFAULT_PORTS})"),
    ] = None,
    rate_limits: Annotated[bool, typer.Option(help="answer 429 past the platform's documented limits")] = True,
    host: Annotated[
        str,
        typer.Option(
            metavar="HOST", help="interface (a container's mock for other containers: 0.0.0.0; never a real token)"
        ),
    ] = "127.0.0.1",
) -> None:
    """Run a mock platform API (on 127.0.0.1 by default) for dry runs (point a channel's api_base at the URL it
    prints)."""
    from streamrelay.app.dry_run import DRY_RUN

    dry = DRY_RUN[platform]
    port = dry.default_port if port is None else port
    refuse_taken(host, port, "pass --port")
    _run(dry.serve(host, port, rate_limits))


app.command()(chaos)


@app.command()
def schema(
    out: Annotated[Path, typer.Option(metavar="DIR", help="folder to write the schemas into")] = Path("docs/schema"),
    check: Annotated[bool, typer.Option(help="write nothing; exit 1 when a file differs from the models")] = False,
) -> None:
    """Write the public contracts' JSON Schemas (pipeline units, live events, the run report, …) from their models."""
    from streamrelay.app.schema import stale, write_schemas

    if check:
        behind = stale(out)
        for name in behind:
            err.print(f"{out / name} is stale: run `uv run streamrelay schema --out {out}`")
        raise typer.Exit(1 if behind else 0)
    for path in write_schemas(out):
        console.print(str(path))


def main() -> None:
    """Entry point of the ``streamrelay`` script."""
    app(sys.argv[1:])
