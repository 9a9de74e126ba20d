"""``streamrelay deliveries``: the desk of a running sidecar, the parts of ended runs not known to be delivered.

::

    streamrelay deliveries [--state uncertain,failed,unsent|all] [--json]   list them (GET /v1/deliveries)
    streamrelay deliveries show ID                                         one, with its text
    streamrelay deliveries resend ID                                       deliver it once (settled first)
    streamrelay deliveries resolve ID [--note TEXT]                        mark it handled by hand
    streamrelay deliveries prune --older-than 7d                           delete older entries

Every command talks to the sidecar (``--url`` / ``STREAMRELAY_URL``, the token in ``STREAMRELAY_TOKEN`` or
``--token-env``): the sidecar holds the platform connections a resend needs. A client's token sees its own runs'
entries only. Failures are one line on stderr: exit 2 for what the operator must fix first (no token, a bad
argument), 1 for what is down, refused, unknown or not possible (the sidecar unreachable, a wrong token, an entry
already delivered, a platform that cannot tell whether the first copy landed).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamrelay.app.ops_cli import DEFAULT_URL, HTTP_TIMEOUT_S, NONE, TOKEN_ENV, OpsError, age

console = Console()
err = Console(stderr=True, soft_wrap=True)

STATE_COLORS = {"uncertain": "yellow", "failed": "red", "unsent": "blue", "delivered": "green", "resolved": "green"}
LEGEND = (
    "uncertain: may have landed (settled before any resend) · failed: refused · unsent: the run ended first · "
    "resend ID delivers it once"
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def duration_s(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` in seconds.

    Raises:
        typer.BadParameter: not such a duration.
    """
    found = _DURATION.match(text)
    if found is None:
        raise typer.BadParameter(f"{text!r} is not a duration: a number with s, m, h or d (e.g. 7d, 12h, 90s)")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


async def call(
    method: str,
    url: str,
    path: str,
    token: str,
    *,
    params: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One request to the sidecar: its status and JSON object body.

    Raises:
        OpsError: the sidecar is unreachable, refused the token, or did not answer with JSON.
    """
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S * 6) as http:
            answer = await http.request(method, url.rstrip("/") + path, params=params, json=body, headers=headers)
    except httpx.TimeoutException:
        raise OpsError(f"the sidecar at {url} did not answer within {HTTP_TIMEOUT_S * 6:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise OpsError(
            f"cannot reach the sidecar at {url} ({type(exc).__name__}): start it (`streamrelay serve`), or point "
            "--url / STREAMRELAY_URL at the one that runs"
        ) from None
    if answer.status_code == 401:
        raise OpsError(f"the sidecar at {url} refused the token (401): export the value it was started with")
    try:
        data = answer.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise OpsError(f"the sidecar at {url} answered {answer.status_code} without JSON: is it a streamrelay sidecar?")
    return answer.status_code, data


def _state(state: str) -> str:
    return f"[{STATE_COLORS.get(state, 'white')}]{escape(state)}[/]"


def _chat(chat: Any) -> str:
    if not isinstance(chat, dict):
        return NONE
    text = str(chat.get("chat_id", NONE))
    if chat.get("thread_id") is not None:
        text += f" / {chat['thread_id']}"
    return text


def deliveries_table(listing: dict[str, Any]) -> Table:
    """The entries as a table (``GET /v1/deliveries``'s answer), with the counts per state in its title."""
    rows = listing.get("deliveries") or []
    counts = listing.get("counts") or {}
    open_counts = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("uncertain", "failed", "unsent"))
    title = f"{len(rows)} deliver{'y' if len(rows) == 1 else 'ies'} listed ({open_counts} in all)"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=LEGEND, caption_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("run", overflow="fold", min_width=8)
    for name in ("client", "channel", "chat", "part", "state", "age"):
        table.add_column(name, justify="right" if name == "age" else "left", no_wrap=True)
    table.add_column("error / outcome", overflow="fold")
    for row in rows:
        part = f"{row.get('role')} {row.get('slot')}"
        why = row.get("outcome") or row.get("error") or NONE
        if row.get("note"):
            why = f"{why} · note: {row['note']}"
        table.add_row(
            str(row.get("id")),
            escape(str(row.get("run"))),
            escape(str(row.get("client"))),
            escape(str(row.get("channel"))),
            escape(_chat(row.get("chat"))),
            part,
            _state(str(row.get("state"))),
            age(row.get("age_s")),
            escape(str(why)),
        )
    return table


def entry_panel(row: dict[str, Any]) -> Table:
    """One entry, field by field (``show``, and what ``resend`` / ``resolve`` did)."""
    table = Table(box=box.SIMPLE, show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key in ("id", "run", "client", "channel", "chat", "slot", "role", "state", "was", "error", "outcome", "note"):
        value = row.get(key)
        if key == "chat":
            value = _chat(value)
        shown = _state(str(value)) if key in ("state", "was") else escape(str(value if value is not None else NONE))
        table.add_row(key, shown)
    table.add_row("message id", escape(str(row.get("message_id") or NONE)))
    table.add_row("delivery id", escape(str(row.get("delivery_id") or NONE)))
    table.add_row("age", age(row.get("age_s")))
    table.add_row("resends", str(row.get("resends", 0)))
    if "text" in row:
        table.add_row("text", escape(str(row["text"])))
    else:
        table.add_row("chars", str(row.get("chars", 0)))
    return table


deliveries_app = typer.Typer(add_completion=False, rich_markup_mode=None)

UrlOption = Annotated[str, typer.Option(envvar="STREAMRELAY_URL", metavar="URL", help="the sidecar's base URL")]
TokenEnvOption = Annotated[str, typer.Option(metavar="VAR", help="environment variable holding the sidecar token")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="the entry's id (the first column of the listing)")]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def _token(token_env: str) -> str:
    token = os.environ.get(token_env, "")
    if not token:
        err.print(
            f"[red]error:[/] environment variable {token_env} is not set: export the bearer token the sidecar was "
            f"started with (`export {token_env}=...`, the same value `streamrelay serve` has)"
        )
        raise typer.Exit(2)
    return token


def _ask(method: str, url: str, path: str, token_env: str, **kwargs: Any) -> dict[str, Any]:
    """One request; an error answer (or an unreachable sidecar) is one line on stderr and exit 1 (2 for a 400)."""
    token = _token(token_env)
    try:
        status, data = asyncio.run(call(method, url, path, token, **kwargs))
    except OpsError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(exc.code) from None
    if status != 200:
        err.print(f"[red]error:[/] {escape(str(data.get('error') or status))}", highlight=False)
        if isinstance(data.get("delivery"), dict):
            err.print(entry_panel(data["delivery"]))
        raise typer.Exit(2 if status == 400 else 1)
    return data


@deliveries_app.callback(invoke_without_command=True)
def deliveries(
    ctx: typer.Context,
    state: Annotated[
        str,
        typer.Option(metavar="STATES", help="uncertain, failed, unsent, delivered, resolved (comma separated) or all"),
    ] = "uncertain,failed,unsent",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="list at most this many")] = 200,
    url: UrlOption = DEFAULT_URL,
    token_env: TokenEnvOption = TOKEN_ENV,
    as_json: JsonOption = False,
) -> None:
    """The parts of ended runs not known to be delivered: list, show, resend, resolve, prune.

    streamrelay deliveries [--state all]        the open ones (uncertain, failed, unsent), oldest first

    streamrelay deliveries show ID              one, with its text

    streamrelay deliveries resend ID            deliver it once: an uncertain one is settled with the platform first

    streamrelay deliveries resolve ID --note T  mark it handled by hand

    streamrelay deliveries prune --older-than 7d
    """
    ctx.obj = {"url": url, "token_env": token_env}
    if ctx.invoked_subcommand is not None:
        return
    listing = _ask("GET", url, "/v1/deliveries", token_env, params={"state": state, "limit": str(limit)})
    if as_json:
        typer.echo(json.dumps(listing, indent=1, ensure_ascii=False))
        return
    console.print(deliveries_table(listing))


