"""``streamrelay runs``: what a running service is doing, for its operator.

::

    streamrelay runs [--url URL] [--token-env STREAMRELAY_TOKEN] [--json]   active runs (GET /v1/runs?all=1)
    streamrelay runs --dead [--config channels.toml] [--json]                every partition's dead letters
    streamrelay runs retry PARTITION ID [--config channels.toml]             a dead letter back into its input stream
    streamrelay runs drop PARTITION ID [--config channels.toml]              a dead letter deleted for good

Active runs come from the sidecar (any replica answers for all of them). Dead letters exist only on the Redis
backend (input lines a partition's owner failed to take too many times: :mod:`adapters.redis.stream`); they are read
from Redis directly, connected as ``streamrelay serve`` connects (the TOML's ``[service]`` and the environment's
overrides: ``redis_url``, or the primary ``redis_sentinels`` name for ``redis_sentinel_master``). With one process on
SQLite there are none: a bad line is refused at ingest.

Every failure is one line on stderr and an exit code: 2 for what the operator must fix first (no token, a wrong
configuration, a partition that does not exist, the SQLite backend for ``retry`` / ``drop``), 1 for what is down,
refused or unknown (the sidecar or Redis unreachable, a wrong token, an unknown dead letter).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamrelay.config.paths import SHIPPED
from streamrelay.core.errors import ConfigError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from streamrelay.adapters.redis import DeadLetter
    from streamrelay.config.settings import ServiceSettings

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_CONFIG = SHIPPED / "channels.toml"
"""The shipped channels file (streamrelay/config/channels.toml), found wherever the package is installed."""
TOKEN_ENV = "STREAMRELAY_TOKEN"
HTTP_TIMEOUT_S = 10.0
DEAD_PER_PARTITION = 100
"""At most this many dead letters are listed per partition (oldest first)."""
SQLITE_HAS_NONE = "the SQLite backend (one process) keeps no dead letters: a bad line is refused at ingest with a 4xx"
LETTER_ID = re.compile(r"^\d+-\d+$")
NONE = "-"
"""A cell without a value."""
NUMBERS = ("age", "✓", "?", "✗", "429")
LEGEND = "parts: ✓ confirmed, ? uncertain, ✗ failed · 429: rate limits met so far"

console = Console()
err = Console(stderr=True, soft_wrap=True)


class OpsError(Exception):
    """A one-line failure of ``streamrelay runs`` and its exit code (module docstring)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- the sidecar's active runs ------------------------------------------------------------------------------


