"""``streamrelay audit RUN`` and ``streamrelay runs erase RUN``: what the platform shows of a run now, and erasing
what the sidecar keeps of it.

::

    streamrelay audit RUN [--json]     each delivered message read back from the platform (docs/audit.md)
    streamrelay runs erase RUN [--json]   the run's text removed from every store (docs/retention.md)
    streamrelay erase --channel NAME --chat ID   every run of that chat, erased the same way

Each talks to the running sidecar (``--url`` / ``STREAMRELAY_URL``, the token in ``STREAMRELAY_TOKEN`` or
``--token-env``): it holds the platform connections and the stores. Failures are one line on stderr: exit 2 for no
token, 1 for what is down, refused or unknown. ``audit`` exits 3 when a message is no longer shown as delivered
(``changed`` or ``gone``), so a script can alert on it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from streamrelay.app.corrections_cli import JsonOption, RunArg, TokenEnvOption, UrlOption
from streamrelay.app.deliveries_cli import _token, call, console, err
from streamrelay.app.ops_cli import DEFAULT_URL, TOKEN_ENV, OpsError

DRIFT_EXIT = 3
"""``audit``'s exit status when a message is ``changed`` or ``gone``."""
VERDICT_COLORS = {"as_delivered": "green", "changed": "yellow", "gone": "red", "unreadable": "yellow"}


def _request(method: str, path: str, url: str, token_env: str) -> dict[str, Any]:
    token = _token(token_env)
    try:
        status, data = asyncio.run(call(method, url, path, token))
    except OpsError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(exc.code) from None
    if status != 200:
        err.print(f"[red]error:[/] {escape(str(data.get('error') or status))}", highlight=False)
        raise typer.Exit(1)
    return data


def audit_table(report: dict[str, Any]) -> Table:
    """An audit's messages, one row each."""
    title = (
        f"run {report.get('run')} on {report.get('channel')} ({report.get('platform')}): {report.get('drift')} drift"
    )
    table = Table(box=box.SIMPLE_HEAD, title=escape(title), title_justify="left")
    for column in ("part", "message", "verdict", "detail"):
        table.add_column(column, overflow="fold")
    for row in report.get("messages", []):
        verdict = str(row.get("verdict"))
        table.add_row(
            escape(f"{row.get('role')} {row.get('slot')}"),
            escape(str(row.get("message_id"))),
            f"[{VERDICT_COLORS.get(verdict, 'white')}]{escape(verdict)}[/]",
            escape(str(row.get("detail") or "")),
        )
    return table


def audit(
    run: RunArg, url: UrlOption = DEFAULT_URL, token_env: TokenEnvOption = TOKEN_ENV, as_json: JsonOption = False
) -> None:
    """Read each message RUN delivered back from the platform: shown as delivered, changed, or gone (exit 3 when
    one is changed or gone). Telegram cannot be read back: the report says so."""
    report = _request("GET", f"/v1/runs/{quote(run, safe='')}/audit", url, token_env)
    if as_json:
        typer.echo(json.dumps(report, indent=1, ensure_ascii=False))
    elif not report.get("readable"):
        console.print(f"run {escape(run)} cannot be audited: {escape(str(report.get('note')))}", highlight=False)
    else:
        console.print(audit_table(report))
    if report.get("drift"):
        raise typer.Exit(DRIFT_EXIT)


def erase(
    run: RunArg, url: UrlOption = DEFAULT_URL, token_env: TokenEnvOption = TOKEN_ENV, as_json: JsonOption = False
) -> None:
    """Erase RUN's text from every store the sidecar keeps (journal, ledger, desk, corrections, memory): its ids,
    states and counts stay. The run must have ended (stop it first). Running it again removes nothing more."""
    answer = _request("DELETE", f"/v1/runs/{quote(run, safe='')}", url, token_env)
    if as_json:
        typer.echo(json.dumps(answer, indent=1, ensure_ascii=False))
        return
    removed = answer.get("removed") or {}
    what = ", ".join(f"{store}: {count}" for store, count in removed.items())
    console.print(f"run {escape(run)} erased ({escape(what)})", highlight=False)


def erase_chat(
    channel: Annotated[str, typer.Option("--channel", metavar="NAME", help="the configured channel")],
    chat: Annotated[str, typer.Option("--chat", metavar="CHAT_ID", help="the chat's id on that channel")],
    url: UrlOption = DEFAULT_URL,
    token_env: TokenEnvOption = TOKEN_ENV,
    as_json: JsonOption = False,
) -> None:
    """Erase the text of every run (of this token's client) that went to one chat: what `runs erase` does for each,
    in one pass. Active runs there must end first (nothing is erased while one is active)."""
    path = f"/v1/conversations/{quote(channel, safe='')}/{quote(chat, safe='')}"
    answer = _request("DELETE", path, url, token_env)
    if as_json:
        typer.echo(json.dumps(answer, indent=1, ensure_ascii=False))
        return
    runs = answer.get("runs") or []
    removed = answer.get("removed") or {}
    what = ", ".join(f"{store}: {count}" for store, count in removed.items())
    console.print(
        f"{len(runs)} run(s) of {escape(channel)} chat {escape(chat)} erased ({escape(what)})", highlight=False
    )


def register(app: typer.Typer, runs: typer.Typer) -> None:
    """Add ``audit`` and ``erase`` (a chat) to the top-level commands and ``erase`` (a run) to ``streamrelay runs``."""
    app.command("audit")(audit)
    app.command("erase")(erase_chat)
    runs.command("erase")(erase)