def _where(ctx: typer.Context) -> tuple[str, str]:
    obj = ctx.obj or {}
    return str(obj.get("url", DEFAULT_URL)), str(obj.get("token_env", TOKEN_ENV))


@deliveries_app.command()
def show(ctx: typer.Context, entry_id: IdArg, as_json: JsonOption = False) -> None:
    """One entry with its text."""
    url, token_env = _where(ctx)
    row = _ask("GET", url, f"/v1/deliveries/{entry_id}", token_env)
    if as_json:
        typer.echo(json.dumps(row, indent=1, ensure_ascii=False))
        return
    console.print(entry_panel(row))


@deliveries_app.command()
def resend(ctx: typer.Context, entry_id: IdArg, as_json: JsonOption = False) -> None:
    """Deliver an entry once: an uncertain one is settled with the platform first (found: nothing is sent); a part
    known delivered is never resent."""
    url, token_env = _where(ctx)
    row = _ask("POST", url, f"/v1/deliveries/{entry_id}/resend", token_env)
    if as_json:
        typer.echo(json.dumps(row, indent=1, ensure_ascii=False))
        return
    console.print(f"{entry_id}: {_state(str(row.get('state')))}: {escape(str(row.get('outcome')))}", highlight=False)


@deliveries_app.command()
def resolve(
    ctx: typer.Context,
    entry_id: IdArg,
    note: Annotated[str, typer.Option(metavar="TEXT", help="how it was handled")] = "resolved by hand",
) -> None:
    """Mark an entry handled by hand (it leaves the open list; nothing is sent)."""
    url, token_env = _where(ctx)
    row = _ask("POST", url, f"/v1/deliveries/{entry_id}/resolve", token_env, body={"note": note})
    console.print(f"{entry_id}: {_state(str(row.get('state')))}: {escape(str(row.get('note')))}", highlight=False)


@deliveries_app.command()
def prune(
    ctx: typer.Context,
    older_than: Annotated[str, typer.Option("--older-than", metavar="AGE", help="e.g. 7d, 12h, 90m, 3600 (seconds)")],
) -> None:
    """Delete the entries of runs that ended longer ago than AGE (open or not)."""
    url, token_env = _where(ctx)
    seconds = duration_s(older_than)
    data = _ask("POST", url, "/v1/deliveries/prune", token_env, body={"older_than_s": seconds})
    console.print(f"{data.get('pruned', 0)} entries pruned (runs ended more than {older_than} ago)")