async def fetch_runs(url: str, token: str, *, token_env: str = "the token variable") -> dict[str, Any]:
    """``GET {url}/v1/runs?all=1``: ``{"runs": [...], "unreachable": [...]}`` (adapters/ingest_http/app.py).

    Raises:
        OpsError: the sidecar is unreachable, refused the token, or answered something else.
    """
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            answer = await http.get(url.rstrip("/") + "/v1/runs", params={"all": "1"}, headers=headers)
    except httpx.TimeoutException:
        raise OpsError(f"the sidecar at {url} did not answer within {HTTP_TIMEOUT_S:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        why = type(exc).__name__
        raise OpsError(
            f"cannot reach the sidecar at {url} ({why}): start it (`streamrelay serve`), or point --url / "
            "STREAMRELAY_URL at the one that runs"
        ) from None
    if answer.status_code == 401:
        raise OpsError(
            f"the sidecar at {url} refused the token in {token_env} (401): export the value it was started with"
        )
    if answer.status_code != 200:
        raise OpsError(f"the sidecar at {url} answered {answer.status_code}: {_error_of(answer.text)}")
    try:
        listing = answer.json()
        rows = listing["runs"]
    except (ValueError, KeyError, TypeError):
        raise OpsError(f"the sidecar at {url} did not answer with a run list: is it a streamrelay sidecar?") from None
    if not isinstance(rows, list):
        raise OpsError(f"the sidecar at {url} did not answer with a run list: is it a streamrelay sidecar?")
    return {"runs": rows, "unreachable": listing.get("unreachable") or []}


def _error_of(body: str) -> str:
    """The ``error`` of a JSON error answer, else the body's start (one line)."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return " ".join(body.split())[:200] or "(no body)"


def age(seconds: float | None) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 7 min``; ``-`` when unknown."""
    if seconds is None:
        return NONE
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def runs_table(listing: dict[str, Any]) -> Table:
    """The active runs as a table (their live pages go below it: :func:`live_pages`)."""
    rows = listing["runs"]
    replicas = any(row.get("replica") for row in rows)
    title = f"{len(rows)} active run{'' if len(rows) == 1 else 's'}"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=LEGEND, caption_justify="left")
    table.add_column("run", overflow="fold", min_width=8)
    for name in ("channel", "mode", "age", "delivery", "✓", "?", "✗", "429"):
        table.add_column(name, justify="right" if name in NUMBERS else "left", no_wrap=True)
    if replicas:
        table.add_column("replica", overflow="fold")
    for row in rows:
        channel = str(row.get("channel") or NONE)
        if row.get("platform") and row["platform"] != channel:
            channel += f" ({row['platform']})"
        cells = [str(row.get("run")), channel, str(row.get("mode") or NONE), age(row.get("age_s"))]
        cells += [_status(str(row.get("status"))), str(row.get("confirmed", 0))]
        cells += [_hot(row.get("uncertain", 0), "yellow"), _hot(row.get("failed", 0), "red")]
        cells += [_hot(row.get("rate_limited", 0), "yellow")]
        cells += [str(row.get("replica") or NONE)] if replicas else []
        table.add_row(*cells)
    return table


def live_pages(listing: dict[str, Any], url: str) -> list[str]:
    """``<run>  <its live page's URL on url>``, one line per run that has a live page."""
    pages = []
    for row in listing["runs"]:
        watch = row.get("watch")
        if isinstance(watch, str) and watch.startswith("/"):
            pages.append(f"{row.get('run')}  {url.rstrip('/')}{watch}")
    return pages


def _status(status: str) -> str:
    color = {"delivered": "green", "partial": "yellow", "empty": "yellow", "failed": "red"}.get(status, "blue")
    return f"[{color}]{status}[/]"


def _hot(value: Any, color: str) -> str:
    return f"[bold {color}]{value}[/]" if isinstance(value, int) and value > 0 else str(value)


# --- dead letters (Redis backend) ---------------------------------------------------------------------------


def redis_target(config: Path) -> tuple[ServiceSettings, int] | None:
    """The ``[service]`` settings ``streamrelay serve`` would reach its Redis with (``redis_url``, or
    ``redis_sentinels`` and ``redis_sentinel_master``) and its partition count, from ``config`` (the TOML, the
    environment's overrides); None for the SQLite backend.

    Raises:
        ConfigError: the settings are wrong.
    """
    from streamrelay.config.settings import load_settings

    service = load_settings(config).service
    if service.backend != "redis":
        return None
    return service, service.partitions


async def with_redis(target: str | ServiceSettings, work: Callable[[Redis], Awaitable[T]]) -> T:
    """Run ``work`` with a client of ``target`` (a Redis URL, or the ``[service]`` settings: connected as ``serve``
    connects, :func:`app.redis_target.connect_service`) and close it; Redis failures become one line (the URL
    redacted).

    Raises:
        OpsError: Redis is unreachable or refused a command.
        ConfigError: the URL is not a Redis URL.
    """
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from streamrelay.adapters.redis import connect, redacted
    from streamrelay.app.redis_target import connect_service, redis_where

    options: dict[str, Any] = {"client_name": "streamrelay-runs", "socket_timeout_s": 10.0}
    if isinstance(target, str):
        client, where = connect(target, **options), redacted(target)
    else:
        client, where = connect_service(target, **options), redis_where(target)
    try:
        return await work(client)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise OpsError(f"cannot reach Redis at {where} ({type(exc).__name__}): is it running?") from None
    except RedisError as exc:
        raise OpsError(f"Redis at {where} refused: {exc}") from None
    finally:
        await client.aclose()


async def dead_letters(target: str | ServiceSettings, partitions: int) -> list[tuple[int, DeadLetter]]:
    """Every partition's dead letters (oldest first, at most :data:`DEAD_PER_PARTITION` each), with the partition;
    ``target`` as :func:`with_redis`'s.

    Raises:
        OpsError: Redis is unreachable.
    """
    from streamrelay.adapters.redis import InputStream

    async def read(client: Redis) -> list[tuple[int, DeadLetter]]:
        stream = InputStream(client)
        found = await asyncio.gather(*(stream.dead(p, count=DEAD_PER_PARTITION) for p in range(partitions)))
        return [(p, letter) for p, letters in enumerate(found) for letter in letters]

    return await with_redis(target, read)


def _checked(target: tuple[ServiceSettings, int] | None, partition: int, letter_id: str) -> ServiceSettings:
    """The ``[service]`` settings, once the backend is Redis and ``partition`` and ``letter_id`` can exist.

    Raises:
        OpsError: the SQLite backend, a partition out of range, not a stream id (exit 2).
    """
    if target is None:
        raise OpsError(SQLITE_HAS_NONE, code=2)
    service, partitions = target
    if not 0 <= partition < partitions:
        raise OpsError(f"partition {partition} does not exist: this deployment has 0 to {partitions - 1}", code=2)
    if not LETTER_ID.match(letter_id):
        raise OpsError(f"{letter_id!r} is not a dead letter id (like 1712345678901-0: see streamrelay runs --dead)", 2)
    return service


async def retry_letter(target: tuple[ServiceSettings, int] | None, partition: int, letter_id: str) -> str:
    """Put dead letter ``letter_id`` of ``partition`` back at the end of its input stream; its new id there.

    Raises:
        OpsError: as :func:`_checked`; Redis unreachable; no such dead letter (exit 1).
    """
    from streamrelay.adapters.redis import InputStream

    service = _checked(target, partition, letter_id)
    new_id = await with_redis(service, lambda client: InputStream(client).retry(partition, letter_id))
    if new_id is None:
        raise OpsError(f"partition {partition} has no dead letter {letter_id}")
    return new_id


async def drop_letter(target: tuple[ServiceSettings, int] | None, partition: int, letter_id: str) -> None:
    """Delete dead letter ``letter_id`` of ``partition`` for good.

    Raises:
        OpsError: as :func:`retry_letter`.
    """
    from streamrelay.adapters.redis import InputStream

    service = _checked(target, partition, letter_id)
    if not await with_redis(service, lambda client: InputStream(client).drop(partition, letter_id)):
        raise OpsError(f"partition {partition} has no dead letter {letter_id}")


def dead_table(letters: list[tuple[int, DeadLetter]]) -> Table:
    table = Table(title=f"{len(letters)} dead letter{'' if len(letters) == 1 else 's'}", title_justify="left")
    for name in ("partition", "id", "run", "deliveries", "last owner", "line"):
        table.add_column(name, overflow="fold")
    for partition, letter in letters:
        line = letter.line if len(letter.line) <= 160 else letter.line[:159] + "…"
        table.add_row(str(partition), letter.id, letter.run, str(letter.deliveries), letter.consumer, line)
    return table


# --- the commands ---------------------------------------------------------------------------------------------

runs_app = typer.Typer(add_completion=False, rich_markup_mode=None)

ConfigOption = Annotated[
    Path, typer.Option(metavar="FILE", help="channels TOML: the backend and Redis serve would use")
]


@contextlib.contextmanager
def _one_line() -> Iterator[None]:
    """An :class:`OpsError` or a configuration error inside becomes one line on stderr and its exit code."""
    try:
        yield
    except OpsError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(exc.code) from None
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Option(envvar="STREAMRELAY_URL", metavar="URL", help="the sidecar's base URL (any replica)")
    ] = DEFAULT_URL,
    token_env: Annotated[
        str, typer.Option(metavar="VAR", help="environment variable holding the sidecar token")
    ] = "STREAMRELAY_TOKEN",
    dead: Annotated[bool, typer.Option("--dead", help="list the dead letters instead (Redis backend)")] = False,
    config: ConfigOption = DEFAULT_CONFIG,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """List the active runs of a running sidecar (every replica's), or the dead letters of the Redis backend.

    streamrelay runs [--url URL]           the active runs: delivery state, parts, 429s met, live page

    streamrelay runs --dead                every partition's dead letters (input lines that failed too often)

    streamrelay runs retry PARTITION ID    put a dead letter back into its partition's input stream

    streamrelay runs drop PARTITION ID     delete a dead letter for good

    streamrelay runs correct RUN --id ID --text TEXT   correct an ended run's answer (each message edited once)

    streamrelay runs retract RUN --id ID   withdraw an ended run's answer (each message deleted once)

    streamrelay runs corrections RUN       what each correction changed, per message
    """
    if ctx.invoked_subcommand is not None:
        return
    if dead:
        _show_dead(config, as_json)
        return
    token = os.environ.get(token_env, "")
    if not token:
        err.print(
            f"[red]error:[/] environment variable {token_env} is not set: export the bearer token the sidecar was "
            f"started with (`export {token_env}=...` in this shell, the same value `streamrelay serve` has)"
        )
        raise typer.Exit(2)
    with _one_line():
        listing = asyncio.run(fetch_runs(url, token, token_env=token_env))
    if as_json:
        typer.echo(json.dumps(listing, indent=1, ensure_ascii=False))
        return
    console.print(runs_table(listing))
    if pages := live_pages(listing, url):
        console.print("live pages:")
        for page in pages:
            console.print(f"  {page}", soft_wrap=True, highlight=False, markup=False)
    for lost in listing["unreachable"]:
        where = " ".join(str(v) for v in (lost.get("replica") or "Redis", lost.get("url")) if v)
        err.print(f"[yellow]not shown:[/] the runs of {where}: {lost.get('error')}", highlight=False)


def _show_dead(config: Path, as_json: bool) -> None:
    with _one_line():
        target = redis_target(config)
        if target is None:
            console.print(SQLITE_HAS_NONE)
            return
        letters = asyncio.run(dead_letters(*target))
    if as_json:
        rows = [{"partition": p, **dataclasses.asdict(letter)} for p, letter in letters]
        typer.echo(json.dumps(rows, indent=1, ensure_ascii=False))
    else:
        console.print(dead_table(letters))


PartitionArg = Annotated[
    int, typer.Argument(metavar="PARTITION", help="the dead letter's partition (the first column of --dead)")
]
LetterArg = Annotated[str, typer.Argument(metavar="ID", help="the dead letter's id (the second column of --dead)")]


@runs_app.command()
def retry(partition: PartitionArg, letter_id: LetterArg, config: ConfigOption = DEFAULT_CONFIG) -> None:
    """Put a dead letter back at the end of its partition's input stream: the partition's owner takes it again."""
    with _one_line():
        new_id = asyncio.run(retry_letter(redis_target(config), partition, letter_id))
    console.print(f"dead letter {letter_id} of partition {partition} is back in its input stream as {new_id}")


@runs_app.command()
def drop(partition: PartitionArg, letter_id: LetterArg, config: ConfigOption = DEFAULT_CONFIG) -> None:
    """Delete a dead letter for good (its line is never delivered)."""
    with _one_line():
        asyncio.run(drop_letter(redis_target(config), partition, letter_id))
    console.print(f"dead letter {letter_id} of partition {partition} dropped")
